package db

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/my-pi/bindery/binding"
)

// A compile record is stored in a compact binary form: a 1 MB request's
// record is about a third of its JSON, and every byte of it is fsynced on
// the compile's path. recordFormat leads the blob; a blob starting with
// '{' is an older JSON record. TestRecordCodecCoversEveryField fails when
// binding.CompileRecord gains a field this codec does not carry. Format 2
// is format 1 followed by LastRole; format 1 blobs still read (LastRole "").
// Format 3 (recordChunked) is format 2 with its Sent and Kept partly in
// record_chunks (record_chunks.go). Formats 4 and 5 are 2 and 3 followed
// by Through (its count, then the digests); formats 1 to 3 still read
// (Through nil). Formats 6 and 7 are 4 and 5 followed by Account (the
// credential fingerprint, issue 30); formats 1 to 5 still read (Account
// "", unknown).
const recordFormat = 6

func encodeRecord(r *binding.CompileRecord) []byte {
	b := make([]byte, 0, 160+len(r.Kept)*48+len(r.Sent)*32+len(r.Strips)*80)
	b = appendRecordHead(append(b, recordFormat), r)
	b = appendKept(b, r.Kept)
	b = appendSent(b, r.Sent)
	return appendRecordFoot(b, r)
}

// encodeRecordChunked is r in format 3 when it is long enough to chunk
// (record_chunks.go): the head, the chunks' hashes, the Kept and Sent
// after the last full chunk, the foot. chunks are r's chunks, those src
// did not store carrying their bytes. A short record is format 2, no
// chunks.
func encodeRecordChunked(r *binding.CompileRecord, src ChunkSource) (blob []byte, chunks []recordChunk) {
	chunks, kfrom := chunksOf(r, src)
	if chunks == nil {
		return encodeRecord(r), nil
	}
	sfrom := len(chunks) * chunkMessages
	b := make([]byte, 0, 160+len(chunks)*32+(len(r.Kept)-kfrom)*48+(len(r.Sent)-sfrom)*32+len(r.Strips)*80)
	b = appendRecordHead(append(b, recordChunked), r)
	b = appendChunkList(b, chunks)
	b = appendKept(b, r.Kept[kfrom:])
	b = appendSent(b, r.Sent[sfrom:])
	return appendRecordFoot(b, r), chunks
}

// recordChunked is the format of a record stored in chunks: the head,
// the chunks' hashes, then as format 6 from Kept on (format 5: as format
// 4; format 3: as format 2).
const recordChunked = 7

// chunked reports whether a blob's format stores its record in chunks.
func chunked(format byte) bool { return format == recordChunked || format == 5 || format == 3 }

func appendRecordHead(b []byte, r *binding.CompileRecord) []byte {
	for _, s := range []string{r.ID, r.Conversation, r.Branch, r.Model} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, r.Seq)
	var flags byte
	for i, f := range []bool{r.Binds, r.Engaged, r.DryRun, r.Accepted, r.Refused} {
		if f {
			flags |= 1 << i
		}
	}
	b = append(b, flags)
	b = append(b, r.Seed[:]...)
	b = append(b, r.End[:]...)
	return append(b, r.LastRead[:]...)
}

func appendKept(b []byte, kept []binding.KeptBlock) []byte {
	b = binary.AppendUvarint(b, uint64(len(kept)))
	for _, k := range kept {
		b = append(b, k.Key[:]...)
		for _, n := range []int{k.Orig.Message, k.Orig.Block, k.Sent.Message, k.Sent.Block} {
			b = binary.AppendVarint(b, int64(n))
		}
		if k.Unreadable {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

func appendSent(b []byte, sent []binding.SentMessage) []byte {
	b = binary.AppendUvarint(b, uint64(len(sent)))
	for _, m := range sent {
		b = binary.AppendVarint(b, int64(m.Orig))
		b = binary.LittleEndian.AppendUint64(b, m.Frame)
		if m.Blocks == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(len(m.Blocks))+1)
			for _, x := range m.Blocks {
				b = binary.LittleEndian.AppendUint64(b, x)
			}
		}
	}
	return b
}

func appendRecordFoot(b []byte, r *binding.CompileRecord) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.Strips)))
	for _, s := range r.Strips {
		b = append(b, s.Key[:]...)
		b = appendString(b, s.Reason)
		b = appendString(b, s.Compile)
		b = appendString(b, s.Path)
		b = binary.AppendVarint(b, int64(s.Message))
		b = binary.AppendVarint(b, s.Seq)
	}
	b = appendString(b, r.LastRole)
	b = binary.AppendUvarint(b, uint64(len(r.Through)))
	for _, d := range r.Through {
		b = append(b, d[:]...)
	}
	return appendString(b, r.Account)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errShortRecord = errors.New("truncated compile record")

type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) bytes(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errShortRecord
		return make([]byte, max(n, 0))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) string() string {
	return string(r.bytes(int(min(r.uvarint(), uint64(len(r.b)+1)))))
}

func (r *recordReader) digest() (d binding.Digest) { copy(d[:], r.bytes(32)); return d }

// count reads a length and bounds it by what the rest of the blob could
// hold (each element takes at least min bytes), so a corrupt length
// cannot allocate without bound.
func (r *recordReader) count(minSize int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/minSize+1) {
		r.err = errShortRecord
		return 0
	}
	return int(n)
}

func decodeRecord(blob []byte) (*binding.CompileRecord, error) {
	rec, _, err := decodeRecordChunks(blob, nil)
	return rec, err
}

// decodeRecordChunks reads a record in any format, a chunked one's chunks
// through chunk (nil: a chunked record is an error), and returns the
// chunks it names.
func decodeRecordChunks(blob []byte, chunk func(ChunkHash) (chunkParts, error)) (*binding.CompileRecord, []ChunkHash, error) {
	if len(blob) > 0 && blob[0] == '{' {
		var rec binding.CompileRecord
		if err := json.Unmarshal(blob, &rec); err != nil {
			return nil, nil, err
		}
		return &rec, nil, nil
	}
	if len(blob) == 0 || blob[0] < 1 || blob[0] > recordChunked {
		return nil, nil, fmt.Errorf("compile record in unknown format %d", blob[:min(1, len(blob))])
	}
	r := &recordReader{b: blob[1:]}
	rec := &binding.CompileRecord{}
	rec.ID, rec.Conversation, rec.Branch, rec.Model = r.string(), r.string(), r.string(), r.string()
	rec.Seq = r.varint()
	flags := r.bytes(1)[0]
	rec.Binds, rec.Engaged, rec.DryRun, rec.Accepted, rec.Refused = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0, flags&16 != 0
	rec.Seed, rec.End, rec.LastRead = r.digest(), r.digest(), r.digest()
	var hashes []ChunkHash
	if chunked(blob[0]) {
		if hashes = r.chunkList(); r.err != nil {
			return nil, nil, r.err
		}
		if chunk == nil {
			return nil, nil, fmt.Errorf("compile record stored in chunks, read without them")
		}
		for _, h := range hashes {
			p, err := chunk(h)
			if err != nil {
				return nil, nil, err
			}
			rec.Sent = append(rec.Sent, p.sent...)
			rec.Kept = append(rec.Kept, p.kept...)
		}
	}
	if kept := r.kept(); rec.Kept == nil {
		rec.Kept = kept
	} else {
		rec.Kept = append(rec.Kept, kept...)
	}
	sent, err := r.sent()
	if err != nil {
		return nil, nil, err
	}
	if rec.Sent == nil {
		rec.Sent = sent
	} else {
		rec.Sent = append(rec.Sent, sent...)
	}
	if n := r.count(37); n > 0 {
		rec.Strips = make([]binding.Release, n)
		for i := range rec.Strips {
			s := &rec.Strips[i]
			s.Key = r.digest()
			s.Reason, s.Compile, s.Path = r.string(), r.string(), r.string()
			s.Message = int(r.varint())
			s.Seq = r.varint()
		}
	}
	if blob[0] >= 2 {
		rec.LastRole = r.string()
	}
	if blob[0] >= 4 {
		if n := r.count(32); n > 0 {
			rec.Through = make([]binding.Digest, n)
		}
		for i := range rec.Through {
			rec.Through[i] = r.digest()
		}
	}
	if blob[0] >= 6 {
		rec.Account = r.string()
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	if len(r.b) != 0 {
		return nil, nil, fmt.Errorf("compile record: %d bytes after its end", len(r.b))
	}
	return rec, hashes, nil
}

func (r *recordReader) kept() []binding.KeptBlock {
	n := r.count(37)
	if n == 0 {
		return nil
	}
	kept := make([]binding.KeptBlock, n)
	for i := range kept {
		k := &kept[i]
		k.Key = r.digest()
		k.Orig.Message, k.Orig.Block, k.Sent.Message, k.Sent.Block = int(r.varint()), int(r.varint()), int(r.varint()), int(r.varint())
		k.Unreadable = r.bytes(1)[0] == 1
	}
	return kept
}

func (r *recordReader) sent() ([]binding.SentMessage, error) {
	n := r.count(10)
	if n == 0 {
		return nil, nil
	}
	sent := make([]binding.SentMessage, n)
	for i := range sent {
		m := &sent[i]
		m.Orig = int(r.varint())
		m.Frame = binary.LittleEndian.Uint64(r.bytes(8))
		if nb := r.uvarint(); nb > 0 {
			if nb-1 > uint64(len(r.b)/8) {
				return nil, errShortRecord
			}
			m.Blocks = make([]uint64, nb-1)
			for j := range m.Blocks {
				m.Blocks[j] = binary.LittleEndian.Uint64(r.bytes(8))
			}
		}
	}
	return sent, nil
}
