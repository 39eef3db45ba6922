package watcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/my-pi/bindery/watcher/pisessiontest"
)

const v3Header = `{"type":"session","version":3,"id":"s-1","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w"}`

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func sum(s string) []byte    { d := sha256.Sum256([]byte(s)); return d[:] }

// parseLines runs a Parser over lines (each without its newline) and returns
// what it produced.
func parseLines(t *testing.T, lines ...string) (*Header, []Entry, []IngestError) {
	t.Helper()
	return parseWith(NewParser("/s.jsonl"), lines)
}

// parseFile is parseLines of a real file, whose path it returns: the
// entries' offsets are the lines' in it (ReadReply reads them).
func parseFile(t *testing.T, lines ...string) (string, *Header, []Entry, []IngestError) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var file []byte
	for _, l := range lines {
		file = append(file, l+"\n"...)
	}
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	h, es, errs := parseWith(NewParser(path), lines)
	return path, h, es, errs
}

func parseWith(p *Parser, lines []string) (*Header, []Entry, []IngestError) {
	var h *Header
	var es []Entry
	var errs []IngestError
	off := int64(0)
	for _, l := range lines {
		res := p.Line([]byte(l+"\n"), off)
		off += int64(len(l) + 1)
		if res.Header != nil {
			h = res.Header
		}
		if res.Entry != nil {
			es = append(es, *res.Entry)
		}
		if res.Err != nil {
			errs = append(errs, *res.Err)
		}
	}
	return h, es, errs
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Header
	}{
		{"v3", v3Header, Header{ID: "s-1", Version: 3, Cwd: "/w", Timestamp: "2026-03-01T10:00:00.000Z"}},
		{"v3 fork", `{"type":"session","version":3,"id":"s-2","timestamp":"t","cwd":"/w","parentSession":"/p.jsonl"}`,
			Header{ID: "s-2", Version: 3, Cwd: "/w", Timestamp: "t", ParentSession: "/p.jsonl"}},
		{"v2", `{"type":"session","version":2,"id":"s-3","timestamp":"t","cwd":"/w"}`, Header{ID: "s-3", Version: 2, Cwd: "/w", Timestamp: "t"}},
		{"v1 legacy", `{"type":"session","id":"s-4","timestamp":"t","cwd":"/w","provider":"anthropic","modelId":"claude-sonnet-4-5","thinkingLevel":"off","branchedFrom":"/old.jsonl"}`,
			Header{ID: "s-4", Version: 1, Cwd: "/w", Timestamp: "t", ParentSession: "/old.jsonl", Provider: "anthropic", ModelID: "claude-sonnet-4-5", ThinkingLevel: "off"}},
		{"key order and escapes", `{"cwd":"/w\u00e9","id":"s-5","type":"session","timestamp":"t","extra":{"a":[1,2]}}`,
			Header{ID: "s-5", Version: 1, Cwd: "/wé", Timestamp: "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, es, errs := parseLines(t, tt.line)
			if h == nil || len(es) != 0 || len(errs) != 0 {
				t.Fatalf("got header %v entries %v errors %v", h, es, errs)
			}
			if *h != tt.want {
				t.Errorf("header = %+v, want %+v", *h, tt.want)
			}
		})
	}
}

func TestParseNotASession(t *testing.T) {
	for _, first := range []string{
		`{"type":"message","id":"a","message":{"role":"user","content":"hi"}}`,
		`{"type":"session","id":7}`, // pi requires a string id
		`[1,2,3]`,
	} {
		_, es, errs := parseLines(t, first, `{"type":"message","id":"b","parentId":null,"message":{"role":"user","content":"x"}}`)
		if len(es) != 0 {
			t.Errorf("first line %s: entries %v from a file that is not a session", first, es)
		}
		if len(errs) != 1 || errs[0].Line != 1 || !strings.Contains(errs[0].Reason, "not a session header") {
			t.Errorf("first line %s: errors = %+v", first, errs)
		}
	}
	// A malformed first line is reported as such, and the next line can
	// still be the header (pi skips unparsable lines before it too).
	h, _, errs := parseLines(t, `{"type":"sess`, v3Header)
	if h == nil || len(errs) != 1 || errs[0].Reason != "malformed JSON" {
		t.Errorf("header %v errors %+v", h, errs)
	}
}

func TestParseEntries(t *testing.T) {
	sig := "EqQBCkYIBRgCKkD" + strings.Repeat("x9+/", 100)
	tests := []struct {
		name string
		line string
		want Entry
	}{
		{"user array", `{"type":"message","id":"u1","parentId":"p0","timestamp":"T","message":{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1772359205120}}`,
			Entry{Type: "message", ID: "u1", ParentID: "p0", Timestamp: "T", Role: "user", UserText: true, MessageTimestamp: 1772359205120}},
		{"user string", `{"type":"message","id":"u2","parentId":"u1","timestamp":"T","message":{"role":"user","content":"fix it"}}`,
			Entry{Type: "message", ID: "u2", ParentID: "u1", Timestamp: "T", Role: "user", UserText: true}},
		{"user blank string is not sent", `{"type":"message","id":"u3","parentId":null,"timestamp":"T","message":{"role":"user","content":"  \n\t"}}`,
			Entry{Type: "message", ID: "u3", Timestamp: "T", Role: "user"}},
		{"user blank text block, escaped", `{"type":"message","id":"u4","timestamp":"T","message":{"role":"user","content":[{"type":"text","text":"\n\u00a0 "}]}}`,
			Entry{Type: "message", ID: "u4", Timestamp: "T", Role: "user"}},
		{"user image only", `{"type":"message","id":"u5","timestamp":"T","message":{"role":"user","content":[{"type":"image","data":"iVBOR","mimeType":"image/png"}]}}`,
			Entry{Type: "message", ID: "u5", Timestamp: "T", Role: "user", UserText: true}},
		{"assistant signed thinking, text, tool call", `{"type":"message","id":"a1","parentId":"u1","timestamp":"T","message":{"role":"assistant","content":[` +
			`{"type":"thinking","thinking":"Let me think\n\"deeply\" é🙂","thinkingSignature":"` + sig + `"},{"type":"text","text":"ok"},` +
			`{"type":"toolCall","id":"toolu_01","name":"read","arguments":{"path":"a.go","nested":{"content":[{"type":"thinking"}]}},"partialJson":"{\"pa"}],` +
			`"api":"anthropic-messages","provider":"anthropic","model":"claude-opus-4-5","usage":{"input":3,"output":120,"cacheRead":20500,"cacheWrite":310,"totalTokens":20933,` +
			`"cost":{"input":0.00001,"output":0.003,"cacheRead":0.0102,"cacheWrite":0.0019,"total":0.0151}},"stopReason":"toolUse","timestamp":1772359205120}}`,
			Entry{Type: "message", ID: "a1", ParentID: "u1", Timestamp: "T", Role: "assistant", Model: "claude-opus-4-5", Provider: "anthropic", API: "anthropic-messages",
				StopReason: "toolUse", ToolCalls: 1, MessageTimestamp: 1772359205120,
				Usage: &Usage{Input: i64(3), Output: i64(120), CacheRead: i64(20500), CacheWrite: i64(310), TotalTokens: i64(20933),
					Cost: &Cost{Input: f64(0.00001), Output: f64(0.003), CacheRead: f64(0.0102), CacheWrite: f64(0.0019), Total: f64(0.0151)}},
				Thinking: []ThinkingBlock{{Index: 0, Signed: true, SigDigest: sum(sig), Chars: 24}}}},
		{"assistant old usage, aborted, empty signature, redacted, content after role", `{"type":"message","timestamp":"T","message":{"content":[` +
			`{"type":"text","text":"x"},{"type":"thinking","thinking":"partial","thinkingSignature":""},` +
			`{"type":"thinking","thinking":"[redacted]","thinkingSignature":"REDACTEDDATA","redacted":true},{"type":"thinking","thinking":"no sig"}],` +
			`"role":"assistant","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":{"total":0.5}},"stopReason":"aborted","errorMessage":"Request was aborted."}}`,
			Entry{Type: "message", Timestamp: "T", Role: "assistant", StopReason: "aborted",
				Usage:    &Usage{Input: i64(1), Output: i64(2), CacheRead: i64(3), CacheWrite: i64(4), Cost: &Cost{Total: f64(0.5)}},
				Thinking: []ThinkingBlock{{Index: 1, Chars: 7}, {Index: 2, Redacted: true, Signed: true, SigDigest: sum("REDACTEDDATA"), Chars: 10}, {Index: 3, Chars: 6}}}},
		{"signature with escapes is hashed decoded", `{"type":"message","id":"a2","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"ab\/c\u0064"}]}}`,
			Entry{Type: "message", ID: "a2", Role: "assistant", Thinking: []ThinkingBlock{{Index: 0, Signed: true, SigDigest: sum("ab/cd"), Chars: 1}}}},
		{"toolResult content not decoded", `{"type":"message","id":"r1","parentId":"a1","timestamp":"T","message":{"role":"toolResult","toolCallId":"toolu_01","toolName":"read",` +
			`"content":[{"type":"text","text":"package main\n{\"type\":\"thinking\"}"}],"details":{"diff":"-a\n+b"},"isError":false,"timestamp":5}}`,
			Entry{Type: "message", ID: "r1", ParentID: "a1", Timestamp: "T", Role: "toolResult", ToolCallID: "toolu_01", MessageTimestamp: 5}},
		{"bashExecution", `{"type":"message","id":"b1","message":{"role":"bashExecution","command":"ls","output":"a\nb","exitCode":0,"cancelled":false,"truncated":false,"timestamp":9}}`,
			Entry{Type: "message", ID: "b1", Role: "bashExecution", UserText: true, MessageTimestamp: 9}},
		{"bashExecution excluded (!!)", `{"type":"message","id":"b2","message":{"role":"bashExecution","command":"ls","output":"","excludeFromContext":true}}`,
			Entry{Type: "message", ID: "b2", Role: "bashExecution"}},
		{"custom role message", `{"type":"message","id":"c1","message":{"role":"custom","customType":"x","content":"injected","display":true}}`,
			Entry{Type: "message", ID: "c1", Role: "custom", UserText: true}},
		{"v2 hookMessage becomes custom", `{"type":"message","id":"c2","message":{"role":"hookMessage","content":[{"type":"text","text":"hi"}]}}`,
			Entry{Type: "message", ID: "c2", Role: "custom", UserText: true}},
		{"unknown role kept", `{"type":"message","id":"d1","message":{"role":"developer","content":"rules"}}`,
			Entry{Type: "message", ID: "d1", Role: "developer"}},
		{"model_change", `{"type":"model_change","id":"m1","parentId":"x","timestamp":"T","provider":"anthropic","modelId":"claude-opus-4-5"}`,
			Entry{Type: "model_change", ID: "m1", ParentID: "x", Timestamp: "T", Provider: "anthropic", ModelID: "claude-opus-4-5"}},
		{"thinking_level_change", `{"type":"thinking_level_change","id":"t1","parentId":"m1","timestamp":"T","thinkingLevel":"xhigh"}`,
			Entry{Type: "thinking_level_change", ID: "t1", ParentID: "m1", Timestamp: "T", ThinkingLevel: "xhigh"}},
		{"compaction", `{"type":"compaction","id":"k1","parentId":"a1","timestamp":"T","summary":"## Goal","firstKeptEntryId":"u1","tokensBefore":150000,"details":{"readFiles":[],"modifiedFiles":[]},"fromHook":true}`,
			Entry{Type: "compaction", ID: "k1", ParentID: "a1", Timestamp: "T", FirstKeptEntryID: "u1"}},
		{"branch_summary", `{"type":"branch_summary","id":"bs","parentId":"a1","timestamp":"T","fromId":"a1","summary":"Tried X."}`,
			Entry{Type: "branch_summary", ID: "bs", ParentID: "a1", Timestamp: "T", FromID: "a1", UserText: true}},
		{"branch_summary empty", `{"type":"branch_summary","id":"bs2","parentId":null,"timestamp":"T","fromId":"root","summary":""}`,
			Entry{Type: "branch_summary", ID: "bs2", Timestamp: "T", FromID: "root"}},
		{"custom frontier keeps data", `{"customType":"context-prune-frontier","type":"custom","id":"f1","parentId":"r1","data":{"lastAttemptedToolCallId":"toolu_01","outcome":"summarized"},"timestamp":"T"}`,
			Entry{Type: "custom", ID: "f1", ParentID: "r1", Timestamp: "T", CustomType: "context-prune-frontier", Data: json.RawMessage(`{"lastAttemptedToolCallId":"toolu_01","outcome":"summarized"}`)}},
		{"custom other drops data", `{"customType":"context-prune-index","type":"custom","id":"f2","parentId":"f1","data":{"toolCalls":[]},"timestamp":"T"}`,
			Entry{Type: "custom", ID: "f2", ParentID: "f1", Timestamp: "T", CustomType: "context-prune-index"}},
		{"custom_message", `{"type":"custom_message","customType":"context-prune-summary","content":"- x","display":false,"details":{"a":1},"id":"cm","parentId":"f2","timestamp":"T"}`,
			Entry{Type: "custom_message", ID: "cm", ParentID: "f2", Timestamp: "T", CustomType: "context-prune-summary", UserText: true}},
		{"label", `{"type":"label","id":"l1","parentId":"cm","timestamp":"T","targetId":"a1","label":"checkpoint"}`,
			Entry{Type: "label", ID: "l1", ParentID: "cm", Timestamp: "T", TargetID: "a1", Label: "checkpoint"}},
		{"label cleared", `{"type":"label","id":"l2","parentId":"l1","timestamp":"T","targetId":"a1"}`,
			Entry{Type: "label", ID: "l2", ParentID: "l1", Timestamp: "T", TargetID: "a1"}},
		{"session_info", `{"type":"session_info","id":"n1","parentId":"l2","timestamp":"T","name":"my session"}`,
			Entry{Type: "session_info", ID: "n1", ParentID: "l2", Timestamp: "T", Name: "my session"}},
		{"unknown type kept verbatim", `{"type":"Some_Future","id":"z1","parentId":"n1","timestamp":"T","payload":[1,{"a":"}"}]}`,
			Entry{Type: "Some_Future", ID: "z1", ParentID: "n1", Timestamp: "T"}},
		{"odd field types do not break the line", `{"type":"model_change","id":42,"parentId":null,"timestamp":1772359205120,"modelId":null,"provider":["x"]}`,
			Entry{Type: "model_change", ID: "42", Timestamp: "1772359205120", Provider: `["x"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, _, es, errs := parseFile(t, v3Header, tt.line)
			if len(errs) != 0 {
				t.Fatalf("errors: %+v", errs)
			}
			if len(es) != 1 {
				t.Fatalf("entries: %+v", es)
			}
			got := es[0]
			takeReply(t, path, &got)
			want := tt.want
			want.Line, want.Offset, want.Length = 2, int64(len(v3Header)+1), len(tt.line)+1
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("entry\n got %s\nwant %s", gj, wj)
			}
		})
	}
}

func TestParseMessageNotObjectIsKept(t *testing.T) {
	_, es, errs := parseLines(t, v3Header, `{"type":"message","id":"x","message":"oops"}`)
	if len(es) != 1 || es[0].ID != "x" {
		t.Fatalf("entries %+v", es)
	}
	if len(errs) != 1 || !errs[0].Kept || errs[0].Line != 2 {
		t.Fatalf("errors %+v", errs)
	}
}

func TestParseMalformedLineInTheMiddle(t *testing.T) {
	lines := []string{v3Header,
		`{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}`,
		`{"type":"message","id":"b","parentId":"a","message":{"role":"assist`, // torn by a crash, then more appended
		``, // blank: skipped silently
		`{"type":"message","id":"c","parentId":"a","message":{"role":"user","content":"y"}}`,
		`not json at all`,
		`{"type":"label","id":"d","parentId":"c","targetId":"a","label":"l"}`,
	}
	_, es, errs := parseLines(t, lines...)
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID+"@"+itoa(e.Line))
	}
	if got := strings.Join(ids, " "); got != "a@2 c@5 d@7" {
		t.Errorf("entries = %s", got)
	}
	if len(errs) != 2 || errs[0].Line != 3 || errs[1].Line != 6 || errs[0].Path != "/s.jsonl" || errs[0].Reason != "malformed JSON" {
		t.Errorf("errors = %+v", errs)
	}
	if errs[0].Offset != int64(len(lines[0])+1+len(lines[1])+1) {
		t.Errorf("error offset = %d", errs[0].Offset)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseV1SynthesizesIDs(t *testing.T) {
	lines := []string{
		`{"type":"session","id":"s","timestamp":"t","cwd":"/w"}`,
		`{"type":"model_change","timestamp":"t","provider":"anthropic","modelId":"m"}`,                 // value 1
		`{"type":"message","timestamp":"t","message":{"role":"user","content":"a"}}`,                   // value 2
		`{"type":"message","timestamp":"t","message":{"role":"assist`,                                  // malformed: not a value
		`{"type":"message","timestamp":"t","message":{"role":"assistant","content":[]}}`,               // value 3
		`{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":2,"tokensBefore":5}`, // value 4
		`{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":0}`,                  // the header: unresolved
	}
	_, es, errs := parseLines(t, lines...)
	type idp struct{ id, parent, kept string }
	var got []idp
	for _, e := range es {
		got = append(got, idp{e.ID, e.ParentID, e.FirstKeptEntryID})
	}
	want := []idp{{"v1:1", "", ""}, {"v1:2", "v1:1", ""}, {"v1:3", "v1:2", ""}, {"v1:4", "v1:3", "v1:2"}, {"v1:5", "v1:4", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ids = %v, want %v", got, want)
	}
	if len(errs) != 2 || errs[0].Line != 4 || !errs[1].Kept || errs[1].Line != 7 {
		t.Errorf("errors = %+v", errs)
	}
}

// TestParseGenerated checks the parser against what the generator wrote,
// line by line, for v3, v1 and a v1 file as pi migrates it.
func TestParseGenerated(t *testing.T) {
	v1 := pisessiontest.Generate(pisessiontest.Options{Seed: 7, Version: 1, Turns: 30})
	for _, s := range []*pisessiontest.Session{
		pisessiontest.Generate(pisessiontest.Options{Seed: 1, Turns: 40}),
		pisessiontest.Generate(pisessiontest.Options{Seed: 2, Turns: 40}),
		pisessiontest.Generate(pisessiontest.Options{Seed: 11, Turns: 60, Pi16: true}),
		v1,
		v1.Migrated(9),
	} {
		p := NewParser("/g.jsonl")
		var h *Header
		n := 0
		for i, l := range s.Lines {
			start := s.Offsets[i]
			end := len(s.Data)
			if i+1 < len(s.Offsets) {
				end = s.Offsets[i+1]
			}
			res := p.Line(s.Data[start:end], int64(start))
			if res.Err != nil {
				t.Fatalf("line %d: %+v", i+1, res.Err)
			}
			if l.Type == "session" {
				h = res.Header
				if h == nil || h.ID != s.ID || h.Version != s.Version {
					t.Fatalf("header %+v, want id %s version %d", h, s.ID, s.Version)
				}
				continue
			}
			e := res.Entry
			if e == nil {
				t.Fatalf("line %d: no entry", i+1)
			}
			n++
			wantID, wantParent, wantKept := l.ID, l.ParentID, l.FirstKeptID
			if s.Version == 1 {
				wantID = V1ID(l.Index)
				if l.Index > 1 {
					wantParent = V1ID(l.Index - 1)
				}
				if l.Type == "compaction" {
					wantKept = V1ID(l.FirstKeptIndex)
				}
			}
			if e.Type != l.Type || e.Role != l.Role || e.ID != wantID || e.ParentID != wantParent || e.FirstKeptEntryID != wantKept ||
				e.ToolCalls != l.ToolCalls || e.UserText != l.UserText || e.CustomType != l.CustomType || e.StopReason != l.StopReason ||
				e.Line != i+1 || e.Offset != int64(start) || e.Length != end-start {
				t.Fatalf("line %d: got %+v, want %+v", i+1, *e, l)
			}
			if len(e.Thinking) != len(l.Thinking) {
				t.Fatalf("line %d: thinking %+v, want %+v", i+1, e.Thinking, l.Thinking)
			}
			for k, tb := range e.Thinking {
				w := l.Thinking[k]
				var d []byte
				if w.Signature != "" {
					d = sum(w.Signature)
				}
				if tb.Index != w.Index || tb.Redacted != w.Redacted || tb.Signed != (w.Signature != "") || !bytes.Equal(tb.SigDigest, d) || tb.Chars != w.Chars {
					t.Fatalf("line %d block %d: got %+v, want %+v", i+1, k, tb, w)
				}
			}
			if (l.Role == "assistant" || l.Type == "usage") && (e.Usage == nil || (e.Usage.TotalTokens != nil) != l.HasTotalTokens || e.Usage.Cost == nil || e.Usage.Cost.Total == nil) {
				t.Fatalf("line %d: usage %+v", i+1, e.Usage)
			}
			if e.UsageKind != l.UsageKind || e.EditOmit != l.EditOmit || (l.Type == "context_edit" && e.TargetID != l.TargetID) {
				t.Fatalf("line %d: kind %q omit %v target %q, want %+v", i+1, e.UsageKind, e.EditOmit, e.TargetID, l)
			}
			if l.Usage16 && (e.Usage == nil || e.Usage.CacheWrite1h == nil || *e.Usage.CacheWrite1h != int64(l.CacheWrite1h) ||
				e.Usage.Reasoning == nil || *e.Usage.Reasoning != int64(l.Reasoning)) {
				t.Fatalf("line %d: usage %+v, want cacheWrite1h %d reasoning %d", i+1, e.Usage, l.CacheWrite1h, l.Reasoning)
			}
			if l.Type == "usage" && (e.Model == "" || e.Provider != "anthropic") {
				t.Fatalf("line %d: usage entry model %q provider %q", i+1, e.Model, e.Provider)
			}
			if l.CustomType == FrontierCustomType && !json.Valid(e.Data) {
				t.Fatalf("line %d: frontier data %q", i+1, e.Data)
			}
		}
		if n == 0 || h == nil {
			t.Fatal("nothing parsed")
		}
	}
}

// FuzzParseLine checks that no line makes the parser panic and that a line
// json.Valid rejects is always an error.
func FuzzParseLine(f *testing.F) {
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 3, Turns: 5})
	for i := range s.Lines {
		end := len(s.Data)
		if i+1 < len(s.Offsets) {
			end = s.Offsets[i+1]
		}
		f.Add(s.Data[s.Offsets[i]:end])
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p := NewParser("/f")
		p.Line([]byte(v3Header+"\n"), 0)
		res := p.Line(line, 100)
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && !json.Valid(bytes.TrimRight(line, "\r\n")) && (res.Err == nil || res.Entry != nil) {
			t.Fatalf("invalid line accepted: %q", line)
		}
	})
}

// FuzzParseMatchesEncodingJSON checks the field walker against
// encoding/json on any valid line: the envelope strings and the message's
// role and model must come out the same.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 4, Turns: 8})
	for i := range s.Lines {
		end := len(s.Data)
		if i+1 < len(s.Offsets) {
			end = s.Offsets[i+1]
		}
		f.Add(s.Data[s.Offsets[i] : end-1])
	}
	f.Add([]byte(`{"type":"x","a":{"type":"inner","id":"no"},"id":"yes","b":["id",{"parentId":"no"}],"parentId":"p"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if !json.Valid(line) || bytes.IndexByte(line, '\n') >= 0 || !bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			return
		}
		var ref struct {
			Type, ID, ParentID, Timestamp any
			Message                       any
		}
		if json.Unmarshal(line, &ref) != nil {
			return // not an object
		}
		// encoding/json matches keys case-insensitively; pi (JavaScript)
		// and bindery do not. Only compare lines whose keys are exact.
		lower := bytes.ToLower(line)
		for _, k := range []string{`"type"`, `"id"`, `"parentid"`, `"timestamp"`, `"message"`} {
			if bytes.Count(lower, []byte(k)) != bytes.Count(line, []byte(k)) {
				return
			}
		}
		if bytes.Contains(line, []byte(`\u`)) || bytes.Contains(lower, []byte(`"parentid"`)) {
			return // escaped keys; parentId's capital I always differs from its lower case
		}
		p := NewParser("/f")
		p.Line([]byte(v3Header+"\n"), 0)
		res := p.Line(line, 100)
		if res.Entry == nil {
			if ref.Type != "session" {
				t.Fatalf("no entry for %q (%+v)", line, res.Err)
			}
			return
		}
		str := func(v any) string {
			if s, ok := v.(string); ok {
				return s
			}
			return "<non-string>"
		}
		for _, c := range []struct {
			name string
			got  string
			want any
		}{{"type", res.Entry.Type, ref.Type}, {"id", res.Entry.ID, ref.ID}, {"timestamp", res.Entry.Timestamp, ref.Timestamp}} {
			if w, ok := c.want.(string); ok && c.got != w {
				t.Fatalf("%s: got %q, encoding/json %q, line %q", c.name, c.got, str(c.want), line)
			}
		}
	})
}

// pi 1.6's entries as its session manager writes them, and their odd
// shapes: each odd line is kept (its entry is usable) with an error naming
// the oddity.
func TestParsePi16Entries(t *testing.T) {
	path, _, es, errs := parseFile(t, v3Header,
		`{"type":"usage","id":"w1","parentId":"a1","timestamp":"T","kind":"cache_warm","provider":"anthropic","model":"claude-opus-5-5","usage":{"input":3,"output":1,"cacheRead":900,"cacheWrite":10,"cacheWrite1h":4,"reasoning":0,"totalTokens":914,"cost":{"input":0.1,"output":0.2,"cacheRead":0.3,"cacheWrite":0.4,"total":1}},"note":"extension override"}`,
		`{"type":"context_edit","id":"e1","parentId":"w1","timestamp":"T","targetId":"a1","replacement":null}`,
		`{"type":"context_edit","id":"e2","parentId":"e1","timestamp":"T","targetId":"u1","replacement":{"content":"shorter"}}`,
		`{"type":"context_edit","id":"e3","parentId":"e2","timestamp":"T","targetId":"a2","replacement":{"content":[{"type":"thinking","thinking":"abc","thinkingSignature":"c2ln"},{"type":"toolCall","id":"t","name":"x","arguments":{}}]}}`,
		`{"type":"message","id":"s1","parentId":"e3","timestamp":"T","message":{"role":"system","content":"Use tabs.","timestamp":5}}`,
		`{"type":"usage","id":"w2","parentId":"s1","timestamp":"T","kind":"cache_warm","usage":7}`,
		`{"type":"context_edit","id":"e4","parentId":"w2","timestamp":"T","targetId":"a1"}`,
		`{"type":"context_edit","id":"e5","parentId":"e4","timestamp":"T","targetId":"a1","replacement":"x"}`,
	)
	want := []Entry{
		{Type: "usage", ID: "w1", ParentID: "a1", Timestamp: "T", UsageKind: "cache_warm", Provider: "anthropic", Model: "claude-opus-5-5",
			Usage: &Usage{Input: i64(3), Output: i64(1), CacheRead: i64(900), CacheWrite: i64(10), CacheWrite1h: i64(4), Reasoning: i64(0), TotalTokens: i64(914),
				Cost: &Cost{Input: f64(0.1), Output: f64(0.2), CacheRead: f64(0.3), CacheWrite: f64(0.4), Total: f64(1)}}},
		{Type: "context_edit", ID: "e1", ParentID: "w1", Timestamp: "T", TargetID: "a1", EditOmit: true},
		{Type: "context_edit", ID: "e2", ParentID: "e1", Timestamp: "T", TargetID: "u1"},
		{Type: "context_edit", ID: "e3", ParentID: "e2", Timestamp: "T", TargetID: "a2",
			Thinking: []ThinkingBlock{{Index: 0, Signed: true, SigDigest: sum("c2ln"), Chars: 3}}},
		{Type: "message", ID: "s1", ParentID: "e3", Timestamp: "T", Role: "system", MessageTimestamp: 5},
		{Type: "usage", ID: "w2", ParentID: "s1", Timestamp: "T", UsageKind: "cache_warm"},
		{Type: "context_edit", ID: "e4", ParentID: "w2", Timestamp: "T", TargetID: "a1"},
		{Type: "context_edit", ID: "e5", ParentID: "e4", Timestamp: "T", TargetID: "a1"},
	}
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d", len(es), len(want))
	}
	for i := range want {
		takeReply(t, path, &es[i])
		es[i].Line, es[i].Offset, es[i].Length = 0, 0, 0
		if !reflect.DeepEqual(es[i], want[i]) {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, es[i], want[i])
		}
	}
	wantErrs := map[int]string{7: "usage entry without a usage object", 8: "context_edit without a replacement",
		9: "context_edit replacement is neither null nor an object"}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors %+v", errs)
	}
	for _, e := range errs {
		if !e.Kept || wantErrs[e.Line] != e.Reason {
			t.Errorf("line %d: %+v, want kept with %q", e.Line, e, wantErrs[e.Line])
		}
	}
}

// takeReply checks that a parse left e without a reply, and that ReadReply
// of e's line in the file at path gives one in wire shape exactly when e is
// an assistant message holding signed thinking (never a context_edit's
// replacement; reply_test.go checks the shape), with e's fields otherwise.
func takeReply(t *testing.T, path string, e *Entry) {
	t.Helper()
	if e.Reply != nil {
		t.Errorf("entry %s: a parse built a reply: %s", e.ID, e.Reply)
	}
	signed := false
	for _, tb := range e.Thinking {
		signed = signed || (tb.Signed && e.Type == "message")
	}
	got, err := ReadReply(path, e.Offset, e.Length)
	if err != nil {
		t.Fatalf("entry %s: %v", e.ID, err)
	}
	if signed != (got.Reply != nil) || (got.Reply != nil && !json.Valid(got.Reply)) {
		t.Errorf("entry %s: signed thinking %v, reply %s", e.ID, signed, got.Reply)
	}
	got.Reply, got.Line = nil, e.Line
	if !reflect.DeepEqual(*got, *e) {
		t.Errorf("entry %s read again:\n got %+v\nwant %+v", e.ID, *got, *e)
	}
}
