package db

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"

	"github.com/my-pi/bindery/binding"
)

// A compile record holds the conversation's whole sent history (Sent,
// Kept), and the next compile's record repeats it: stored whole, every
// turn wrote (and fsynced) its history again, and the database kept one
// copy per remembered record. So a long record is stored in chunks
// (migration 009): its sent messages in runs of chunkMessages, each run
// with the kept blocks sent in it, stored once per conversation in
// record_chunks under the SHA-256 of its bytes, and the record's blob
// (format 3) names the chunks and holds only what follows the last full
// one. A turn then writes its new messages and, once per chunkMessages
// sent messages, one chunk; the chunks its base already stored are
// named, not written (ChunkSource). A chunk is read back by its hash and
// checked against it, so a damaged chunk is an error naming its compile,
// never a different record. Chunks no remembered record names are swept
// (SweepRecordChunks).

// chunkMessages is how many sent messages a chunk holds: a record shorter
// than two chunks is stored whole (format 2).
const chunkMessages = 64

// ChunkHash names a stored chunk: the SHA-256 of its bytes.
type ChunkHash [32]byte

// ChunkSource is what a record's base (the record it most likely
// extends) stored: its record and the chunks its row names. A chunk of the
// new record made of the very elements of one of the base's chunks (the
// same memory: binding.ShareTail) is that chunk, already stored, so it is
// neither encoded, hashed nor written again.
type ChunkSource struct {
	Record *binding.CompileRecord
	Chunks []ChunkHash
}

// recordChunk is one chunk of a record being stored.
type recordChunk struct {
	hash ChunkHash
	data []byte // nil: the base stored it
}

// chunkBounds is where chunk c of r lies: Sent[s0:s1], Kept[k0:k1] (the
// kept blocks sent in those messages; Kept is in sent order).
func chunkBounds(r *binding.CompileRecord, c, kfrom int) (s0, s1, k0, k1 int) {
	s0, s1 = c*chunkMessages, (c+1)*chunkMessages
	k0, k1 = kfrom, kfrom
	for k1 < len(r.Kept) && r.Kept[k1].Sent.Message < s1 {
		k1++
	}
	return s0, s1, k0, k1
}

// chunksOf splits r into its full chunks (none when r is short) and
// returns them with the Kept index the tail starts at.
func chunksOf(r *binding.CompileRecord, src ChunkSource) ([]recordChunk, int) {
	n := len(r.Sent) / chunkMessages
	if n < 2 || !keptInSentOrder(r) {
		return nil, 0
	}
	out := make([]recordChunk, n)
	k, bk := 0, 0
	for c := range n {
		s0, s1, k0, k1 := chunkBounds(r, c, k)
		var b0, b1 int
		if src.Record != nil {
			_, _, b0, b1 = chunkBounds(src.Record, c, bk)
			bk = b1
		}
		if c < len(src.Chunks) && sameChunk(r, src.Record, s0, s1, k0, k1, b0, b1) {
			out[c] = recordChunk{hash: src.Chunks[c]}
		} else {
			data := encodeChunk(r.Sent[s0:s1], r.Kept[k0:k1])
			out[c] = recordChunk{hash: sha256.Sum256(data), data: data}
			if c < len(src.Chunks) && out[c].hash == src.Chunks[c] {
				out[c].data = nil // equal bytes in other memory: stored
			}
		}
		k = k1
	}
	return out, k
}

// sameChunk: chunk c of r is made of the same elements, in the same
// memory, as base's chunk c (elements below a record's length never
// change, binding.ShareTail), so its bytes are the ones base stored.
func sameChunk(r, base *binding.CompileRecord, s0, s1, k0, k1, b0, b1 int) bool {
	if base == nil || len(base.Sent) < s1 || k1-k0 != b1-b0 {
		return false
	}
	if &r.Sent[s0] != &base.Sent[s0] {
		return false
	}
	return k0 == k1 || &r.Kept[k0] == &base.Kept[b0]
}

func keptInSentOrder(r *binding.CompileRecord) bool {
	for i := 1; i < len(r.Kept); i++ {
		a, b := r.Kept[i-1].Sent, r.Kept[i].Sent
		if a.Message > b.Message || (a.Message == b.Message && a.Block >= b.Block) {
			return false
		}
	}
	return true
}

func encodeChunk(sent []binding.SentMessage, kept []binding.KeptBlock) []byte {
	b := make([]byte, 0, len(sent)*32+len(kept)*48)
	b = appendKept(b, kept)
	return appendSent(b, sent)
}

func decodeChunk(data []byte) ([]binding.SentMessage, []binding.KeptBlock, error) {
	r := &recordReader{b: data}
	kept := r.kept()
	sent, err := r.sent()
	if err != nil {
		return nil, nil, err
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	if len(r.b) != 0 {
		return nil, nil, fmt.Errorf("record chunk: %d bytes after its end", len(r.b))
	}
	return sent, kept, nil
}

// chunkReader reads a conversation's chunks by hash, each once per call,
// checked against its hash.
type chunkReader struct {
	ctx  context.Context
	q    querier
	seen map[chunkKey]chunkParts
}

type chunkKey struct {
	conversation string
	hash         ChunkHash
}

type chunkParts struct {
	sent []binding.SentMessage
	kept []binding.KeptBlock
}

func (cr *chunkReader) chunk(conversation string, h ChunkHash) (chunkParts, error) {
	k := chunkKey{conversation, h}
	if p, ok := cr.seen[k]; ok {
		return p, nil
	}
	rows, err := cr.q.QueryContext(cr.ctx, `SELECT data FROM record_chunks WHERE conversation = ? AND hash = ?`, conversation, h[:])
	if err != nil {
		return chunkParts{}, err
	}
	var data []byte
	found := rows.Next()
	if found {
		err = rows.Scan(&data)
	}
	rows.Close()
	switch {
	case err != nil:
		return chunkParts{}, err
	case !found:
		return chunkParts{}, fmt.Errorf("record chunk %x of conversation %q is missing", h[:6], conversation)
	case sha256.Sum256(data) != h:
		return chunkParts{}, fmt.Errorf("record chunk %x of conversation %q does not match its hash", h[:6], conversation)
	}
	sent, kept, err := decodeChunk(data)
	if err != nil {
		return chunkParts{}, fmt.Errorf("record chunk %x of conversation %q: %w", h[:6], conversation, err)
	}
	if cr.seen == nil {
		cr.seen = map[chunkKey]chunkParts{}
	}
	p := chunkParts{sent, kept}
	cr.seen[k] = p
	return p, nil
}

// storeChunks writes the chunks the base did not store (a chunk stored by
// an earlier record, a fork's or a retry's, is kept as it is).
func storeChunks(ctx context.Context, tx *sql.Tx, conversation string, chunks []recordChunk) error {
	for _, c := range chunks {
		if c.data == nil {
			continue
		}
		if _, err := txExec(ctx, tx, sqlInsertChunk, conversation, c.hash[:], c.data); err != nil {
			return fmt.Errorf("record chunk of conversation %q: %w", conversation, err)
		}
	}
	return nil
}

// SweepRecordChunks deletes the conversation's chunks that none of live
// (the chunks every record it remembers names) does: what retention
// dropped. It reads the conversation's chunk hashes, not their data.
func (t *Tx) SweepRecordChunks(ctx context.Context, conversation string, live [][]ChunkHash) (int, error) {
	keep := map[ChunkHash]bool{}
	for _, l := range live {
		for _, h := range l {
			keep[h] = true
		}
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT hash FROM record_chunks WHERE conversation = ?`, conversation)
	if err != nil {
		return 0, fmt.Errorf("chunks of conversation %q: %w", conversation, err)
	}
	var gone []ChunkHash
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return 0, fmt.Errorf("chunks of conversation %q: %w", conversation, err)
		}
		var h ChunkHash
		if copy(h[:], b) == len(h) && !keep[h] {
			gone = append(gone, h)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("chunks of conversation %q: %w", conversation, err)
	}
	for _, h := range gone {
		if _, err := txExec(ctx, t.tx, sqlDeleteChunk, conversation, h[:]); err != nil {
			return 0, fmt.Errorf("sweep chunks of conversation %q: %w", conversation, err)
		}
	}
	return len(gone), nil
}

// chunkList reads a format 3 blob's chunk hashes.
func (r *recordReader) chunkList() []ChunkHash {
	n := r.count(32)
	if n == 0 {
		return nil
	}
	out := make([]ChunkHash, n)
	for i := range out {
		copy(out[i][:], r.bytes(32))
	}
	return out
}

func appendChunkList(b []byte, chunks []recordChunk) []byte {
	b = binary.AppendUvarint(b, uint64(len(chunks)))
	for _, c := range chunks {
		b = append(b, c.hash[:]...)
	}
	return b
}

// RecordStorage is what a conversation's compile records take in the
// database: the records held (accepted ones whose record was dropped
// hold none), the chunks, and the bytes of both.
type RecordStorage struct {
	Records, Chunks int
	Bytes           int64
}

// RecordStorage measures the conversation's stored records.
func (d *DB) RecordStorage(ctx context.Context, conversation string) (RecordStorage, error) {
	var s RecordStorage
	var rb, cb int64
	err := d.readers.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM compiles WHERE conversation = ?1 AND record IS NOT NULL),
		(SELECT coalesce(sum(length(record)), 0) FROM compiles WHERE conversation = ?1),
		(SELECT count(*) FROM record_chunks WHERE conversation = ?1),
		(SELECT coalesce(sum(length(data)), 0) FROM record_chunks WHERE conversation = ?1)`, conversation).Scan(&s.Records, &rb, &s.Chunks, &cb)
	if err != nil {
		return RecordStorage{}, fmt.Errorf("record storage of conversation %q: %w", conversation, err)
	}
	s.Bytes = rb + cb
	return s, nil
}
