package watcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
)

// reader reads complete lines from a file starting at a cursor, in batches of
// bounded size, with a buffer that holds one read chunk plus the unfinished
// line at its end; never the whole file.
type reader struct {
	chunk    int // bytes per read
	maxLine  int // longer lines are skipped with an IngestError
	maxBatch int // a batch stops after this many bytes of lines, or of an overlong line scanned
	buf      []byte
	scratch  []byte // 2*checkWindow, for verification
	tail     window
	// entries, when not nil, is the slice the next batch's entries are
	// parsed into (readCold gives a batch's back once Prepare took them).
	entries []Entry
	read    atomic.Int64 // bytes read from files, ever (tests: what is read once stays read once)
}

func newReader(chunk, maxLine, maxBatch int) *reader {
	return &reader{
		chunk:    chunk,
		maxLine:  maxLine,
		maxBatch: maxBatch,
		buf:      make([]byte, chunk),
		scratch:  make([]byte, 2*checkWindow),
	}
}

// longLine is an overlong line whose newline has not been found yet: where
// it starts and how far it has been scanned. The watcher keeps it between
// reads of the file, so every byte of the line is read once, however often
// the file is visited, and the line's IngestError is recorded once (when
// the line passes the bound, not when it ends: it may never end).
type longLine struct {
	start     int64  // the line's offset (the cursor stays there until it ends)
	line      int    // its line number
	scanned   int64  // bytes before this offset hold no newline
	tail      []byte // the check window's bytes ending at scanned
	startTail []byte // the check window's bytes ending at start
}

// readBatch reads and parses complete lines from f starting at cur (whose
// check is chk and whose tail window bytes are prevTail), up to maxBatch
// bytes. It returns the batch's entries and errors, the cursor and check
// after it, and whether it stopped at EOF (rather than at the batch limit).
// Lines is zero when no complete line was available; a batch may then still
// carry the IngestError of an overlong line that has just passed the bound.
//
// long, when not nil, is the overlong line cur.Offset starts, scanned in an
// earlier call: reading resumes after what was scanned. The returned long is
// the overlong line the read stopped in, if any.
func (r *reader) readBatch(f *os.File, cur Cursor, chk fileCheck, prevTail []byte, long *longLine) (b Batch, next Cursor, nextChk fileCheck, eof bool, nextLong *longLine, err error) {
	p := Parser{Path: cur.Path, State: chk.state}
	p.State.Lines = cur.Lines
	b.Cursor = cur
	b.Entries, r.entries = r.entries, nil

	r.tail.reset(prevTail)
	base := cur.Offset // file offset of buf[0]
	filled := 0
	skipping := false // discarding an overlong line that started at skipStart
	var skipStart int64
	var skipTail []byte
	if long != nil && long.start == cur.Offset && long.scanned >= long.start {
		skipping, skipStart, skipTail = true, long.start, long.startTail
		base = long.scanned
		r.tail.reset(long.tail)
	}
	consumed := int64(0) // line bytes in this batch
	scanned := int64(0)  // overlong-line bytes scanned in this call
	budget := func() bool { return consumed+scanned < int64(r.maxBatch) }
	for budget() {
		if filled == len(r.buf) {
			if len(r.buf) < r.maxLine && !skipping && !holePast(f, base+int64(filled), base+int64(r.maxLine)) {
				nb := make([]byte, 2*len(r.buf))
				copy(nb, r.buf[:filled])
				r.buf = nb
			} else {
				// The unfinished line is longer than any line bindery will
				// hold: record it now (it may never end), drop what is
				// buffered and skip to its newline.
				if !skipping {
					skipping, skipStart = true, base
					skipTail = bytes.Clone(r.tail.buf)
					b.Errors = append(b.Errors, IngestError{Path: cur.Path, Line: p.State.Lines + 1, Offset: skipStart,
						Reason: "line longer than " + strconv.Itoa(r.maxLine) + " bytes skipped (the limit is --max-line-bytes)"})
				}
				r.tail.add(r.buf[:filled])
				base += int64(filled)
				scanned += int64(filled)
				filled = 0
				continue
			}
		}
		if skipping && filled == 0 {
			// A hole in a sparse file reads as zeros, never a newline: jump
			// over it instead of reading it.
			data, end, herr := nextData(f, base)
			if herr != nil {
				return Batch{}, cur, chk, false, nil, fmt.Errorf("seek data in %s at %d: %w", cur.Path, base, herr)
			}
			if end {
				r.tail.addZeros(max(0, data-base))
				base = max(base, data)
				eof = true
				break
			}
			if data > base {
				r.tail.addZeros(data - base)
				base = data
			}
		}
		n, rerr := f.ReadAt(r.buf[filled:], base+int64(filled))
		filled += n
		r.read.Add(int64(n))
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return Batch{}, cur, chk, false, nil, fmt.Errorf("read %s at %d: %w", cur.Path, base+int64(filled), rerr)
		}
		start := 0
		for budget() {
			nl := bytes.IndexByte(r.buf[start:filled], '\n')
			if nl < 0 {
				break
			}
			line := r.buf[start : start+nl+1]
			off := base + int64(start)
			if skipping {
				// Its IngestError was recorded when it passed the bound.
				p.State.Lines++
				skipping = false
			} else {
				// The line is parsed into the batch's next slot, which
				// is given back when the line holds no entry.
				b.Entries = append(b.Entries, Entry{})
				res, kept := p.lineInto(line, off, &b.Entries[len(b.Entries)-1])
				if !kept {
					b.Entries = b.Entries[:len(b.Entries)-1]
				}
				if res.Header != nil {
					b.Header = res.Header
				}
				if res.Err != nil {
					b.Errors = append(b.Errors, *res.Err)
				}
			}
			start += nl + 1
			consumed = base + int64(start) - cur.Offset
		}
		r.tail.add(r.buf[:start])
		copy(r.buf, r.buf[start:filled])
		filled -= start
		base += int64(start)
		if n == 0 || errors.Is(rerr, io.EOF) {
			if budget() {
				eof = true
			}
			break
		}
	}
	if skipping {
		// The overlong line has not ended yet: the cursor stays at its
		// start, and the next read resumes after what was scanned.
		if filled > 0 {
			r.tail.add(r.buf[:filled])
			base += int64(filled)
		}
		nextLong = &longLine{start: skipStart, line: p.State.Lines + 1, scanned: base,
			tail: bytes.Clone(r.tail.buf), startTail: skipTail}
		base = skipStart
		r.tail.reset(skipTail)
	}
	if cap(r.buf) > 4*r.chunk {
		r.buf = make([]byte, r.chunk) // a long line passed: give its buffer back
	}
	next = cur
	next.Offset = base
	next.Lines = p.State.Lines
	if next.Offset == cur.Offset {
		return Batch{Cursor: cur, Errors: b.Errors}, cur, chk, eof, nextLong, nil
	}
	nextChk = chk
	nextChk.state = p.State
	if cur.Offset == 0 {
		head := r.scratch[:min(int64(checkWindow), next.Offset)]
		if _, err := f.ReadAt(head, 0); err != nil {
			return Batch{}, cur, chk, false, nil, fmt.Errorf("read %s head: %w", cur.Path, err)
		}
		nextChk.headLen = len(head)
		nextChk.head = digest(head)
	}
	// The tail window ends exactly at next.Offset: every byte up to base
	// went through add (or addZeros, for a hole).
	tail := r.tail.buf
	nextChk.tailLen = len(tail)
	nextChk.tail = digest(tail)
	next.Check = nextChk.encode()
	b.Cursor = next
	return b, next, nextChk, eof, nextLong, nil
}

// holePast reports whether the file has a hole at from that reaches until:
// zeros, so the unfinished line there is longer than until-from allows
// without the buffer growing to hold them (a sparse file's 20 GB of nothing
// costs neither memory nor reads).
func holePast(f *os.File, from, until int64) bool {
	data, _, err := nextData(f, from)
	return err == nil && data > from && data >= until
}
