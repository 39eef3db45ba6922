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
const recordFormat = 2

func encodeRecord(r *binding.CompileRecord) []byte {
	b := make([]byte, 0, 160+len(r.Kept)*48+len(r.Sent)*32+len(r.Strips)*80)
	b = append(b, recordFormat)
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
	b = append(b, r.LastRead[:]...)
	b = binary.AppendUvarint(b, uint64(len(r.Kept)))
	for _, k := range r.Kept {
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
	b = binary.AppendUvarint(b, uint64(len(r.Sent)))
	for _, m := range r.Sent {
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
	b = binary.AppendUvarint(b, uint64(len(r.Strips)))
	for _, s := range r.Strips {
		b = append(b, s.Key[:]...)
		b = appendString(b, s.Reason)
		b = appendString(b, s.Compile)
		b = appendString(b, s.Path)
		b = binary.AppendVarint(b, int64(s.Message))
		b = binary.AppendVarint(b, s.Seq)
	}
	return appendString(b, r.LastRole)
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
	if len(blob) > 0 && blob[0] == '{' {
		var rec binding.CompileRecord
		if err := json.Unmarshal(blob, &rec); err != nil {
			return nil, err
		}
		return &rec, nil
	}
	if len(blob) == 0 || (blob[0] != recordFormat && blob[0] != 1) {
		return nil, fmt.Errorf("compile record in unknown format %d", blob[:min(1, len(blob))])
	}
	r := &recordReader{b: blob[1:]}
	rec := &binding.CompileRecord{}
	rec.ID, rec.Conversation, rec.Branch, rec.Model = r.string(), r.string(), r.string(), r.string()
	rec.Seq = r.varint()
	flags := r.bytes(1)[0]
	rec.Binds, rec.Engaged, rec.DryRun, rec.Accepted, rec.Refused = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0, flags&16 != 0
	rec.Seed, rec.End, rec.LastRead = r.digest(), r.digest(), r.digest()
	if n := r.count(37); n > 0 {
		rec.Kept = make([]binding.KeptBlock, n)
		for i := range rec.Kept {
			k := &rec.Kept[i]
			k.Key = r.digest()
			k.Orig.Message, k.Orig.Block, k.Sent.Message, k.Sent.Block = int(r.varint()), int(r.varint()), int(r.varint()), int(r.varint())
			k.Unreadable = r.bytes(1)[0] == 1
		}
	}
	if n := r.count(10); n > 0 {
		rec.Sent = make([]binding.SentMessage, n)
		for i := range rec.Sent {
			m := &rec.Sent[i]
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
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("compile record: %d bytes after its end", len(r.b))
	}
	return rec, nil
}
