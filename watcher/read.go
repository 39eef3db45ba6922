package watcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// reader reads complete lines from a file starting at a cursor, in batches of
// bounded size, with a buffer that holds one read chunk plus the unfinished
// line at its end; never the whole file.
type reader struct {
	chunk    int // bytes per read
	maxLine  int // longer lines are skipped with an IngestError
	maxBatch int // a batch stops after this many bytes of lines
	buf      []byte
	scratch  []byte // 2*checkWindow, for verification
	tail     window
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

// readBatch reads and parses complete lines from f starting at cur (whose
// check is chk and whose tail window bytes are prevTail), up to maxBatch
// bytes. It returns the batch's entries, the cursor and check after it, and
// whether it stopped at EOF (rather than at the batch limit). Lines is zero
// when no complete line was available.
func (r *reader) readBatch(f *os.File, cur Cursor, chk fileCheck, prevTail []byte) (b Batch, next Cursor, nextChk fileCheck, eof bool, err error) {
	p := Parser{Path: cur.Path, State: chk.state}
	p.State.Lines = cur.Lines
	b.Cursor = cur

	r.tail.reset(prevTail)
	var head []byte
	collectHead := cur.Offset == 0
	if collectHead {
		head = make([]byte, 0, checkWindow)
	}

	base := cur.Offset // file offset of buf[0]
	filled := 0
	skipping := false // discarding an overlong line that started at skipStart
	var skipStart int64
	var skipTail []byte
	consumed := int64(0)
	for consumed < int64(r.maxBatch) {
		if filled == len(r.buf) {
			if len(r.buf) < r.maxLine {
				r.buf = append(r.buf, make([]byte, len(r.buf))...)
			} else {
				// The unfinished line is longer than any line bindery will
				// hold: drop what is buffered and skip to its newline.
				if !skipping {
					skipping, skipStart = true, base
					skipTail = bytes.Clone(r.tail.buf)
					if collectHead && len(head) < checkWindow {
						head = append(head, r.buf[:min(filled, checkWindow-len(head))]...)
					}
				}
				r.tail.add(r.buf[:filled])
				base += int64(filled)
				filled = 0
			}
		}
		n, rerr := f.ReadAt(r.buf[filled:], base+int64(filled))
		filled += n
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return Batch{}, cur, chk, false, fmt.Errorf("read %s at %d: %w", cur.Path, base+int64(filled), rerr)
		}
		start := 0
		for consumed < int64(r.maxBatch) {
			nl := bytes.IndexByte(r.buf[start:filled], '\n')
			if nl < 0 {
				break
			}
			line := r.buf[start : start+nl+1]
			off := base + int64(start)
			if skipping {
				p.State.Lines++
				b.Errors = append(b.Errors, IngestError{Path: cur.Path, Line: p.State.Lines, Offset: skipStart,
					Reason: "line longer than " + strconv.Itoa(r.maxLine) + " bytes skipped"})
				skipping = false
			} else {
				res := p.Line(line, off)
				if res.Header != nil {
					b.Header = res.Header
				}
				if res.Entry != nil {
					b.Entries = append(b.Entries, *res.Entry)
				}
				if res.Err != nil {
					b.Errors = append(b.Errors, *res.Err)
				}
			}
			if collectHead && len(head) < checkWindow {
				head = append(head, line[:min(len(line), checkWindow-len(head))]...)
			}
			start += nl + 1
			consumed = base + int64(start) - cur.Offset
		}
		r.tail.add(r.buf[:start])
		copy(r.buf, r.buf[start:filled])
		filled -= start
		base += int64(start)
		if n == 0 || errors.Is(rerr, io.EOF) {
			if consumed < int64(r.maxBatch) {
				eof = true
			}
			break
		}
	}
	if skipping {
		// The overlong line has no newline yet: resume at its start next time.
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
		return Batch{}, cur, chk, eof, nil
	}
	nextChk = chk
	nextChk.state = p.State
	if collectHead {
		if int64(len(head)) > next.Offset {
			head = head[:next.Offset]
		}
		nextChk.headLen = len(head)
		nextChk.head = digest(head)
	}
	// The tail window must end exactly at next.Offset; after a skipped line
	// that is not resumed it does, since every byte up to base went through add.
	tail := r.tail.buf
	nextChk.tailLen = len(tail)
	nextChk.tail = digest(tail)
	next.Check = nextChk.encode()
	b.Cursor = next
	return b, next, nextChk, eof, nil
}
