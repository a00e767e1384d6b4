// The live calls page: the tools from /ui/state, refreshed every few
// seconds, and one row per call from /events, moving pending → running →
// completed or error. Plain DOM, no framework, no build step.
//
// The totals and each tool's charts (calls per minute, error rate, p50
// and p95 latency over the last minutes) are drawn from the final events
// the page has seen: /ui/state's recent calls when it opens, then every
// call /events streams. The gateway stores nothing for them, and they
// cover exactly the calls this viewer may see.
//
// With authentication on, /ui/state and /events need a bearer token, which
// a browser attaches neither to a navigation nor to an EventSource. So the
// page reads both with fetch, sending the token in an Authorization
// header, and parses /events's Server-Sent Events itself (readSSE),
// reconnecting with backoff as EventSource would. On a 401 it asks for the
// token, and keeps it in sessionStorage (this tab only, gone when the tab
// closes), never in an address. Without authentication no token is asked
// for.
"use strict";

const maxRows = 500;
const tokenKey = "toolgate-token";
const retryMin = 1000; // ms before the first reconnection
const retryMax = 30000; // the longest wait between reconnections
const bucketMs = 60000; // one bar of a chart: a minute
const bucketCount = 10; // the charts' window: the last 10 minutes
const maxSamples = 5000; // per tool, the newest kept
const svgNS = "http://www.w3.org/2000/svg";
const callsBody = document.querySelector("#calls tbody");
const toolsBody = document.querySelector("#tools tbody");
const statusEl = document.getElementById("status");
const loginForm = document.getElementById("login");
const tokenInput = document.getElementById("token");

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function badge(text, cls) { return el("span", { class: "badge " + cls }, text); }

// The token: in sessionStorage when the browser allows it, else in memory.
let memToken = "";
function getToken() {
  try { return sessionStorage.getItem(tokenKey) || ""; } catch { return memToken; }
}
function setToken(tok) {
  memToken = tok;
  try {
    if (tok) sessionStorage.setItem(tokenKey, tok); else sessionStorage.removeItem(tokenKey);
  } catch { /* storage refused: memory only */ }
}
function authHeaders() {
  const tok = getToken();
  return tok ? { Authorization: "Bearer " + tok } : {};
}

function renderTools(state) {
  toolsBody.replaceChildren();
  for (const s of state.sources || []) {
    let srcState = "";
    if (s.up === true) srcState = "up";
    if (s.up === false) srcState = "down";
    if (s.needs_auth) {
      // Waiting for a person: the command to run, with or without tools.
      const row = el("tr", { class: "source-auth" },
        el("td", { class: "source" }, s.source),
        el("td", { colspan: "6" }, badge("needs auth", "down"), " run: ", el("code", {}, s.needs_auth)));
      row.dataset.search = s.source.toLowerCase();
      applyFilter(row);
      toolsBody.append(row);
    }
    s.tools.forEach((t, i) => {
      const cells = [];
      if (t.circuit) cells.push(badge("circuit " + t.circuit, t.circuit));
      if (srcState) cells.unshift(badge(srcState, srcState));
      const row = el("tr", { class: "tool", "data-tool": t.name },
        el("td", { class: "source" }, i === 0 ? s.source : ""),
        el("td", {}, t.name), el("td", {}, t.kind), el("td", {}, ...cells),
        el("td", { class: "stat rate" }), el("td", { class: "stat errors" }), el("td", { class: "stat latency" }));
      row.dataset.search = (s.source + " " + t.name + " " + t.kind).toLowerCase();
      drawStats(row);
      applyFilter(row);
      toolsBody.append(row);
    });
  }
}

// stats holds, per tool, the final events seen within the window:
// {t: the event's time in ms, ms: its duration, err: whether it failed},
// oldest first. counted keeps the IDs already in stats, so that a call
// listed again by /ui/state after a reconnection is not counted twice.
const stats = new Map();
const counted = new Set();

// record adds a final event to the statistics.
function record(e) {
  if ((e.state !== "completed" && e.state !== "error") || counted.has(e.id)) return;
  counted.add(e.id);
  if (counted.size > maxSamples * 4) counted.delete(counted.values().next().value);
  const t = Date.parse(e.time) || Date.now();
  let list = stats.get(e.tool);
  if (!list) { list = []; stats.set(e.tool, list); }
  list.push({ t, ms: e.duration_ms || 0, err: e.state === "error" });
  if (list.length > maxSamples) list.splice(0, list.length - maxSamples);
  scheduleStats();
}

// windowStart is the start of the oldest bucket of the charts' window.
function windowStart(now) { return (Math.floor(now / bucketMs) - bucketCount + 1) * bucketMs; }

// quantile returns the q-quantile of the sorted numbers xs (nearest rank).
function quantile(xs, q) { return xs.length ? xs[Math.max(0, Math.ceil(q * xs.length) - 1)] : NaN; }

// summarize returns, for samples, the per-bucket counts, errors and
// latencies over the window, and the totals.
function summarize(samples, now) {
  const start = windowStart(now);
  const b = Array.from({ length: bucketCount }, () => ({ n: 0, errors: 0, ms: [] }));
  const all = [];
  let errors = 0;
  for (const s of samples) {
    if (s.t < start) continue;
    const k = Math.min(bucketCount - 1, Math.floor((s.t - start) / bucketMs));
    b[k].n++; b[k].ms.push(s.ms); all.push(s.ms);
    if (s.err) { b[k].errors++; errors++; }
  }
  for (const x of b) { x.ms.sort((p, q) => p - q); x.p50 = quantile(x.ms, 0.5); x.p95 = quantile(x.ms, 0.95); }
  all.sort((p, q) => p - q);
  return { buckets: b, n: all.length, errors, p50: quantile(all, 0.5), p95: quantile(all, 0.95) };
}

function svgEl(tag, attrs, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

const chartW = 100, chartH = 22, barW = chartW / bucketCount;

// barChart draws values (0..max) as one bar per bucket.
function barChart(kind, values, max, title, cls) {
  const svg = svgEl("svg", { class: "chart " + kind, width: chartW, height: chartH, viewBox: `0 0 ${chartW} ${chartH}`, role: "img" },
    svgEl("title", {}, title));
  values.forEach((v, i) => {
    if (!(v > 0)) return;
    const h = Math.max(1.5, (v / max) * (chartH - 2));
    svg.append(svgEl("rect", { class: "bar " + cls, x: (i * barW + 1).toFixed(1), y: (chartH - h).toFixed(1), width: (barW - 2).toFixed(1), height: h.toFixed(1) }));
  });
  return svg;
}

// lineChart draws p50 and p95 per bucket as two lines, on one scale.
function lineChart(buckets, title) {
  const max = Math.max(...buckets.map((x) => x.p95).filter((v) => v > 0), 0.001);
  const svg = svgEl("svg", { class: "chart latency", width: chartW, height: chartH, viewBox: `0 0 ${chartW} ${chartH}`, role: "img" },
    svgEl("title", {}, title));
  for (const q of ["p50", "p95"]) {
    // A step per bucket with calls, so that one bucket shows as a line.
    const pts = [];
    buckets.forEach((x, i) => {
      if (!x.n) return;
      const y = (chartH - 1 - (x[q] / max) * (chartH - 3)).toFixed(1);
      pts.push(`${(i * barW + 1).toFixed(1)},${y}`, `${((i + 1) * barW - 1).toFixed(1)},${y}`);
    });
    if (pts.length) svg.append(svgEl("polyline", { class: q, points: pts.join(" ") }));
  }
  return svg;
}

function fmtMS(v) { return Number.isNaN(v) ? "–" : v < 10 ? v.toFixed(1) + " ms" : Math.round(v) + " ms"; }
function fmtPct(errors, n) { return n ? Math.round((100 * errors) / n) + "%" : "–"; }

// drawStats fills a tool row's three chart cells.
function drawStats(row) {
  const sum = summarize(stats.get(row.dataset.tool) || [], Date.now());
  const b = sum.buckets;
  const perMin = b[bucketCount - 1].n;
  const counts = b.map((x) => x.n);
  const rates = b.map((x) => (x.n ? x.errors / x.n : 0));
  row.dataset.calls = String(sum.n);
  row.querySelector(".rate").replaceChildren(
    barChart("rate", counts, Math.max(...counts, 1), "calls per minute, oldest first: " + counts.join(", "), ""),
    el("span", {}, perMin + "/min"));
  row.querySelector(".errors").replaceChildren(
    barChart("errors", rates, 1, "error rate per minute, oldest first: " + b.map((x) => fmtPct(x.errors, x.n)).join(", "), "err"),
    el("span", {}, fmtPct(sum.errors, sum.n)));
  row.querySelector(".latency").replaceChildren(
    lineChart(b, "p50 / p95 per minute, oldest first: " + b.map((x) => (x.n ? fmtMS(x.p50) + " / " + fmtMS(x.p95) : "–")).join(", ")),
    el("span", {}, fmtMS(sum.p50) + " / " + fmtMS(sum.p95)));
}

// drawTotals fills the totals over every tool's samples in the window.
function drawTotals() {
  const all = [];
  for (const list of stats.values()) all.push(...list);
  const sum = summarize(all, Date.now());
  document.getElementById("total-calls").textContent = sum.n;
  document.getElementById("total-errors").textContent = sum.errors;
  document.getElementById("total-error-rate").textContent = fmtPct(sum.errors, sum.n);
  document.getElementById("total-p50").textContent = fmtMS(sum.p50);
  document.getElementById("total-p95").textContent = fmtMS(sum.p95);
  document.getElementById("total-inflight").textContent =
    callsBody.querySelectorAll('tr.call[data-state="pending"], tr.call[data-state="running"]').length;
}

// scheduleStats redraws the totals and charts soon, once for a burst of
// events.
let statsTimer = null;
function scheduleStats() {
  if (statsTimer !== null) return;
  statsTimer = setTimeout(drawAllStats, 250);
}
function drawAllStats() {
  statsTimer = null;
  const start = windowStart(Date.now());
  for (const [tool, list] of stats) {
    const keep = list.findIndex((s) => s.t >= start);
    if (keep < 0) stats.delete(tool); else if (keep > 0) list.splice(0, keep);
  }
  for (const row of toolsBody.querySelectorAll("tr.tool")) drawStats(row);
  drawTotals();
}

// The filter: every word typed must appear in a row's tool, principal,
// session, state, class or ID (for tools: source, name or kind).
const filterInput = document.getElementById("filter");
function filterWords() { return filterInput.value.toLowerCase().split(/\s+/).filter(Boolean); }
function applyFilter(row, words = filterWords()) {
  const hide = words.some((w) => !(row.dataset.search || "").includes(w));
  row.hidden = hide;
  const next = row.nextElementSibling;
  if (row.classList.contains("call") && next && next.classList.contains("detail")) next.hidden = hide;
}
filterInput.addEventListener("input", () => {
  const words = filterWords();
  for (const row of document.querySelectorAll("#tools tr.tool, #tools tr.source-auth, #calls tr.call")) applyFilter(row, words);
});

function two(n) { return String(n).padStart(2, "0"); }
function clock(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "" : two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
}

// show puts event e in its call's row, creating the row for a new call.
function show(e) {
  let row = document.getElementById("call-" + e.id);
  if (!row) {
    row = el("tr", { id: "call-" + e.id, class: "call" },
      el("td", { class: "time", title: e.time || "" }, clock(e.time)),
      el("td", {}, e.id), el("td", { class: "tool" }, e.tool),
      el("td", { class: "principal" }, e.principal || ""), el("td", { class: "session", title: "session (hashed)" }, e.session || ""),
      el("td", { class: "state" }),
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
  row.dataset.search = [e.id, e.tool, e.principal, e.session, e.state, e.class].filter(Boolean).join(" ").toLowerCase();
  applyFilter(row);
  record(e);
  scheduleStats();
}

function toggleDetail(row) {
  if (row.dataset.state !== "error") return;
  const next = row.nextElementSibling;
  if (next && next.classList.contains("detail")) { next.remove(); return; }
  const td = el("td", { colspan: "9" }, row.dataset.message || "(no message)");
  row.after(el("tr", { class: "detail", "data-for": row.id }, td));
}

// run numbers the page's runs: signing out or a refused token ends the
// current one (its event stream stops), entering a token starts the next.
let run = 0;
let stream = null; // the AbortController of the open /events request
let awaitingToken = false;

// askToken stops following, forgets what the page showed (it was the
// previous token's) and shows the token form.
function askToken(why) {
  run++;
  if (stream) stream.abort();
  awaitingToken = true;
  toolsBody.replaceChildren();
  callsBody.replaceChildren();
  stats.clear();
  counted.clear();
  drawTotals();
  document.getElementById("who").hidden = true;
  document.getElementById("data").hidden = true;
  document.getElementById("login-why").textContent = why;
  loginForm.hidden = false;
  document.body.dataset.auth = "required";
  document.body.dataset.live = "false";
  statusEl.textContent = "authentication required";
  tokenInput.focus();
}

// unauthorized handles a 401 from /ui/state or /events.
function unauthorized() {
  if (awaitingToken) return;
  const refused = getToken() !== "";
  setToken("");
  askToken(refused
    ? "The token was not accepted. Enter a valid bearer token for this gateway."
    : "This gateway needs a bearer token to show your calls.");
}

loginForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const tok = tokenInput.value.trim();
  tokenInput.value = "";
  // What an Authorization header can carry (RFC 6750's token68); fetch
  // would refuse anything else before sending it.
  if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(tok)) {
    document.getElementById("login-why").textContent =
      "That is not a bearer token: letters, digits and - . _ ~ + / only, perhaps = at the end.";
    return;
  }
  setToken(tok);
  start();
});

document.getElementById("signout").addEventListener("click", () => {
  setToken("");
  askToken("Signed out. Enter a bearer token to show your calls.");
});

// refresh reads /ui/state; the first read of a run also shows the recent
// calls. It returns false when the gateway wants a token.
async function refresh(first) {
  try {
    const resp = await fetch("/ui/state", { cache: "no-store", headers: authHeaders() });
    if (resp.status === 401) { unauthorized(); return false; }
    if (!resp.ok) throw new Error("HTTP " + resp.status + ": " + (await resp.text()).trim());
    const state = await resp.json();
    if (awaitingToken) return false; // a sign-out meanwhile
    renderTools(state);
    if (first) for (const e of state.recent || []) show(e);
    statusEl.textContent = "gateway " + state.status;
    document.getElementById("principal").textContent = state.principal || "";
    document.getElementById("who").hidden = !state.principal;
  } catch (err) {
    statusEl.textContent = "cannot reach the gateway: " + err.message;
  }
  return true;
}

// readSSE reads Server-Sent Events from body until it ends, as the HTML
// standard's EventSource parses them: lines end in CR, LF or CRLF; a line
// is "field: value" or a comment (":…"); a blank line dispatches the
// event, calling onEvent(type, data). A "retry" field calls onRetry(ms).
async function readSSE(body, onEvent, onRetry) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", type = "", data = [];
  const line = (l) => {
    if (l === "") {
      if (data.length) onEvent(type || "message", data.join("\n"));
      type = ""; data = [];
      return;
    }
    if (l[0] === ":") return;
    const i = l.indexOf(":");
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? "" : l.slice(i + 1);
    if (value[0] === " ") value = value.slice(1);
    if (field === "event") type = value;
    else if (field === "data") data.push(value);
    else if (field === "retry" && /^\d+$/.test(value)) onRetry(Number(value));
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    const eol = /\r\n|\r|\n/g;
    let start = 0, m;
    while ((m = eol.exec(buf)) !== null) {
      if (m[0] === "\r" && eol.lastIndex === buf.length) break; // perhaps half a CRLF
      line(buf.slice(start, m.index));
      start = eol.lastIndex;
    }
    buf = buf.slice(start);
  }
}

function wait(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

// follow reads /events for as long as run r lasts, reconnecting after a
// lost stream or a network error, with a doubling wait from retryMin (or
// what the stream's retry field sets) up to retryMax, or longer when a
// 503's Retry-After says so. Any other refusal ends it, as it ends an
// EventSource.
async function follow(r) {
  let base = retryMin, delay = base, connected = false;
  while (r === run) {
    const ctl = new AbortController();
    stream = ctl;
    let resp = null;
    try {
      resp = await fetch("/events", { cache: "no-store", headers: authHeaders(), signal: ctl.signal });
    } catch { /* network error or aborted: retried below unless the run ended */ }
    if (r !== run) return;
    if (resp && resp.status === 401) { unauthorized(); return; }
    if (resp && resp.ok && resp.body) {
      document.body.dataset.live = "true";
      // Calls that finished while the stream was down are among the recent ones.
      if (connected) refresh(true);
      connected = true;
      delay = base;
      try {
        await readSSE(resp.body, (type, data) => {
          if (type === "dropped") { statusEl.textContent = "fell behind; reconnecting"; return; }
          if (type !== "call") return;
          show(JSON.parse(data));
        }, (ms) => { base = delay = ms; });
      } catch { /* the stream broke, or was aborted */ }
      if (r !== run) return;
    } else if (resp) {
      const text = (await resp.text().catch(() => "")).trim();
      if (resp.status !== 503 && resp.status < 500) {
        statusEl.textContent = "live updates refused: HTTP " + resp.status + " " + text;
        document.body.dataset.live = "false";
        return;
      }
      const after = Number(resp.headers.get("Retry-After"));
      if (after > 0) delay = Math.max(delay, after * 1000);
    }
    document.body.dataset.live = "false";
    await wait(delay * (0.75 + Math.random() / 2));
    delay = Math.min(delay * 2, retryMax);
  }
}

// start begins a run: the state, then the events.
async function start() {
  const r = ++run;
  awaitingToken = false;
  loginForm.hidden = true;
  document.getElementById("data").hidden = false;
  delete document.body.dataset.auth;
  statusEl.textContent = "connecting…";
  if (!(await refresh(true)) || r !== run) return;
  // Open a failed call's message from the address: /ui#open=c-7.
  const m = location.hash.match(/open=([\w-]+)/);
  const row = m && document.getElementById("call-" + m[1]);
  if (row && !row.nextElementSibling?.classList.contains("detail")) toggleDetail(row);
  follow(r);
}

start();
setInterval(() => { if (!awaitingToken) refresh(false); }, 5000);
// The window moves on even when no call comes.
setInterval(() => { if (!awaitingToken) scheduleStats(); }, 15000);
