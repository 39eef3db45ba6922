package watcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Cursor.Check: how the watcher knows the bytes before Offset are still the
// ones it ingested, without re-hashing the file.
//
// pi rewrites a file in place only to migrate it (v1/v2 -> v3) or to
// re-initialise a corrupt one, with a truncating writeFileSync on the same
// inode; the result can be longer than before, so "size < Offset" alone
// misses it. Check holds two SHA-256 digests (truncated to 16 bytes):
//
//   - head: the first min(W, Offset) bytes as of the file's first batch
//     (W = 4 KiB), fixed from then on. It always covers the session header,
//     which every migration changes (it gains or bumps "version") and every
//     re-initialisation replaces (a new session id).
//   - tail: the last min(W, Offset) bytes before Offset, updated with every
//     batch. A migration adds ids to every entry, so the bytes just before
//     the old offset move; any rewrite that changes the end of what was
//     ingested is caught here.
//
// A verification costs two preads of at most 4 KiB and two hashes, whatever
// the file's size; it runs before every read of a file and, after a restart,
// once per file. A rewrite that keeps both the first 4 KiB and the 4 KiB
// before the offset byte for byte is not detected; pi makes none (it only
// appends, migrates or re-initialises).
//
// Check also carries the parse state a restart needs (ParseState: the
// version, and the value count v1 ids are built from), so the caller stores
// one opaque blob. Layout (all varints unsigned):
//
//	byte 1 (format) | version | notSession | values | headLen | head[16] | tailLen | tail[16]
//
// A Check the watcher cannot decode (empty, another format) is treated as a
// rewrite: the file is read again from the start in a Rewritten batch.
const (
	checkFormat = 1
	checkWindow = 4096
	digestLen   = 16
)

type fileCheck struct {
	state   ParseState // Lines comes from Cursor.Lines
	headLen int
	head    [digestLen]byte
	tailLen int
	tail    [digestLen]byte
}

func (c *fileCheck) encode() []byte {
	b := make([]byte, 0, 2*digestLen+24)
	b = append(b, checkFormat)
	b = binary.AppendUvarint(b, uint64(c.state.Version))
	notSession := byte(0)
	if c.state.NotSession {
		notSession = 1
	}
	b = append(b, notSession)
	b = binary.AppendUvarint(b, uint64(c.state.Values))
	b = binary.AppendUvarint(b, uint64(c.headLen))
	b = append(b, c.head[:]...)
	b = binary.AppendUvarint(b, uint64(c.tailLen))
	b = append(b, c.tail[:]...)
	return b
}

var errBadCheck = errors.New("undecodable cursor check")

func decodeCheck(b []byte, lines int) (fileCheck, error) {
	var c fileCheck
	if len(b) == 0 || b[0] != checkFormat {
		return c, errBadCheck
	}
	r := bytes.NewReader(b[1:])
	next := func() (int, error) {
		v, err := binary.ReadUvarint(r)
		if err != nil || v > 1<<40 {
			return 0, errBadCheck
		}
		return int(v), nil
	}
	var err error
	if c.state.Version, err = next(); err != nil {
		return c, err
	}
	ns, err := r.ReadByte()
	if err != nil {
		return c, errBadCheck
	}
	c.state.NotSession = ns == 1
	if c.state.Values, err = next(); err != nil {
		return c, err
	}
	if c.headLen, err = next(); err != nil {
		return c, err
	}
	if _, err := io.ReadFull(r, c.head[:]); err != nil {
		return c, errBadCheck
	}
	if c.tailLen, err = next(); err != nil {
		return c, err
	}
	if _, err := io.ReadFull(r, c.tail[:]); err != nil {
		return c, errBadCheck
	}
	if c.headLen > checkWindow || c.tailLen > checkWindow {
		return c, errBadCheck
	}
	c.state.Lines = lines
	return c, nil
}

func digest(b []byte) (d [digestLen]byte) {
	sum := sha256.Sum256(b)
	copy(d[:], sum[:])
	return d
}

// verify reports whether f still holds, before offset, the bytes c was made
// from. It also returns the tail window's bytes, which the next batch's tail
// digest continues from.
func (c *fileCheck) verify(f *os.File, offset int64, size int64, scratch []byte) (ok bool, tail []byte, err error) {
	if size < offset {
		return false, nil, nil
	}
	if int64(c.headLen) > offset || int64(c.tailLen) > offset {
		return false, nil, nil
	}
	head := scratch[:c.headLen]
	if _, err := f.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("read head: %w", err)
	}
	if digest(head) != c.head {
		return false, nil, nil
	}
	tail = scratch[checkWindow : checkWindow+c.tailLen]
	if _, err := f.ReadAt(tail, offset-int64(c.tailLen)); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("read tail: %w", err)
	}
	if digest(tail) != c.tail {
		return false, nil, nil
	}
	return true, tail, nil
}

// window keeps the last checkWindow bytes written to it.
type window struct {
	buf []byte
}

func (w *window) reset(prev []byte) {
	w.buf = append(w.buf[:0], prev...)
}

func (w *window) add(p []byte) {
	if len(p) >= checkWindow {
		w.buf = append(w.buf[:0], p[len(p)-checkWindow:]...)
		return
	}
	if over := len(w.buf) + len(p) - checkWindow; over > 0 {
		n := copy(w.buf, w.buf[over:])
		w.buf = w.buf[:n]
	}
	w.buf = append(w.buf, p...)
}

// addZeros adds n zero bytes: a hole in a sparse file, skipped unread.
func (w *window) addZeros(n int64) {
	if n <= 0 {
		return
	}
	k := int(min(n, checkWindow))
	if over := len(w.buf) + k - checkWindow; over > 0 {
		m := copy(w.buf, w.buf[over:])
		w.buf = w.buf[:m]
	}
	for range k {
		w.buf = append(w.buf, 0)
	}
}
