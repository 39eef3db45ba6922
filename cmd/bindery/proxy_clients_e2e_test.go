package main

// The real clients through bindery proxy, offline: @anthropic-ai/sdk,
// Claude Code and opencode, installed from npm by
// integrations/proxy-clients/ci.sh, which sets BINDERY_PROXY_CLIENTS to
// their node_modules. Without it these tests skip (go test ./... alone
// does not install 600 MB of clients); with it they fail on anything
// missing.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/my-pi/bindery/binding/judgetest"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

func clientsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BINDERY_PROXY_CLIENTS")
	if dir == "" {
		t.Skip("the real clients are installed and run by integrations/proxy-clients/ci.sh (BINDERY_PROXY_CLIENTS)")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("BINDERY_PROXY_CLIENTS: %v", err)
	}
	return dir
}

// tap records what a client sends, byte for byte, and forwards it
// (streaming) to target: the test's view of the client's own bodies.
type tap struct {
	mu     sync.Mutex
	bodies [][]byte
	srv    *httptest.Server
}

func newTap(t *testing.T, target string) *tap {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/messages" {
			b, _ := io.ReadAll(r.Body)
			tp.mu.Lock()
			tp.bodies = append(tp.bodies, b)
			tp.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tap) sent() [][]byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([][]byte(nil), tp.bodies...)
}

// checkKept: every request the client sent reached the provider once,
// answered 200, with every block of it that was still valid read (the
// provider's maximum: each history here is one chain). It returns the
// blocks read over all requests.
func checkKept(t *testing.T, up *upstreamtest.Upstream, sent [][]byte) int {
	t.Helper()
	got := up.Messages()
	if len(got) != len(sent) {
		t.Fatalf("the provider got %d requests for the client's %d", len(got), len(sent))
	}
	total := 0
	for i, r := range got {
		if r.Status != 200 {
			t.Errorf("request %d: the provider answered %d: %s", i, r.Status, r.Refused)
		}
		fs, err := up.Judge.Facts(sent[i])
		if err != nil {
			t.Fatal(err)
		}
		valid := 0
		for _, f := range fs {
			if f.Valid() {
				valid++
			}
		}
		read := len(r.Result.Read())
		if read != valid {
			t.Errorf("request %d: the provider read %d blocks; %d of the client's %d were valid", i, read, valid, len(fs))
		}
		for _, tr := range r.Result.Transformations {
			t.Errorf("request %d: the provider dropped %v", i, tr)
		}
		total += read
	}
	return total
}

// TestProxyClientSDK: @anthropic-ai/sdk's tool loop, its history pruned
// before turn 4, through the proxy: no error reaches it, nothing is
// dropped, every still-valid block is read, and requests bindery strips
// nothing from reach the provider as the SDK wrote them.
func TestProxyClientSDK(t *testing.T) {
	dir := clientsDir(t)
	pe := newProxyE2E(t)
	pe.up.SetReply(toolLoop(2))
	pe.up.SetStream(true, 0)
	tp := newTap(t, pe.addr)
	cmd := exec.Command("node", filepath.Join(dir, "..", "sdk-tool-loop.mjs"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + pe.root, "ANTHROPIC_BASE_URL=" + tp.srv.URL, "ANTHROPIC_API_KEY=" + testAPIKey, "TURNS=9", "PRUNE_AT=4"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sdk-tool-loop: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	turns := 0
	for sc.Scan() {
		var l struct{ Status int }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Status == 200 {
			turns++
		}
	}
	if turns != 9 {
		t.Fatalf("%d of 9 turns answered:\n%s", turns, out)
	}
	sent := tp.sent()
	read := checkKept(t, pe.up, sent)
	same := 0
	for i, r := range pe.up.Messages() {
		if bytes.Equal(r.Body, sent[i]) {
			same++
		}
	}
	if same < 3 || same == len(sent) {
		t.Errorf("%d of %d requests reached the provider byte for byte: the turns before the prune should, the ones after it should not", same, len(sent))
	}
	t.Logf("SDK: %d requests, %d blocks read, %d sent unchanged", len(sent), read, same)
	pe.checkNoCredential()
}

// claudeReply answers Claude Code's requests: a tool loop of two Read
// calls on files of its working folder after each prompt, then text.
func claudeReply(work string) func(n int, body []byte) []judgetest.ReplyBlock {
	loop := toolLoop(2)
	return func(n int, body []byte) []judgetest.ReplyBlock {
		blocks := loop(n, body)
		for i, b := range blocks {
			if b.Type == "tool_use" {
				blocks[i].Name = "Read"
				blocks[i].Input = map[string]any{"file_path": filepath.Join(work, fmt.Sprintf("f%d.txt", n%4))}
			}
		}
		return blocks
	}
}

// claudeRun is one Claude Code installation: its own HOME and folder.
type claudeRun struct {
	t          *testing.T
	bin, home  string
	work, base string
	session    string
}

func newClaudeRun(t *testing.T, dir, base string) *claudeRun {
	home := t.TempDir()
	work := filepath.Join(home, "work")
	os.MkdirAll(work, 0o755)
	for i := 0; i < 4; i++ {
		os.WriteFile(filepath.Join(work, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	return &claudeRun{t: t, bin: filepath.Join(dir, ".bin", "claude"), home: home, work: work, base: base}
}

// prompt runs `claude -p` (resuming the session after the first) and
// returns its JSON result.
func (c *claudeRun) prompt(text string) map[string]any {
	c.t.Helper()
	args := []string{"-p", text, "--output-format", "json"}
	if c.session != "" {
		args = append(args, "--resume", c.session)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.work
	cmd.Env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH"), "ANTHROPIC_BASE_URL=" + c.base, "ANTHROPIC_API_KEY=" + testAPIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("claude %v: %v\n%s\n%s", args, err, out, stderr.Bytes())
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		c.t.Fatalf("claude %v: %v\n%s", args, err, out)
	}
	c.session, _ = res["session_id"].(string)
	return res
}

// clearToolResult edits the session transcript as microcompaction does:
// the content of its k-th tool result (from 1) is cleared.
func (c *claudeRun) clearToolResult(k int) {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.home, ".claude", "projects", "*", c.session+".jsonl"))
	if len(files) != 1 {
		c.t.Fatalf("transcript of %s: %v", c.session, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		c.t.Fatal(err)
	}
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		var e map[string]any
		if json.Unmarshal(l, &e) != nil || e["type"] != "user" {
			continue
		}
		m, _ := e["message"].(map[string]any)
		blocks, _ := m["content"].([]any)
		for _, bl := range blocks {
			if o, _ := bl.(map[string]any); o != nil && o["type"] == "tool_result" {
				if k--; k > 0 {
					continue
				}
				o["content"] = "[Old tool result content cleared]"
				nl, _ := json.Marshal(e)
				lines[i] = nl
				if err := os.WriteFile(files[0], bytes.Join(lines, []byte("\n")), 0o600); err != nil {
					c.t.Fatal(err)
				}
				return
			}
		}
	}
	c.t.Fatal("no tool result in the transcript")
}

// session4 runs Claude Code's four prompts, the third tool result (the
// second prompt's first) cleared before the third.
func (c *claudeRun) session4() (errors int) {
	for i, p := range []string{"fix the parser", "now the tests", "and the docs", "ship it"} {
		if i == 2 {
			c.clearToolResult(3)
		}
		if res := c.prompt(p); res["is_error"] == true {
			c.t.Logf("claude: %v", res["result"])
			errors++
		}
	}
	return errors
}

// TestProxyClientClaudeCode: the real Claude Code CLI, -p then --resume,
// across an edit in the middle of its history. Straight to the provider,
// the binding 400 makes it strip every block it holds, and the blocks
// still valid before the edit are lost for good; through bindery proxy no
// 400 reaches it and every valid block is kept.
func TestProxyClientClaudeCode(t *testing.T) {
	dir := clientsDir(t)
	// Without bindery.
	bare, err := upstreamtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	bareTap := newTap(t, bare.URL)
	without := newClaudeRun(t, dir, bareTap.srv.URL)
	bare.SetReply(claudeReply(without.work))
	without.session4()
	refused, lastReadWithout := 0, 0
	for _, r := range bare.Messages() {
		if r.Status == 400 {
			refused++
		} else {
			lastReadWithout = len(r.Result.Read())
		}
	}
	if refused == 0 {
		t.Fatal("straight to the provider, the edit caused no refusal: the test does not exercise what it claims")
	}

	// Through bindery proxy.
	pe := newProxyE2E(t)
	tp := newTap(t, pe.addr)
	with := newClaudeRun(t, dir, tp.srv.URL)
	pe.up.SetReply(claudeReply(with.work))
	if errs := with.session4(); errs != 0 {
		t.Errorf("%d prompts ended in an error through the proxy", errs)
	}
	read := checkKept(t, pe.up, tp.sent())
	msgs := pe.up.Messages()
	lastRead := len(msgs[len(msgs)-1].Result.Read())
	// The blocks minted before the edit (the first prompt's three and the
	// second's first) stay valid; without bindery Claude Code threw them
	// away at the 400, for good.
	if lastRead-lastReadWithout != 4 {
		t.Errorf("the last request read %d blocks through bindery, %d without; want the 4 blocks minted before the edit kept", lastRead, lastReadWithout)
	}
	t.Logf("Claude Code: without bindery %d refusals, last request read %d blocks; through bindery 0 refusals, %d blocks read in all, %d on the last request", refused, lastReadWithout, read, lastRead)
	pe.checkNoCredential()
}

// opencodeRun is one opencode installation: its own HOME, config and
// folder, its Anthropic provider pointed at base.
type opencodeRun struct {
	t               *testing.T
	bin, home, work string
	runs            int
}

func newOpencodeRun(t *testing.T, dir, base string) *opencodeRun {
	home := t.TempDir()
	work := filepath.Join(home, "work")
	cfg := filepath.Join(home, ".config", "opencode")
	os.MkdirAll(work, 0o755)
	os.MkdirAll(cfg, 0o755)
	for i := 0; i < 4; i++ {
		os.WriteFile(filepath.Join(work, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	conf := map[string]any{"model": "anthropic/claude-opus-5-5", "autoupdate": false, "share": "disabled",
		"provider": map[string]any{"anthropic": map[string]any{"options": map[string]any{"baseURL": base + "/v1", "apiKey": testAPIKey}}}}
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(filepath.Join(cfg, "opencode.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return &opencodeRun{t: t, bin: filepath.Join(dir, ".bin", "opencode"), home: home, work: work}
}

// prompt runs `opencode run` (continuing the last session after the first).
func (o *opencodeRun) prompt(text string) {
	o.t.Helper()
	args := []string{"run", text, "--format", "json"}
	if o.runs > 0 {
		args = append(args, "-c")
	}
	o.runs++
	cmd := exec.Command(o.bin, args...)
	cmd.Dir = o.work
	cmd.Env = []string{"HOME=" + o.home, "PATH=" + os.Getenv("PATH"), "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		o.t.Fatalf("opencode %v: %v\n%s\n%s", args, err, out, stderr.Bytes())
	}
	if bytes.Contains(out, []byte(`"type":"error"`)) {
		o.t.Errorf("opencode %v reported an error:\n%s", args, out)
	}
}

// opencodeReply answers opencode's main model with a tool loop of its read
// tool, and anything else (its title call) with text.
func opencodeReply(work string) func(n int, body []byte) []judgetest.ReplyBlock {
	loop := toolLoop(2)
	return func(n int, body []byte) []judgetest.ReplyBlock {
		var head struct {
			Model string `json:"model"`
		}
		json.Unmarshal(body, &head)
		if head.Model != "claude-opus-5-5" {
			return []judgetest.ReplyBlock{{Type: "text", Text: "A title"}}
		}
		blocks := loop(n, body)
		for i, b := range blocks {
			if b.Type == "tool_use" {
				blocks[i].Input = map[string]any{"filePath": filepath.Join(work, fmt.Sprintf("f%d.txt", n%4))}
			}
		}
		return blocks
	}
}

// TestProxyClientOpencode: the real opencode CLI with its Anthropic
// provider pointed at the proxy, three prompts continued (-c), its own
// drop_block kept: every request answered, nothing dropped, every valid
// block read, and its session named in bindery's conversations.
func TestProxyClientOpencode(t *testing.T) {
	dir := clientsDir(t)
	pe := newProxyE2E(t)
	tp := newTap(t, pe.addr)
	o := newOpencodeRun(t, dir, tp.srv.URL)
	pe.up.SetReply(opencodeReply(o.work))
	for _, p := range []string{"fix the parser", "now the tests", "ship it"} {
		o.prompt(p)
	}
	sent := tp.sent()
	read := checkKept(t, pe.up, sent)
	main := 0
	for _, b := range sent {
		if bytes.Contains(b, []byte(`"claude-opus-5-5"`)) {
			main++
			if !bytes.Contains(b, []byte(`"drop_block"`)) {
				t.Error("opencode's request carries no drop_block: the test does not see what opencode sends")
			}
		}
	}
	if main < 6 || read == 0 {
		t.Errorf("%d main-model requests, %d blocks read: the tool loops did not run", main, read)
	}
	if feed := pe.feed(); !strings.Contains(feed, `"conversation":"opencode:ses_`) {
		t.Errorf("no opencode conversation in the feed:\n%.1500s", feed)
	}
	t.Logf("opencode: %d requests (%d on the main model), %d blocks read", len(sent), main, read)
	pe.checkNoCredential()
}
