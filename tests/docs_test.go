package tests

// The documentation's snippets, loaded as a reader would use them: every
// fenced YAML and JSON block of README.md and docs/*.md parses, every
// YAML block that is a whole configuration passes `toolgate validate`
// (the real binary), the blocks that show a shipped file are that file,
// and the README's REST and upstream examples run as pasted, against an
// httptest server standing in for the demo pet store and against the
// pinned MCP servers of tests/npm.
//
// A YAML block that is not a whole toolgate configuration (a part of
// one, a Kubernetes manifest) says so in its info string, "yaml
// fragment": it is then only parsed. "yaml file=PATH" marks a block that
// is the file PATH of the repository, which must match it byte for byte.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// fence is one fenced code block of a Markdown file.
type fence struct {
	file  string            // the Markdown file, relative to the repository root
	line  int               // the line of its opening fence, from 1
	lang  string            // the info string's first word
	attrs map[string]string // the info string's other words: "fragment" or "file=PATH"
	body  string
}

func (f fence) String() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

// fenceOpen matches an opening (or closing) fence, indented as inside a
// list item, with its info string.
var fenceOpen = regexp.MustCompile("^( *)```(.*)$")

// fences returns the fenced code blocks of the Markdown file rel (relative
// to the repository root), their indentation removed.
func fences(t *testing.T, rel string) []fence {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	var out []fence
	var cur *fence
	indent := ""
	var body strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		m := fenceOpen.FindStringSubmatch(line)
		if cur == nil {
			if m == nil {
				continue
			}
			words := strings.Fields(m[2])
			cur = &fence{file: rel, line: i + 1, attrs: map[string]string{}}
			if len(words) > 0 {
				cur.lang = words[0]
			}
			for _, w := range words[min(1, len(words)):] {
				k, v, _ := strings.Cut(w, "=")
				cur.attrs[k] = v
			}
			indent = m[1]
			body.Reset()
			continue
		}
		if m != nil && strings.TrimSpace(m[2]) == "" {
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		body.WriteString(strings.TrimPrefix(line, indent) + "\n")
	}
	if cur != nil {
		t.Fatalf("%s: the fence opened here is never closed", cur)
	}
	return out
}

// docFiles is README.md and every page of docs/, relative to the
// repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md: %v (%d pages)", err, len(pages))
	}
	files := []string{"README.md"}
	for _, p := range pages {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator))))
	}
	return files
}

// envRef matches a ${NAME} reference without a default.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// snippetEnv gives each ${NAME} without a default in yaml a value long
// enough for any secret, as a reader would set them, and unsets the
// variables the examples read with a default, so that the defaults are
// what the test sees.
func snippetEnv(yamlText string) []string {
	env := []string{"PETSTORE_KEY="}
	for _, m := range envRef.FindAllStringSubmatch(yamlText, -1) {
		if m[1] != "TOOLGATE_INSTANCE_DIR" {
			env = append(env, m[1]+"="+strings.Repeat("x", 48))
		}
	}
	return env
}

// exampleDir returns a fresh directory holding a link to each file of the
// repository's examples/ (so a snippet's spec: petstore.yaml is found
// next to it) and a link examples/ to the directory itself.
func exampleDir(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(src, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// validate runs `toolgate validate` on the configuration at path from
// the directory dir and fails t unless it is valid, with nothing logged
// at ERROR.
func validate(t *testing.T, what, dir, path string, env []string) {
	t.Helper()
	r := runIn(t, dir, env, "validate", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, ": valid (") || strings.Contains(r.stderr, "ERROR") {
		t.Errorf("%s: toolgate validate: %v", what, r)
	}
}

// runIn runs toolgate with args in the directory dir, with env added to
// this process's environment.
func runIn(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	return runProgramIn(t, dir, toolgateBin, env, args...)
}

// TestDocsSnippets loads every fenced YAML and JSON block of the README
// and docs/: a whole configuration through `toolgate validate`, a
// fragment as YAML, a shipped file against the file, Claude Desktop's
// and other JSON through a JSON parse.
func TestDocsSnippets(t *testing.T) {
	counts := map[string]int{}
	for _, file := range docFiles(t) {
		for _, f := range fences(t, file) {
			kind := f.lang
			switch {
			case f.lang == "json":
				var v any
				if err := json.Unmarshal([]byte(f.body), &v); err != nil {
					t.Errorf("%s: the json block does not parse: %v", f, err)
				}
			case f.lang != "yaml" && f.lang != "yml":
				continue
			case f.attrs["file"] != "":
				kind = "file"
				checkFileSnippet(t, f)
			case hasAttr(f, "fragment"):
				kind = "fragment"
				var v any
				if err := yaml.Unmarshal([]byte(f.body), &v); err != nil {
					t.Errorf("%s: the yaml fragment does not parse: %v", f, err)
				}
			default:
				kind = "config"
				dir := exampleDir(t)
				path := filepath.Join(dir, "toolgate.yaml")
				if err := os.WriteFile(path, []byte(f.body), 0o600); err != nil {
					t.Fatal(err)
				}
				validate(t, f.String()+` (a whole configuration; mark a part of one "yaml fragment")`, dir, path, snippetEnv(f.body))
			}
			for k := range f.attrs {
				if k != "file" && k != "fragment" {
					t.Errorf("%s: unknown fence attribute %q: use fragment or file=PATH", f, k)
				}
			}
			counts[kind]++
		}
	}
	t.Logf("snippets checked: %v", counts)
	// The README has at least its two shipped examples and Claude
	// Desktop's JSON; the docs more configurations. Fewer means the
	// fence parsing broke, not that the docs shrank.
	if counts["file"] < 2 || counts["json"] < 2 || counts["config"] < 4 {
		t.Errorf("snippets checked %v: want at least 2 file, 2 json and 4 config blocks", counts)
	}
}

func hasAttr(f fence, name string) bool {
	_, ok := f.attrs[name]
	return ok
}

// checkFileSnippet checks a "yaml file=PATH" block: the file PATH of the
// repository is the block, byte for byte, and is a valid configuration
// from a directory other than its own.
func checkFileSnippet(t *testing.T, f fence) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", f.attrs["file"]))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: the block shows %s: %v", f, f.attrs["file"], err)
		return
	}
	if string(data) != f.body {
		t.Errorf("%s: the block differs from %s; copy the file into the block again", f, f.attrs["file"])
	}
	validate(t, f.String(), t.TempDir(), path, snippetEnv(f.body))
}

// TestExampleConfigCopiedAnywhere copies config.example.yaml alone into a
// directory of its own, as to ~/.config/toolgate/, and checks that it is
// valid there with nothing logged at ERROR: no path in it may depend on
// the repository being next to it.
func TestExampleConfigCopiedAnywhere(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	validate(t, "config.example.yaml copied to "+path, t.TempDir(), path, nil)
	r := runIn(t, t.TempDir(), nil, "tools", "--config", path)
	if r.code != 0 || strings.Contains(r.stderr, "ERROR") {
		t.Errorf("toolgate tools with config.example.yaml copied to %s: %v", path, r)
	}
}

// readmeCommands returns the toolgate commands of the README's sh block
// that runs the example config, each as its arguments after
// `go run ./cmd/toolgate`.
func readmeCommands(t *testing.T, config string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, f := range fences(t, "README.md") {
		if f.lang != "sh" || !strings.Contains(f.body, "--config "+config) {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(f.body), "\n") {
			rest, ok := strings.CutPrefix(line, "go run ./cmd/toolgate ")
			if !ok {
				t.Fatalf("%s: %q is not a toolgate command; the test runs each line of this block", f, line)
			}
			cmds = append(cmds, shellWords(t, rest))
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("README.md has no sh block running --config %s", config)
	}
	return cmds
}

// shellWords splits s as a POSIX shell splits words that are plain or in
// single quotes, which is all the README's commands use.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune(`"\$`, r) && !quoted:
			t.Fatalf("the README command %q uses shell syntax the test does not read (%q outside single quotes)", s, r)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in the README command %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// copyExample copies the files of examples/ named to dir/examples/, with
// every from replaced by to.
func copyExample(t *testing.T, dir, from, to string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join("..", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if from != "" {
			if !strings.Contains(text, from) {
				t.Fatalf("examples/%s does not contain %q", name, from)
			}
			text = strings.ReplaceAll(text, from, to)
		}
		if err := os.WriteFile(filepath.Join(dir, "examples", name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// petRequest is what the stand-in pet store received.
type petRequest struct {
	method, path, key string
	body              map[string]any
}

// TestReadmeRESTExample runs the README's REST commands as pasted, in a
// directory laid out like the repository, against an httptest server in
// the place of examples/petstore-api: the hand-written tool sends the
// tags as a JSON array (the schema accepts one), both tools send the API
// key the example's auth and headers name, and the results come back.
func TestReadmeRESTExample(t *testing.T) {
	var mu sync.Mutex
	var got []petRequest
	var pets []map[string]any
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := petRequest{method: r.Method, path: r.URL.Path, key: r.Header.Get("X-Api-Key")}
		_ = json.NewDecoder(r.Body).Decode(&req.body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, req)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/pets":
			pet := map[string]any{"id": fmt.Sprint(len(pets) + 1)}
			for k, v := range req.body {
				pet[k] = v
			}
			pets = append(pets, pet)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(pet)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/pets":
			out := []map[string]any{}
			for _, p := range pets {
				if s := r.URL.Query().Get("species"); s == "" || p["species"] == s {
					out = append(out, p)
				}
			}
			_ = json.NewEncoder(w).Encode(out)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(backend.Close)

	outputs := runRESTExample(t, backend.URL)

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].method != "POST" || got[1].method != "GET" {
		t.Fatalf("the pet store got %+v, want a POST then a GET of /v1/pets", got)
	}
	for _, req := range got {
		if req.key != "demo-key" {
			t.Errorf("%s %s carried X-Api-Key %q, want demo-key (the example's default)", req.method, req.path, req.key)
		}
	}
	if tags, ok := got[0].body["tags"].([]any); !ok || !slices.Equal(tags, []any{"good", "loud"}) {
		t.Errorf("add_pet sent the body %v, want tags as the JSON array [good loud]", got[0].body)
	}
	checkListed(t, outputs[1])
}

// runRESTExample runs the README's REST commands as pasted, in a
// directory laid out like the repository whose examples call baseURL
// instead of http://127.0.0.1:9000, and returns what each printed.
func runRESTExample(t *testing.T, baseURL string) []string {
	t.Helper()
	dir := t.TempDir()
	copyExample(t, dir, "http://127.0.0.1:9000", baseURL, "rest.yaml", "petstore.yaml")
	cmds := readmeCommands(t, "examples/rest.yaml")
	if len(cmds) != 2 || len(cmds[0]) < 4 || cmds[0][3] != "add_pet" || len(cmds[1]) < 4 || cmds[1][3] != "petstore__listPets" {
		t.Fatalf("README REST commands = %q, want call add_pet then call petstore__listPets", cmds)
	}
	var outputs []string
	for _, args := range cmds {
		r := runIn(t, dir, []string{"PETSTORE_KEY="}, args...)
		if r.code != 0 || strings.Contains(r.stderr, "ERROR") {
			t.Fatalf("toolgate %s: %v", strings.Join(args, " "), r)
		}
		outputs = append(outputs, r.stdout)
	}
	return outputs
}

// checkListed checks petstore__listPets's output: Rex the dog, with the
// tags add_pet gave him.
func checkListed(t *testing.T, out string) {
	t.Helper()
	var listed struct {
		IsError    bool `json:"isError"`
		Structured struct {
			Result []map[string]any `json:"result"`
		} `json:"structuredContent"`
	}
	err := json.Unmarshal([]byte(out), &listed)
	if err != nil || listed.IsError || len(listed.Structured.Result) != 1 || listed.Structured.Result[0]["name"] != "Rex" ||
		fmt.Sprint(listed.Structured.Result[0]["tags"]) != "[good loud]" {
		t.Errorf("petstore__listPets printed %s (%v), want Rex the dog, tagged good and loud", out, err)
	}
}

// petstoreListening matches examples/petstore-api's log line saying
// where it listens.
var petstoreListening = regexp.MustCompile(`listening on (http://[0-9.:]+)/v1`)

// TestReadmeRESTExampleDemoAPI runs the README's REST commands against
// the demo API they name, examples/petstore-api, built and started on a
// free port: the example works with the program the README tells a
// newcomer to run, API key included.
func TestReadmeRESTExampleDemoAPI(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "petstore-api")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./examples/petstore-api")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/petstore-api: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := petstoreListening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	var base string
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("examples/petstore-api exited without saying where it listens")
		}
		base = a
	case <-time.After(listenTimeout):
		t.Fatalf("examples/petstore-api did not say where it listens within %v", listenTimeout)
	}
	checkListed(t, runRESTExample(t, base)[1])
}

// TestReadmeUpstreamExample runs the README's upstream call as pasted,
// with npx's download replaced by the pinned servers of tests/npm: the
// filesystem server, started in the config's directory, lists it.
func TestReadmeUpstreamExample(t *testing.T) {
	fsEntry, memEntry := npmEntry(t, "server-filesystem"), npmEntry(t, "server-memory")
	dir := t.TempDir()
	copyExample(t, dir, "", "", "upstreams.yaml")
	cfg := filepath.Join(dir, "examples", "upstreams.yaml")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(
		"command: npx", "command: node",
		`"-y", "@modelcontextprotocol/server-filesystem"`, fmt.Sprintf("%q", fsEntry),
		`"-y", "@modelcontextprotocol/server-memory"`, fmt.Sprintf("%q", memEntry),
	).Replace(string(data))
	if strings.Contains(text, "command: npx") || strings.Contains(text, `"-y"`) {
		t.Fatalf("examples/upstreams.yaml runs npx in a way the test does not replace:\n%s", text)
	}
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range readmeCommands(t, "examples/upstreams.yaml") {
		if args[0] != "call" {
			continue // serve runs until stopped; the call shows the same tools
		}
		r := runIn(t, dir, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "upstreams.yaml") {
			t.Errorf("toolgate %s: %v\nwant exit 0 and a listing of examples/ that names upstreams.yaml", strings.Join(args, " "), r)
		}
	}
}

// docLink matches a Markdown link's target.
var docLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks checks that every relative link of the README and docs/
// names a file or directory of the repository: pages moved into docs/
// must not leave links behind that lead nowhere.
func TestDocsLinks(t *testing.T) {
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docLink.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			path := filepath.Join("..", filepath.Dir(file), target)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", file, m[1])
			}
		}
	}
}
