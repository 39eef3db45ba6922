package db

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// longRecord is a record of n sent messages, every third with a kept
// thinking block, as a long conversation's compile makes them.
func longRecord(id string, seq int64, n int) *binding.CompileRecord {
	rec := testRecord(id, "conv", "b", seq)
	rec.Sent, rec.Kept = nil, nil
	for i := range n {
		m := binding.SentMessage{Orig: i, Frame: uint64(i) * 7}
		if i%2 == 1 {
			m.Blocks = []uint64{uint64(i), uint64(i) + 1}
			if i%3 == 0 {
				rec.Kept = append(rec.Kept, binding.KeptBlock{Key: bdigest(fmt.Sprint("k", i)), Orig: binding.Pos{Message: i, Block: 0}, Sent: binding.Pos{Message: i, Block: 0}})
			}
		}
		rec.Sent = append(rec.Sent, m)
	}
	return rec
}

func storeRecord(t *testing.T, d *DB, rec *binding.CompileRecord, src ChunkSource) []ChunkHash {
	t.Helper()
	var chunks []ChunkHash
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		if err := tx.UpsertConversation(ctx, ConversationRow{ID: rec.Conversation, CreatedMs: 1}); err != nil {
			return err
		}
		var err error
		chunks, err = tx.InsertCompile(ctx, rec, 1, src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

// TestRecordChunks: a long record is stored as chunks and reads back
// exactly; the next record, extending it in the same memory
// (binding.ShareTail), writes only its new chunk; one equal in other memory
// writes none either; a short record is stored whole; a damaged or missing
// chunk is an error naming the compile, never another record; the sweep
// deletes exactly the chunks no live record names.
func TestRecordChunks(t *testing.T) {
	d := mustOpen(t)
	chunkRows := func() int { return count(t, d, `SELECT count(*) FROM record_chunks`) }

	first := longRecord("c1", 1, 300)
	want1 := cloneRec(first)
	c1 := storeRecord(t, d, first, ChunkSource{})
	if len(c1) != 300/chunkMessages || chunkRows() != len(c1) {
		t.Fatalf("300 messages: %d chunks named, %d stored; want %d", len(c1), chunkRows(), 300/chunkMessages)
	}
	if got := loadRecord(t, d, "c1"); !reflect.DeepEqual(got, want1) {
		t.Fatalf("c1 reads back %+v\nwant %+v", got, want1)
	}
	if c, _, _ := d.Compile(t.Context(), "c1"); !reflect.DeepEqual(c.Chunks, c1) {
		t.Fatalf("c1's chunks read back %x, want %x", c.Chunks, c1)
	}

	// the next turn: 300 + 70 messages, sharing the first's arrays
	grown := longRecord("c2", 2, 370)
	want2 := cloneRec(grown)
	var tip binding.ShareTip
	binding.ShareTail(first, nil, &tip)
	binding.ShareTail(grown, first, &tip)
	before := chunkRows()
	c2 := storeRecord(t, d, grown, ChunkSource{Record: first, Chunks: c1})
	if len(c2) != 370/chunkMessages || !reflect.DeepEqual(c2[:len(c1)], c1) {
		t.Fatalf("c2 names %x, want c1's then one more", c2)
	}
	if n := chunkRows() - before; n != 1 {
		t.Fatalf("the grown record wrote %d chunks, want 1", n)
	}
	if got := loadRecord(t, d, "c2"); !reflect.DeepEqual(got, want2) {
		t.Fatal("c2 does not read back as stored")
	}
	// equal contents in other memory: hashed, found stored, not written
	other := longRecord("c3", 3, 370)
	before = chunkRows()
	c3 := storeRecord(t, d, other, ChunkSource{Record: first, Chunks: c1})
	if n := chunkRows() - before; n != 0 || !reflect.DeepEqual(c3, c2) {
		t.Fatalf("an equal record in other memory wrote %d chunks, named %x", n, c3)
	}
	// an old message changed (a host's edit): its chunk is new, written,
	// and the record reads back changed, never as its base
	edited := longRecord("c5", 5, 370)
	edited.Sent[10].Frame = 999
	wantEdited := cloneRec(edited)
	var etip binding.ShareTip
	binding.ShareTail(edited, first, &etip)
	before = chunkRows()
	c5 := storeRecord(t, d, edited, ChunkSource{Record: first, Chunks: c1})
	if n := chunkRows() - before; n != 1 || c5[0] == c1[0] || !reflect.DeepEqual(c5[1:len(c1)], c1[1:]) {
		t.Fatalf("an edit in the first chunk wrote %d chunks, named %x", n, c5)
	}
	if got := loadRecord(t, d, "c5"); !reflect.DeepEqual(got, wantEdited) {
		t.Fatal("the edited record does not read back as stored")
	}
	// short: whole, no chunks
	short := longRecord("c4", 4, 100)
	if c := storeRecord(t, d, short, ChunkSource{Record: first, Chunks: c1}); c != nil {
		t.Fatalf("a 100-message record named chunks %x", c)
	}
	if got := loadRecord(t, d, "c4"); !reflect.DeepEqual(got, short) {
		t.Fatal("c4 does not read back")
	}

	// the sweep keeps what live records name, and deletes the rest
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		n, err := tx.SweepRecordChunks(ctx, "conv", [][]ChunkHash{c2, c5})
		if err != nil || n != 0 {
			return fmt.Errorf("swept %d with all named: %v", n, err)
		}
		n, err = tx.SweepRecordChunks(ctx, "conv", [][]ChunkHash{c1, c5[:1]})
		if err != nil || n != 1 {
			return fmt.Errorf("swept %d with c2's last chunk unnamed, want 1: %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := loadRecord(t, d, "c1"); !reflect.DeepEqual(got, want1) {
		t.Fatal("c1 lost by the sweep")
	}
	for _, bad := range []struct{ sql, want string }{
		{`UPDATE record_chunks SET data = x'0000'`, "does not match its hash"},
		{`DELETE FROM record_chunks`, "is missing"},
	} {
		if _, err := d.writer.ExecContext(t.Context(), bad.sql); err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Compile(t.Context(), "c1"); err == nil || !strings.Contains(err.Error(), "compile c1 record") || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("after %s: %v, want an error naming c1: %s", bad.sql, err, bad.want)
		}
	}
	if got := loadRecord(t, d, "c4"); !reflect.DeepEqual(got, short) {
		t.Fatal("a whole record depends on chunks")
	}
}

// TestRecordChunkCodecBounds: chunked records of every length around the
// chunk size, kept blocks at chunk edges, none kept, and kept out of sent
// order (stored whole), read back exactly.
func TestRecordChunkCodecBounds(t *testing.T) {
	d := mustOpen(t)
	seq := int64(0)
	for _, n := range []int{0, 1, 127, 128, 129, 191, 192, 193, 640} {
		for _, shape := range []string{"kept", "none", "edges", "unordered"} {
			seq++
			rec := longRecord(fmt.Sprint("r", seq), seq, n)
			switch shape {
			case "none":
				rec.Kept = nil
			case "edges":
				rec.Kept = nil
				for i := chunkMessages - 1; i < n; i += chunkMessages {
					rec.Kept = append(rec.Kept, binding.KeptBlock{Key: bdigest(fmt.Sprint(i)), Sent: binding.Pos{Message: i, Block: 1}},
						binding.KeptBlock{Key: bdigest(fmt.Sprint(i + 1)), Sent: binding.Pos{Message: i + 1, Block: 0}})
				}
			case "unordered":
				if len(rec.Kept) > 1 {
					rec.Kept[0], rec.Kept[1] = rec.Kept[1], rec.Kept[0]
				}
			}
			want := cloneRec(rec)
			chunks := storeRecord(t, d, rec, ChunkSource{})
			if wantChunks := n / chunkMessages; n/chunkMessages < 2 || shape == "unordered" && len(rec.Kept) > 1 {
				if chunks != nil {
					t.Fatalf("n=%d %s: named %d chunks, want the record whole", n, shape, len(chunks))
				}
			} else if len(chunks) != wantChunks {
				t.Fatalf("n=%d %s: %d chunks, want %d", n, shape, len(chunks), wantChunks)
			}
			if got := loadRecord(t, d, rec.ID); !reflect.DeepEqual(got, want) {
				t.Fatalf("n=%d %s: read back %+v\nwant %+v", n, shape, got, want)
			}
		}
	}
}

// cloneRec is rec with Sent and Kept in arrays of their own, empty ones
// nil (as a stored record reads back).
func cloneRec(rec *binding.CompileRecord) *binding.CompileRecord {
	c := *rec
	c.Sent, c.Kept = nil, nil
	for _, m := range rec.Sent {
		if m.Blocks != nil {
			m.Blocks = append([]uint64{}, m.Blocks...)
		}
		c.Sent = append(c.Sent, m)
	}
	c.Kept = append(c.Kept, rec.Kept...)
	return &c
}

// TestChunkedRecordTruncated: every truncation of a chunked record's blob,
// and of a chunk's bytes, is an error, never a panic or a shorter record.
func TestChunkedRecordTruncated(t *testing.T) {
	rec := longRecord("t", 1, 200)
	blob, chunks := encodeRecordChunked(rec, ChunkSource{})
	if len(chunks) != 3 || blob[0] != recordChunked {
		t.Fatalf("%d chunks, format %d", len(chunks), blob[0])
	}
	parts := map[ChunkHash]chunkParts{}
	for _, c := range chunks {
		sent, kept, err := decodeChunk(c.data)
		if err != nil {
			t.Fatal(err)
		}
		parts[c.hash] = chunkParts{sent, kept}
		for i := range c.data {
			if _, _, err := decodeChunk(c.data[:i]); err == nil {
				t.Fatalf("a chunk cut at %d of %d bytes decoded", i, len(c.data))
			}
		}
	}
	resolve := func(h ChunkHash) (chunkParts, error) {
		p, ok := parts[h]
		if !ok {
			return chunkParts{}, fmt.Errorf("no chunk %x", h[:4])
		}
		return p, nil
	}
	if got, _, err := decodeRecordChunks(blob, resolve); err != nil || !reflect.DeepEqual(got, cloneRec(rec)) {
		t.Fatalf("whole blob: %v", err)
	}
	for i := range blob {
		if _, _, err := decodeRecordChunks(blob[:i], resolve); err == nil {
			t.Fatalf("a record cut at %d of %d bytes decoded", i, len(blob))
		}
	}
	if _, _, err := decodeRecordChunks(blob, nil); err == nil {
		t.Fatal("a chunked record decoded without its chunks")
	}
}

// TestChunkedRecordFormat3: a chunked record written before Through
// (format 3) still reads, with Through nil; one written now carries it.
func TestChunkedRecordFormat3(t *testing.T) {
	rec := longRecord("t", 1, 200)
	rec.Through = []binding.Digest{bdigest("t1")}
	rec.Account = "5f1a9c"
	blob, chunks := encodeRecordChunked(rec, ChunkSource{})
	parts := map[ChunkHash]chunkParts{}
	for _, c := range chunks {
		sent, kept, err := decodeChunk(c.data)
		if err != nil {
			t.Fatal(err)
		}
		parts[c.hash] = chunkParts{sent, kept}
	}
	resolve := func(h ChunkHash) (chunkParts, error) { return parts[h], nil }
	if got, _, err := decodeRecordChunks(blob, resolve); err != nil || !reflect.DeepEqual(got, cloneRec(rec)) {
		t.Fatalf("format %d: %+v %v", blob[0], got, err)
	}
	old := cloneRec(rec)
	old.Account = ""
	blob, _ = encodeRecordChunked(old, ChunkSource{})
	v5 := append([]byte{5}, blob[1:len(blob)-1]...) // no Account
	if got, _, err := decodeRecordChunks(v5, resolve); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("format 5: %+v %v", got, err)
	}
	old.Through = nil
	blob, _ = encodeRecordChunked(old, ChunkSource{})
	v3 := append([]byte{3}, blob[1:len(blob)-2]...) // no Through count, no Account
	if got, _, err := decodeRecordChunks(v3, resolve); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("format 3: %+v %v", got, err)
	}
}
