package daemon

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// A stamp is linked to the session entry holding its reply whichever
// lands first, the accept or the line, and no stop of the daemon between
// an ingest's commit and the hooks that follow it can lose the link: the
// ingest links in its own transaction. The order is forced, not raced:
// piIndex commits each line with db.Ingest and never runs Binder.Ingested,
// exactly what a daemon stopped (kill -9, or SIGTERM cancelling the hook's
// context) right after the commit leaves behind. Before the link moved
// into the ingest transaction, TestPiSessionForksAndFileAttribution
// (cmd/bindery) timed out on this about one run in four.
func TestStampLinkedWhicheverLandsFirst(t *testing.T) {
	e := newBindingEnv(t, nil)
	const sid = "0193e6c4-cccc-7000-8000-000000000001"
	p := &piIndex{tb: t, e: e, id: sid, path: "/sessions/" + sid + ".jsonl"}
	linked := func() (int, int) {
		t.Helper()
		_, total, linked, err := e.db.StampCounts(t.Context(), sid)
		if err != nil {
			t.Fatal(err)
		}
		return total, linked
	}
	turn := func(leaf string, turns []int) string {
		t.Helper()
		ans, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: sid, Branch: leaf, Request: piRequest(turns, "go"), Return: api.ReturnPlan})
		if err != nil {
			t.Fatalf("compile at %s: %v", leaf, err)
		}
		return ans.CompileID
	}
	accept := func(id, sig string) {
		t.Helper()
		if _, err := e.client.Accept(t.Context(), &api.AcceptCall{CompileID: id, Reply: reply(sig)}); err != nil {
			t.Fatalf("accept %s: %v", id, err)
		}
	}

	// The accept first: its reply is not in the index yet, so nothing to
	// link to; the line's ingest links it.
	p.user("u1", "")
	accept(turn("u1", nil), "sig-0")
	if total, n := linked(); total != 1 || n != 0 {
		t.Fatalf("after the accept, before the line: stamps %d, linked %d; want 1, 0", total, n)
	}
	p.assistant("a1", "u1", "sig-0")
	if total, n := linked(); total != 1 || n != 1 {
		t.Fatalf("after the line's ingest (no hook ran): stamps %d, linked %d; want 1, 1", total, n)
	}

	// The line first: the accept links it in its own transaction.
	p.user("u2", "a1")
	id := turn("u2", []int{0})
	p.assistant("a2", "u2", "sig-1")
	accept(id, "sig-1")
	if total, n := linked(); total != 2 || n != 2 {
		t.Fatalf("after the line, then the accept: stamps %d, linked %d; want 2, 2", total, n)
	}
}

// A reply pi wrote to the session file and whose accept never came is
// stamped when the file shows it (design/binding.md, "Reply seen only in
// the session file"), by the ingest hook the daemon runs after each commit
// (Binder.Ingested): the compile built on the reply's parent made it, past
// an entry pi-condense writes in between (passThrough). Its stamp is the
// one an accept would have made: minted under that compile's request, its
// predecessor the block the request ended with. A reply under a leaf no
// compile was made at gets no stamp. The next compile keeps the block.
func TestPiReplySeenOnlyInFileIsStamped(t *testing.T) {
	const sid = "0193e6c4-dddd-7000-8000-000000000001"
	e, p, path := turnNeverAccepted(t, sid)
	ctx := t.Context()
	compile := p.compile
	p.add(db.Entry{ID: "n2", ParentID: "u2", Type: "custom", CustomType: "pi-condense-note"})
	// fileReply writes pi's assistant entry to the file, ingests it as the
	// watcher reads it (its reply stays in the file), and runs the hook on
	// the batch.
	fileReply := func(id, parent, sig string) binding.Digest {
		t.Helper()
		key := sha256.Sum256([]byte(sig))
		off, n := appendPiReply(t, path, id, parent, sig)
		b, ing := p.add(db.Entry{ID: id, ParentID: parent, Role: "assistant", Offset: off, Length: n,
			Thinking: []db.Thinking{{Index: 0, Signed: true, SigDigest: key[:], Chars: 1}}})
		if err := e.b.Ingested(ctx, b, ing); err != nil {
			t.Fatalf("the ingest hook on %s: %v", id, err)
		}
		return key
	}
	key := fileReply("a2", "n2", "sig-2")
	have, err := e.db.Stamps(ctx, []binding.Digest{key, sha256.Sum256([]byte("sig-1"))})
	if err != nil {
		t.Fatal(err)
	}
	st, ok := have[key]
	if !ok {
		t.Fatal("the reply seen only in the file got no stamp")
	}
	if st.Source != "file" || st.Entry != "a2" || st.Conversation != sid {
		t.Errorf("stamp %+v: want source file, entry a2, conversation %s", st, sid)
	}
	prev, ok := have[sha256.Sum256([]byte("sig-1"))]
	if !ok {
		t.Fatal("turn 1's accept left no stamp")
	}
	if st.Pred != prev.Key || st.Seed != prev.Seed || st.Model != prev.Model || st.Chain == prev.Chain {
		t.Errorf("stamp %+v: want predecessor turn 1's block, its seed and model, and a chain of its own (turn 1: %+v)", st.Stamp, prev.Stamp)
	}

	// Under a leaf no compile was made at: nothing made it.
	p.user("v2", "a1")
	orphan := fileReply("b2", "v2", "sig-orphan")
	if have, err := e.db.Stamps(ctx, []binding.Digest{orphan}); err != nil || len(have) != 0 {
		t.Errorf("a reply under a leaf never compiled was stamped: %+v %v", have, err)
	}

	p.user("u3", "a2")
	if got := compile("u3", []int{1, 2}, "turn 3"); got.ThinkingStripped != 0 {
		t.Errorf("turn 3 stripped %d blocks, want none", got.ThinkingStripped)
	}
}

// appendPiReply appends pi's assistant entry (thinking signed sig, then a
// text) to the session file at path, and returns where its line lies.
func appendPiReply(t *testing.T, path, id, parent, sig string) (offset int64, length int) {
	t.Helper()
	line := fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-11-29T10:30:00.000Z","message":`+
		`{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":%q},{"type":"text","text":"ok"}],`+
		`"api":"anthropic-messages","provider":"anthropic","model":"claude-fable-5-2","stopReason":"stop","timestamp":1}}`+"\n", id, parent, sig)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
	return fi.Size(), len(line)
}

// The hook reads a reply from the session file when it needs one (a batch
// carries none), and the file is pi's: by then it may hold something else
// where the reply was. A line that is not the reply the batch read (other
// signed blocks, or no complete line) is an error naming the file, and
// nothing is stamped from it; the reply stays unstamped, so the next
// compile strips it (safe), never keeps it on a stamp of what the file
// holds instead.
func TestPiReplyChangedInFileIsNotStamped(t *testing.T) {
	e, p, path := turnNeverAccepted(t, "0193e6c4-dddd-7000-8000-000000000002")
	ctx := t.Context()

	for _, tc := range []struct {
		name, id, sig string
		change        func(off int64, n int) // what becomes of the line before the hook reads it
		want          string
	}{
		{"other blocks", "a2", "sig-2", func(off int64, n int) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// the same line but for the signature (the same length): another reply
			if _, err := f.WriteAt([]byte(strings.Replace(readAt(t, path, off, n), "sig-2", "sig-9", 1)), off); err != nil {
				t.Fatal(err)
			}
		}, "no longer this reply"},
		{"cut", "a3", "sig-3", func(off int64, n int) {
			if err := os.Truncate(path, off+int64(n)/2); err != nil {
				t.Fatal(err)
			}
		}, "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := sha256.Sum256([]byte(tc.sig))
			off, n := appendPiReply(t, path, tc.id, "u2", tc.sig)
			tc.change(off, n)
			b, ing := p.add(db.Entry{ID: tc.id, ParentID: "u2", Role: "assistant", Offset: off, Length: n,
				Thinking: []db.Thinking{{Index: 0, Signed: true, SigDigest: key[:], Chars: 1}}})
			err := e.b.Ingested(ctx, b, ing)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("hook: %v, want an error naming %s and saying %q", err, path, tc.want)
			}
			other := sha256.Sum256([]byte("sig-9"))
			if have, err := e.db.Stamps(ctx, []binding.Digest{key, other}); err != nil || len(have) != 0 {
				t.Errorf("stamped from a line that is not the reply: %+v %v", have, err)
			}
		})
	}
}

func readAt(t *testing.T, path string, off int64, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[off : off+int64(n)])
}

// turnNeverAccepted is pi session sid whose file is at path: turn 1
// compiled, accepted and written (u1 a1), then u2 compiled with an accept
// that never comes.
func turnNeverAccepted(t *testing.T, sid string) (e *bindingEnv, p *piIndex, path string) {
	t.Helper()
	e = newBindingEnv(t, nil)
	path = filepath.Join(t.TempDir(), sid+".jsonl")
	p = &piIndex{tb: t, e: e, id: sid, path: path}
	p.linear(1)
	p.user("u2", "a1")
	p.compile("u2", []int{1}, "turn 2") // its accept never comes
	return e, p, path
}
