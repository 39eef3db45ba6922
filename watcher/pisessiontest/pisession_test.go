package pisessiontest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDeterministicAndValid(t *testing.T) {
	a := Generate(Options{Seed: 42, Turns: 60})
	b := Generate(Options{Seed: 42, Turns: 60})
	if !bytes.Equal(a.Data, b.Data) {
		t.Fatal("same seed, different bytes")
	}
	if c := Generate(Options{Seed: 43, Turns: 60}); bytes.Equal(a.Data, c.Data) {
		t.Fatal("different seeds, same bytes")
	}
	var streamed bytes.Buffer
	if n, err := Write(&streamed, Options{Seed: 42, Turns: 60}); err != nil || n != int64(len(a.Data)) || !bytes.Equal(streamed.Bytes(), a.Data) {
		t.Fatalf("Write: %d bytes, err %v", n, err)
	}
	types := map[string]bool{}
	roles := map[string]bool{}
	var aborted, redacted, branches, frontier bool
	ids := map[string]bool{}
	for i, l := range a.Lines {
		end := len(a.Data)
		if i+1 < len(a.Offsets) {
			end = a.Offsets[i+1]
		}
		line := a.Data[a.Offsets[i]:end]
		if line[len(line)-1] != '\n' || !json.Valid(line[:len(line)-1]) {
			t.Fatalf("line %d invalid: %q", i+1, line)
		}
		types[l.Type] = true
		roles[l.Role] = true
		for _, th := range l.Thinking {
			aborted = aborted || (th.Signature == "" && l.StopReason == "aborted")
			redacted = redacted || th.Redacted
		}
		if l.ParentID != "" && i > 1 && l.ParentID != a.Lines[i-1].ID {
			branches = true
		}
		if l.ParentID != "" && !ids[l.ParentID] {
			t.Fatalf("line %d: parent %s not written before", i+1, l.ParentID)
		}
		ids[l.ID] = true
		frontier = frontier || l.CustomType == "context-prune-frontier"
	}
	for _, typ := range []string{"session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
		"custom", "custom_message", "label", "session_info", "some_future_entry"} {
		if !types[typ] {
			t.Errorf("no %s entry in 60 turns", typ)
		}
	}
	for _, r := range []string{"user", "assistant", "toolResult", "bashExecution"} {
		if !roles[r] {
			t.Errorf("no %s message", r)
		}
	}
	if !aborted || !redacted || !branches || !frontier {
		t.Errorf("aborted %v redacted %v branches %v frontier %v", aborted, redacted, branches, frontier)
	}
}

func TestTargetBytes(t *testing.T) {
	s := Generate(Options{Seed: 1, TargetBytes: 1 << 20})
	if len(s.Data) < 1<<20 || len(s.Data) > 2<<20 {
		t.Errorf("%d bytes for a 1 MiB target", len(s.Data))
	}
}

func TestV1AndMigration(t *testing.T) {
	v1 := Generate(Options{Seed: 5, Version: 1, Turns: 30})
	if bytes.Contains(v1.Data, []byte(`"parentId"`)) || bytes.Contains(v1.Data, []byte(`"totalTokens"`)) || !bytes.Contains(v1.Data, []byte(`"firstKeptEntryIndex"`)) {
		t.Fatal("v1 file has v2+ fields or lacks firstKeptEntryIndex")
	}
	m := v1.Migrated(6)
	if len(m.Data) <= len(v1.Data) || m.Version != 3 || len(m.Lines) != len(v1.Lines) {
		t.Fatalf("migrated: %d bytes (v1 %d), version %d", len(m.Data), len(v1.Data), m.Version)
	}
	if !bytes.HasPrefix(m.Data, []byte(`{"type":"session","version":3,`)) || bytes.Contains(m.Data, []byte(`firstKeptEntryIndex`)) {
		t.Fatal("migrated header or compaction wrong")
	}
	for i := 2; i < len(m.Lines); i++ {
		if m.Lines[i].ParentID != m.Lines[i-1].ID {
			t.Fatalf("line %d parent %s, want %s", i+1, m.Lines[i].ParentID, m.Lines[i-1].ID)
		}
	}
}

func TestFileOperations(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName(time.Date(2026, 3, 1, 10, 0, 0, 123e6, time.UTC), "abc"))
	if filepath.Base(p) != "2026-03-01T10-00-00-123Z_abc.jsonl" {
		t.Errorf("file name %s", filepath.Base(p))
	}
	if got := ProjectDir("/Users/me/src/app"); got != "--Users-me-src-app--" {
		t.Errorf("project dir %s", got)
	}
	s := Generate(Options{Seed: 1, Turns: 1})
	if err := s.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	ino := inodeOf(fi)
	var mid []byte
	line := UserLine("u1", "", "hello", time.Now())
	if err := AppendHalves(p, line, func() { mid, _ = os.ReadFile(p) }); err != nil {
		t.Fatal(err)
	}
	if len(mid) != len(s.Data)+len(line)/2 {
		t.Errorf("after the first half: %d bytes", len(mid))
	}
	if err := RewriteInPlace(p, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	fi, _ = os.Stat(p)
	if string(got) != "x\n" || inodeOf(fi) != ino {
		t.Error("rewrite in place changed the inode or the content is wrong")
	}
}

// Pi16 writes pi 1.6's entries: usage entries (cache warms) that become the
// leaf, persisted system messages, and context edits (omitting an aborted
// reply, replacing a tool result, replacing a reply's content while keeping
// its signed thinking block), each targeting an entry written before it on
// the same path.
func TestPi16Entries(t *testing.T) {
	s := Generate(Options{Seed: 11, Turns: 60, Pi16: true})
	if plain := Generate(Options{Seed: 11, Turns: 60}); bytes.Contains(plain.Data, []byte(`"context_edit"`)) || bytes.Contains(plain.Data, []byte(`cacheWrite1h`)) {
		t.Fatal("pi 1.6 entries without Pi16")
	}
	byID := map[string]Line{}
	var warms, systems, omits, replaced, keptThinking, w1h int
	for i, l := range s.Lines {
		byID[l.ID] = l
		switch {
		case l.Type == "usage":
			warms++
			if l.UsageKind != "cache_warm" || l.ParentID != s.Lines[i-1].ID {
				t.Fatalf("line %d: usage entry %+v not a child of the leaf", i+1, l)
			}
		case l.Role == "system":
			systems++
		case l.Type == "context_edit":
			target, ok := byID[l.TargetID]
			if !ok {
				t.Fatalf("line %d: edit of %s, not written before", i+1, l.TargetID)
			}
			switch {
			case l.EditOmit:
				omits++
				if target.StopReason != "aborted" {
					t.Fatalf("line %d: omits a %+v", i+1, target)
				}
			default:
				replaced++
				for _, th := range l.Thinking {
					keptThinking++
					if len(target.Thinking) == 0 || target.Thinking[0].Signature != th.Signature {
						t.Fatalf("line %d: replacement thinking not the target's", i+1)
					}
				}
			}
		}
		if l.Usage16 && l.CacheWrite1h > 0 {
			w1h++
		}
	}
	if warms == 0 || systems == 0 || omits == 0 || replaced == 0 || keptThinking == 0 || w1h == 0 {
		t.Fatalf("warms %d systems %d omits %d replaced %d kept thinking %d 1h writes %d", warms, systems, omits, replaced, keptThinking, w1h)
	}
}
