package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

// TestProxyUsageInReport: the usage each reply carried reaches the daemon
// with its accept (streamed: message_start's input and cache counts with
// message_delta's output; a JSON answer: its usage), and `bindery report`
// prices it with the same table as pi's sessions: the figures are exactly
// the upstream's, the lines add up to the total, and the grand total is
// pi's and the hosts' together. `bindery conversations` shows the replies'
// cache figures.
func TestProxyUsageInReport(t *testing.T) {
	// The built-in table prices no Opus 5.5 (no cited price): the user's
	// price file does, as README "bindery report" says.
	pe := newProxyE2EWith(t, func(e *e2e) {
		price := `{"claude-opus-5-5": {"input": 15, "output": 75, "cacheWrite": 18.75, "cacheRead": 1.5, "source": "test"}}`
		if err := os.MkdirAll(e.state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.state, "prices.json"), []byte(price), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	pe.up.SetReply(toolLoop(1))
	pe.up.SetStream(true, 0)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.header.Set("X-Claude-Code-Session-Id", "0b1d2e3f-4a5b-4c6d-8e7f-usagereport01")
	h.cycle("fix the parser")
	h.top["stream"] = false // a JSON answer: its usage rides in the reply
	h.cycle("now the tests")
	got := pe.up.Messages()
	var want upstreamtest.Usage
	for _, r := range got {
		if r.Status != 200 {
			t.Fatalf("upstream answered %d", r.Status)
		}
		want.Input += r.Usage.Input
		want.Output += r.Usage.Output
		want.CacheRead += r.Usage.CacheRead
		want.CacheWrite5m += r.Usage.CacheWrite5m
		want.CacheWrite1h += r.Usage.CacheWrite1h
	}
	conv := "claude-code:0b1d2e3f-4a5b-4c6d-8e7f-usagereport01"
	// The accepts run in the background after each answer: wait for them.
	var c api.ConversationSummary
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, _, code := pe.run("conversations", "--json")
		var l api.ConversationList
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
			t.Fatalf("conversations: %d %s", code, out)
		}
		for _, x := range l.Conversations {
			if x.Conversation == conv {
				c = x
			}
		}
		if c.Replies == len(got) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.Replies != len(got) || c.Input != want.Input || c.Output != want.Output || c.CacheRead != want.CacheRead || c.CacheWrite != want.CacheWrite5m+want.CacheWrite1h {
		t.Fatalf("conversation %+v; upstream sent %d replies, %+v", c, len(got), want)
	}
	out, errOut, code := pe.run("report", "--json")
	if code != 0 {
		t.Fatalf("report: %d %s", code, errOut)
	}
	var rep api.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	hr := rep.Hosts
	if hr == nil || len(hr.Conversations) != 1 {
		t.Fatalf("hosts %+v", hr)
	}
	l := hr.Conversations[0]
	u := l.Usage
	if money := l.Usage.Spend.Total; money <= 0 {
		t.Fatalf("unpriced: %+v", l)
	}
	if l.Conversation != conv || l.Client != "claude-code" || u.Entries != len(got) || u.Input != want.Input || u.Output != want.Output ||
		u.Read != want.CacheRead || u.Write != want.CacheWrite5m+want.CacheWrite1h || u.Write1h != want.CacheWrite1h || l.UsageMissing != 0 {
		t.Fatalf("report line %+v; upstream sent %+v", l, want)
	}
	p := api.Price{Input: ptr(15.0), Output: ptr(75.0), CacheWrite: ptr(18.75), CacheRead: ptr(1.5)}
	wantMoney := (float64(want.Input)**p.Input + float64(want.Output)**p.Output + float64(want.CacheRead)**p.CacheRead +
		float64(want.CacheWrite5m)**p.CacheWrite + float64(want.CacheWrite1h)**p.Write1hPrice()) / 1e6
	if math.Abs(l.Total-wantMoney) > 1e-9 || hr.Total != l.Total || math.Abs(rep.GrandTotal-(rep.Figures.Total+hr.Total)) > 1e-9 || hr.Unpriced != 0 {
		t.Errorf("spend: line %v, hosts %v, grand %v (pi %v); want %v", l.Total, hr.Total, rep.GrandTotal, rep.Figures.Total, wantMoney)
	}
	// A model the table does not price: its tokens are counted, its reply
	// is unpriced, and in no total.
	o := newAPIHost(t, pe.addr, "claude-haiku-4-5")
	o.header.Set("X-Claude-Code-Session-Id", "unpriced-session")
	o.user("hello")
	o.turn()
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, _, _ = pe.run("report", "--json")
		rep = api.Report{}
		json.Unmarshal([]byte(out), &rep)
		if (rep.Hosts != nil && len(rep.Hosts.Conversations) == 2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hr = rep.Hosts; hr == nil || len(hr.Conversations) != 2 || hr.Unpriced != 1 || hr.Conversations[0].Conversation != conv ||
		hr.Conversations[1].Unpriced != 1 || hr.Conversations[1].Total != 0 || hr.Total != hr.Conversations[0].Total || hr.Usage.Entries != len(got)+1 {
		t.Fatalf("with an unpriced conversation: %+v", hr)
	}
	text, _, _ := pe.run("report")
	if !strings.Contains(text, fmt.Sprintf("bindery proxy and other hosts: 2 conversations, %d replies", len(got)+1)) || !strings.Contains(text, "claude-code:0b1d2e3f") {
		t.Errorf("report text:\n%s", text)
	}
	// The archive chart stacks the proxy's spend of the day as its own kind,
	// and its title's total is the grand total.
	svgPath := filepath.Join(t.TempDir(), "archive.svg")
	if p := os.Getenv("BINDERY_TEST_CHART"); p != "" {
		svgPath = p // to look at it
	}
	if _, errOut, code := pe.run("report", "--chart", svgPath); code != 0 {
		t.Fatalf("report --chart: %d %s", code, errOut)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now().UTC().Format(time.DateOnly)
	if !strings.Contains(string(svg), `fill="#17becf"`) || !strings.Contains(string(svg), ">bindery proxy, hosts</text>") ||
		!strings.Contains(string(svg), fmt.Sprintf("%s: %s, bindery proxy, hosts %s", day, money(rep.GrandTotal), money(hr.Total))) ||
		!strings.Contains(string(svg), money(rep.GrandTotal)+" total") || !strings.Contains(string(svg), "archive of 0 sessions and 2 host conversations</text>") {
		t.Errorf("archive chart lacks the hosts' spend of %s (%s):\n%s", day, money(hr.Total), svg)
	}
	convs, _, _ := pe.run("conversations")
	if !strings.Contains(convs, " replies · read ") {
		t.Errorf("conversations text:\n%s", convs)
	}
	// bindery show names the client and session of a proxy conversation
	// and its replies' figures, as conversations does.
	shown, errOut, code := pe.run("show", conv)
	if code != 0 {
		t.Fatalf("show %s: %d %s", conv, code, errOut)
	}
	for _, w := range []string{"client               claude-code\n", "session              0b1d2e3f-4a5b-4c6d-8e7f-usagereport01\n",
		fmt.Sprintf("replies              %d with usage, cache hit ", len(got)),
		fmt.Sprintf("tokens               uncached %s · output %s · cache read %s · write %s\n",
			tok(want.Input), tok(want.Output), tok(want.CacheRead), tok(want.CacheWrite5m+want.CacheWrite1h)), "retries              0 "} {
		if !strings.Contains(shown, w) {
			t.Errorf("show lacks %q:\n%s", w, shown)
		}
	}
	// Every line fits 80 columns, the branch table's too (its PARENT
	// column only when a branch has one).
	for _, l := range strings.Split(shown, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a show line of %d columns: %q", n, l)
		}
	}
	t.Logf("bindery show %s:\n%s", conv, shown)
	// bindery tail --conversation follows a proxy conversation by its id:
	// its compiles and accepts, the conversation named once, no other's.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tail := exec.CommandContext(ctx, pe.bin, "tail", "--conversation", conv, "--since", "0")
	tail.Env = pe.env
	tailOut, tailErr := &lockedWriter{w: new(bytes.Buffer)}, &lockedWriter{w: new(bytes.Buffer)}
	tail.Stdout, tail.Stderr = tailOut, tailErr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan error, 1)
	go func() { tailDone <- tail.Wait() }()
	read := func(l *lockedWriter) string {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.w.String()
	}
	waitFor(t, "tail to replay the proxy conversation's compiles and accepts", func() (bool, string) {
		o := read(tailOut)
		return strings.Count(o, " accept ") == len(got) && strings.Count(o, " compile ") >= len(got), read(tailErr) + o
	})
	cancel()
	<-tailDone
	tailed := read(tailOut)
	if strings.Count(tailed, "── "+conv+"\n") != 1 || strings.Contains(tailed, "unpriced-session") {
		t.Errorf("tail --conversation %s:\n%s", conv, tailed)
	}
	t.Logf("bindery tail --conversation %s:\n%s", conv, tailed)
	t.Logf("bindery report (hosts):\n%s", text[strings.Index(text, "bindery proxy and other hosts"):])
	t.Logf("bindery conversations:\n%s", convs)
}

func ptr[T any](v T) *T { return &v }
