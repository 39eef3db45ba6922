package watcher

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadBatch reads arbitrary file contents the way the watcher does
// (batches, a line bound, an overlong line resumed across reads) with a
// tiny chunk, line bound and batch bound, and checks what every reader of
// the cursor relies on: it only moves forward, always to just after a
// newline, ends after the last one, and every line is accounted for once
// (an entry, an error, or blank or unused).
func FuzzReadBatch(f *testing.F) {
	f.Add([]byte("{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"cwd\":\"/\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null}\n"), uint8(0))
	f.Add(bytes.Repeat([]byte("x"), 300), uint8(3))
	f.Add(append(bytes.Repeat([]byte("y"), 200), []byte("\n{}\n")...), uint8(1))
	f.Add([]byte("\n\n\nnot json\n{\"type\":\"message\"}"), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		if len(data) > 1<<16 {
			return
		}
		path := filepath.Join(t.TempDir(), "f.jsonl")
		// The file grows in two steps, as pi appends: the reader resumes.
		split := len(data) * int(cut) / 255
		if err := os.WriteFile(path, data[:split], 0o644); err != nil {
			t.Fatal(err)
		}
		r := newReader(16, 64, 100)
		cur := Cursor{Path: path}
		var chk fileCheck
		var prevTail []byte
		var long *longLine
		lines := map[int64]bool{} // offsets of lines an entry or error named
		readAll := func(size int) {
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			for range 10000 {
				b, next, nextChk, eof, nextLong, err := r.readBatch(fh, cur, chk, prevTail, long)
				if err != nil {
					t.Fatal(err)
				}
				if next.Offset < cur.Offset || next.Offset > int64(size) || (next.Offset > 0 && data[next.Offset-1] != '\n') {
					t.Fatalf("cursor %d -> %d in %q", cur.Offset, next.Offset, data[:size])
				}
				for _, e := range b.Entries {
					if e.Offset < cur.Offset || e.Offset+int64(e.Length) > next.Offset || data[e.Offset+int64(e.Length)-1] != '\n' || lines[e.Offset] {
						t.Fatalf("entry %+v outside %d..%d or twice", e, cur.Offset, next.Offset)
					}
					lines[e.Offset] = true
				}
				for _, ie := range b.Errors {
					if ie.Kept {
						continue // with its entry
					}
					if lines[ie.Offset] && ie.Offset != cur.Offset {
						t.Fatalf("error %+v for a line already accounted for", ie)
					}
					lines[ie.Offset] = true
				}
				progressed := next.Offset != cur.Offset
				if progressed {
					cur, chk, prevTail = next, nextChk, bytes.Clone(r.tail.buf)
				}
				long = nextLong
				if eof && !progressed {
					return
				}
			}
			t.Fatal("no end")
		}
		readAll(split)
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(data[split:])
		fh.Close()
		readAll(len(data))
		want := int64(bytes.LastIndexByte(data, '\n') + 1)
		if cur.Offset != want || cur.Lines != bytes.Count(data, []byte("\n")) {
			t.Fatalf("ended at %d after %d lines, want %d after %d", cur.Offset, cur.Lines, want, bytes.Count(data, []byte("\n")))
		}
		// The check the cursor carries verifies against the file.
		if cur.Offset > 0 {
			fh, _ := os.Open(path)
			defer fh.Close()
			ok, _, err := chk.verify(fh, cur.Offset, int64(len(data)), make([]byte, 2*checkWindow))
			if err != nil || !ok {
				t.Fatalf("the cursor's check does not verify: %v %v", ok, err)
			}
		}
	})
}
