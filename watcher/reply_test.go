package watcher

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// replyOf parses a session with one entry line and returns its Reply.
func replyOf(t *testing.T, line string) []byte {
	t.Helper()
	p := NewParser("/s/x.jsonl")
	p.replies = true // as ReadReply's
	if got := p.Line([]byte(`{"type":"session","version":3,"id":"s","timestamp":"2026-11-01T00:00:00Z","cwd":"/w"}`), 0); got.Header == nil {
		t.Fatalf("header: %+v", got)
	}
	got := p.Line([]byte(line), 100)
	if got.Entry == nil {
		t.Fatalf("entry: %+v", got)
	}
	return got.Entry.Reply
}

// sameJSON compares two JSON texts by value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("wire:\n got %s\nwant %s", gb, wb)
	}
}

func TestReplyWireShape(t *testing.T) {
	got := replyOf(t, `{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":[`+
		`{"type":"thinking","thinking":"hm","thinkingSignature":"S1"},{"type":"thinking","thinking":"   ","thinkingSignature":"S2"},`+
		`{"type":"thinking","thinking":"[r]","thinkingSignature":"DATA","redacted":true},{"type":"thinking","thinking":"plain","thinkingSignature":""},`+
		`{"type":"text","text":" "},{"type":"text","text":"<b>"},{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"a"}},`+
		`{"type":"toolCall","id":"toolu_2","name":"ls"},{"type":"image","data":"x","mimeType":"image/png"}]}}`)
	sameJSON(t, got, `{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"S1"},{"type":"redacted_thinking","data":"DATA"},`+
		`{"type":"text","text":"plain"},{"type":"text","text":"<b>"},{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a"}},`+
		`{"type":"tool_use","id":"toolu_2","name":"ls","input":{}},{"type":"image","data":"x","mimeType":"image/png"}]}`)
}

// TestReplyEscapes: strings are copied as written, so escapes survive as
// the same values (binding digests values); blank is decided on the value.
func TestReplyEscapes(t *testing.T) {
	got := replyOf(t, `{"type":"message","id":"a","message":{"content":[{"type":"text","text":"\u0020\n"},`+
		`{"type":"thinking","thinking":"caf\u00e9 \"q\"\n","thinkingSignature":"S\/1"}],"role":"assistant"}}`)
	sameJSON(t, got, `{"role":"assistant","content":[{"type":"thinking","thinking":"café \"q\"\n","signature":"S/1"}]}`)
}

// TestReplyOnlyWhenSigned: only an assistant entry with signed thinking
// carries a reply; a context_edit's replacement never does.
func TestReplyOnlyWhenSigned(t *testing.T) {
	for _, line := range []string{
		`{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"thinking","thinking":"x","thinkingSignature":""},{"type":"text","text":"t"}]}}`,
		`{"type":"message","id":"u","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`,
		`{"type":"context_edit","id":"e","targetId":"a","replacement":{"content":[{"type":"thinking","thinking":"x","thinkingSignature":"S"}]}}`,
	} {
		if got := replyOf(t, line); got != nil {
			t.Errorf("%s: reply %s", line, got)
		}
	}
}

// TestReplyConverseShape: on pi's Bedrock route the reply is in Converse's
// shape, as pi's Converse serializer replays it (blank thinking dropped even
// when signed; other blocks dropped), whatever the order of api and content.
func TestReplyConverseShape(t *testing.T) {
	content := `[{"type":"thinking","thinking":"hm","thinkingSignature":"S1"},{"type":"thinking","thinking":"   ","thinkingSignature":"S2"},` +
		`{"type":"thinking","thinking":"[Reasoning redacted]","thinkingSignature":"AQID","redacted":true},{"type":"thinking","thinking":"plain","thinkingSignature":""},` +
		`{"type":"text","text":" "},{"type":"text","text":"<b>"},{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"a"}},` +
		`{"type":"toolCall","id":"toolu_2","name":"ls"},{"type":"image","data":"x","mimeType":"image/png"}]`
	want := `{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hm","signature":"S1"}}},{"reasoningContent":{"redactedContent":"AQID"}},` +
		`{"text":"plain"},{"text":"<b>"},{"toolUse":{"toolUseId":"toolu_1","name":"read","input":{"path":"a"}}},{"toolUse":{"toolUseId":"toolu_2","name":"ls","input":{}}}]}`
	for _, line := range []string{
		`{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","api":"bedrock-converse-stream","provider":"amazon-bedrock","content":` + content + `}}`,
		`{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":` + content + `,"api":"bedrock-converse-stream","model":"us.anthropic.claude-opus-5-5"}}`,
	} {
		sameJSON(t, replyOf(t, line), want)
	}
}

// ReadReply reads an entry's line again from the file, where the parse of
// a batch builds no reply: for every line of a generated pi session, the
// entry it reads is the batch's, and it carries a reply exactly when the
// entry is an assistant message holding signed thinking, the reply the
// parse would have built.
func TestReadReplyOfSession(t *testing.T) {
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 11, Turns: 12})
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, s.Data, 0o600); err != nil {
		t.Fatal(err)
	}
	batch := NewParser(path)
	built := NewParser(path)
	built.replies = true
	replies := 0
	for i, off := range s.Offsets {
		end := len(s.Data)
		if i+1 < len(s.Offsets) {
			end = s.Offsets[i+1]
		}
		line := s.Data[off:end]
		res := batch.Line(line, int64(off))
		want := built.Line(line, int64(off))
		if res.Entry == nil {
			continue
		}
		if res.Entry.Reply != nil {
			t.Fatalf("line %d: the batch's parse built a reply", i+1)
		}
		got, err := ReadReply(path, res.Entry.Offset, res.Entry.Length)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if !bytes.Equal(got.Reply, want.Entry.Reply) {
			t.Fatalf("line %d: reply\n got %s\nwant %s", i+1, got.Reply, want.Entry.Reply)
		}
		if got.Reply != nil {
			replies++
		}
		got.Reply, got.Line = nil, res.Entry.Line
		if !reflect.DeepEqual(got, res.Entry) {
			t.Fatalf("line %d read again:\n got %+v\nwant %+v", i+1, got, res.Entry)
		}
	}
	if replies == 0 {
		t.Fatal("the session has no reply with signed thinking: the test checks nothing")
	}
}

// Every input ReadReply is given has a bound and a clear error: what it
// reads is pi's file, which may have changed or be something else.
func TestReadReplyErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	line := `{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}` + "\n"
	if err := os.WriteFile(path, []byte(line+"not json\n"+"{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	n := len(line)
	for _, tc := range []struct {
		name   string
		path   string
		off    int64
		length int
		want   string
	}{
		{"negative offset", path, -1, n, "outside 1.."},
		{"empty", path, 0, 0, "outside 1.."},
		{"over the bound", path, 0, MaxLineLimit + 1, "outside 1.."},
		{"missing file", filepath.Join(dir, "gone.jsonl"), 0, n, "no such file"},
		{"special file", fifo, 0, n, "not a regular file"},
		{"past the end", path, int64(n), 100, "EOF"},
		{"not a line", path, 0, n - 5, "not one complete line"},
		{"two lines", path, 0, n + len("not json\n"), "not one complete line"},
		{"malformed", path, int64(n), len("not json\n"), "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ReadReply(tc.path, tc.off, tc.length)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("ReadReply: %+v, %v; want an error naming %s and saying %q", e, err, tc.path, tc.want)
			}
		})
	}
	e, err := ReadReply(path, 0, n)
	if err != nil || e.ID != "a" || e.Reply != nil {
		t.Fatalf("an assistant message without thinking: %+v %v (want the entry, no reply)", e, err)
	}
}
