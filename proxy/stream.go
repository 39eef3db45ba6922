package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// events splits a server-sent event stream into events as its bytes
// arrive, in any chunking: lines end at \n (a \r before it is dropped),
// "event:" names the event, "data:" lines join with \n, a blank line ends
// the event (the WHATWG event-stream rules the provider's streams follow).
// A line is bounded: one longer than max makes the stream unreadable for
// the side copy (the client still gets every byte).
type events struct {
	max  int
	line []byte
	typ  string
	data []byte
	on   func(typ string, data []byte)
	err  error
}

func (e *events) write(p []byte) {
	for len(p) > 0 && e.err == nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			e.line = append(e.line, p...)
			if len(e.line) > e.max {
				e.err = fmt.Errorf("an event line is over %d bytes", e.max)
			}
			return
		}
		line := p[:i]
		if len(e.line) > 0 {
			// The line began in an earlier read: join it. A line whole in
			// this read is taken where it lies (a 4 KB delta was copied
			// once more for nothing).
			e.line = append(e.line, line...)
			line = e.line
		}
		p = p[i+1:]
		if len(line) > e.max {
			e.err = fmt.Errorf("an event line is over %d bytes", e.max)
			return
		}
		e.takeLine(bytes.TrimSuffix(line, []byte{'\r'}))
		e.line = e.line[:0]
	}
}

func (e *events) takeLine(l []byte) {
	if len(l) == 0 {
		if e.typ != "" || len(e.data) > 0 {
			e.on(e.typ, e.data)
		}
		e.typ, e.data = "", e.data[:0]
		return
	}
	field, value, _ := bytes.Cut(l, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(field) {
	case "event":
		e.typ = string(value)
	case "data":
		if len(e.data) > 0 {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, value...)
		if len(e.data) > e.max {
			e.err = fmt.Errorf("an event's data is over %d bytes", e.max)
		}
	}
}

// errClientGone is a client that stopped reading mid-stream.
var errClientGone = errors.New("the client went away")

// stream copies an event-stream answer to the client as it arrives, one
// read at a time, flushing after each (no buffering: research/gateways.md,
// 4; pings pass like any event), and feeds a copy to the reply. A read
// that waits longer than IdleTimeout ends the stream (the body is closed
// under it): the client then gets an error event in the API's shape, and
// nothing is accepted. The upstream request runs under the client's
// context, so a client that goes away cancels it.
func (p *Proxy) stream(ctx context.Context, w http.ResponseWriter, body io.ReadCloser, rp *reply) error {
	rc := http.NewResponseController(w)
	ev := &events{max: p.cfg.MaxReply}
	if rp != nil {
		ev.on = rp.event
	}
	buf := make([]byte, 64<<10)
	var stalled atomic.Bool
	idle := time.AfterFunc(p.cfg.IdleTimeout, func() {
		stalled.Store(true)
		body.Close()
	})
	defer idle.Stop()
	for {
		n, err := body.Read(buf)
		idle.Stop()
		if n > 0 {
			chunk := buf[:n]
			if _, werr := w.Write(chunk); werr != nil {
				return errClientGone
			}
			if ferr := rc.Flush(); ferr != nil {
				return errClientGone
			}
			if rp != nil && ev.err == nil {
				ev.write(chunk)
				if ev.err != nil && rp.failed == nil {
					rp.failed = ev.err
				}
			}
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil && stalled.Load():
			p.streamError(w, rc, fmt.Sprintf("bindery proxy: the upstream sent nothing for %s mid-stream; the reply is incomplete", p.cfg.IdleTimeout))
			return fmt.Errorf("the upstream stalled for %s mid-stream", p.cfg.IdleTimeout)
		case err != nil && ctx.Err() != nil:
			return errClientGone
		case err != nil:
			p.streamError(w, rc, "bindery proxy: the upstream stream ended mid-reply: "+err.Error())
			return fmt.Errorf("the upstream stream ended: %w", err)
		}
		idle.Reset(p.cfg.IdleTimeout)
	}
}
