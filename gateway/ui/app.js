// The live calls page: the tools from /ui/state, refreshed every few
// seconds, and one row per call from /events, moving pending → running →
// completed or error. Plain DOM, no framework, no build step.
"use strict";

const maxRows = 500;
const callsBody = document.querySelector("#calls tbody");
const toolsBody = document.querySelector("#tools tbody");
const statusEl = document.getElementById("status");

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function badge(text, cls) { return el("span", { class: "badge " + cls }, text); }

function renderTools(state) {
  toolsBody.replaceChildren();
  for (const s of state.sources || []) {
    let srcState = "";
    if (s.up === true) srcState = "up";
    if (s.up === false) srcState = "down";
    s.tools.forEach((t, i) => {
      const cells = [];
      if (t.circuit) cells.push(badge("circuit " + t.circuit, t.circuit));
      if (srcState) cells.unshift(badge(srcState, srcState));
      toolsBody.append(el("tr", { class: "tool", "data-tool": t.name },
        el("td", { class: "source" }, i === 0 ? s.source : ""),
        el("td", {}, t.name), el("td", {}, t.kind), el("td", {}, ...cells)));
    });
  }
}

// show puts event e in its call's row, creating the row for a new call.
function show(e) {
  let row = document.getElementById("call-" + e.id);
  if (!row) {
    row = el("tr", { id: "call-" + e.id, class: "call" },
      el("td", {}, e.id), el("td", { class: "tool" }, e.tool), el("td", { class: "state" }),
      el("td", { class: "attempt num" }), el("td", { class: "duration num" }), el("td", { class: "class" }));
    row.addEventListener("click", () => toggleDetail(row));
    callsBody.prepend(row);
    while (callsBody.querySelectorAll("tr.call").length > maxRows) {
      const last = callsBody.lastElementChild;
      if (last.nextElementSibling === null && last.classList.contains("detail")) last.previousElementSibling.remove();
      last.remove();
    }
  }
  const order = { pending: 0, running: 1, completed: 2, error: 2 };
  const cur = row.dataset.state;
  if (cur && order[cur] > order[e.state]) return; // a late event of a finished call
  row.dataset.state = e.state;
  row.className = "call is-" + e.state;
  row.querySelector(".state").replaceChildren(badge(e.state, e.state));
  const attempt = e.state === "running" ? e.attempt : e.attempts;
  if (attempt) row.querySelector(".attempt").textContent = attempt;
  if (e.duration_ms !== undefined) row.querySelector(".duration").textContent = e.duration_ms.toFixed(1) + " ms";
  row.querySelector(".class").textContent = e.class || "";
  if (e.message) row.dataset.message = e.message;
}

function toggleDetail(row) {
  if (row.dataset.state !== "error") return;
  const next = row.nextElementSibling;
  if (next && next.classList.contains("detail")) { next.remove(); return; }
  const td = el("td", { colspan: "6" }, row.dataset.message || "(no message)");
  row.after(el("tr", { class: "detail", "data-for": row.id }, td));
}

async function refresh(first) {
  try {
    const resp = await fetch("/ui/state", { cache: "no-store" });
    const state = await resp.json();
    renderTools(state);
    if (first) for (const e of state.recent || []) show(e);
    statusEl.textContent = "gateway " + state.status;
  } catch (err) {
    statusEl.textContent = "cannot reach the gateway: " + err;
  }
}

// /ui?until=N stops following after N calls have finished live: with
// nothing left in flight, a headless browser's virtual time can run out
// and it dumps the page (the browser test does that).
const until = Number(new URLSearchParams(location.search).get("until")) || 0;

function subscribe() {
  const es = new EventSource("/events");
  let finished = 0;
  es.addEventListener("open", () => { document.body.dataset.live = "true"; });
  es.addEventListener("call", (m) => {
    const e = JSON.parse(m.data);
    show(e);
    if (until && (e.state === "completed" || e.state === "error") && ++finished >= until) {
      es.close();
      document.body.dataset.live = "done";
    }
  });
  es.addEventListener("dropped", () => { statusEl.textContent = "fell behind; reconnecting"; });
  es.addEventListener("error", () => { document.body.dataset.live = "false"; });
}

refresh(true).then(subscribe);
setInterval(refresh, 5000);
// Open a failed call's message from the address: /ui#open=c-7.
const m = location.hash.match(/open=([\w-]+)/);
if (m) setTimeout(() => { const r = document.getElementById("call-" + m[1]); if (r) toggleDetail(r); }, 500);
