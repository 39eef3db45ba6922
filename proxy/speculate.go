package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

// Sending ahead. A gateway that reads the whole body before it forwards
// it pays the body's trip twice: client to proxy, then proxy to upstream,
// one after the other (on this machine, about 3 ms for 1 MB). A history's
// next turn is mostly its last request again, and the last request's plan
// is known: so, while the daemon compiles, the proxy sends upstream the
// bytes that plan predicts (the part the body shares with the last one,
// with the last plan's cuts), under the Content-Length it predicts (the
// rest unchanged). When the compile answers, the bytes to send are known:
// if the ones sent ahead are their beginning and their length is the one
// announced, the rest follows; if not, the request is abandoned before its
// body is complete and sent again whole.
//
// What makes this safe is one invariant, checked in finish: the upstream
// never receives a complete body that is not the compiled one. It is sent
// ahead only bytes still short of the announced length, and the bytes that
// complete it only once the whole is known to be exactly what the normal
// path would send. An abandoned request is cut short of its Content-Length
// (the connection closed, or the HTTP/2 stream reset): a server cannot read
// it as a request, and no request is answered twice.

// aheadMin is the smallest body sent ahead: below it the second trip
// costs less than the pipe and the goroutines (10 KB is about 60 µs).
const aheadMin = 128 << 10

// errAbandoned ends a request sent ahead whose prediction was wrong.
var errAbandoned = errors.New("bindery proxy: the bytes sent ahead were not the compiled request's; sent again whole")

// ahead returns the bytes of body to send ahead of its compile, as spans
// of body in order, given what the history's last request was sent as:
// the bytes body shares with that one's, up to the first that differs or
// to the first of its cuts that does not end before it, with the cuts
// taken out. size is the bytes the spans hold, length the Content-Length
// they predict (the rest of body sent as it is); size < length always.
func ahead(body []byte, last sentAs) (spans []span, size, length int) {
	if len(body) == 0 {
		return nil, 0, 0
	}
	// The body's last byte is never sent ahead (the same request again
	// shares all of it): only the compiled body's own completes a request.
	k := min(commonPrefix(body, last.body), len(body)-1)
	at := 0
	for _, c := range last.cuts {
		if c.start >= k {
			break
		}
		if c.end > k {
			k = c.start // a cut this body may not make the same way
			break
		}
		if c.start > at {
			spans = append(spans, span{at, c.start})
			size += c.start - at
		}
		at = c.end
	}
	if k > at {
		spans = append(spans, span{at, k})
		size += k - at
	}
	return spans, size, size + len(body) - k
}

// commonPrefix is how many leading bytes a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	// bytes.Equal on halves: memcmp's speed, without a byte loop over 1 MB.
	lo, hi := 0, n
	for hi-lo > 64 {
		mid := lo + (hi-lo)/2
		if bytes.Equal(a[lo:mid], b[lo:mid]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	for lo < hi && a[lo] == b[lo] {
		lo++
	}
	return lo
}

// speculation is one request sent ahead.
type speculation struct {
	body   []byte
	spans  []span
	size   int
	length int
	pw     *io.PipeWriter
	cancel context.CancelFunc
	wrote  chan error // the bytes sent ahead: written, or why not
	done   chan sentResult
}

type sentResult struct {
	resp *http.Response
	err  error
}

// speculate starts the request upstream with the bytes the history's last
// request predicts, when there are enough of them to matter; nil when
// there are not (or the history has none).
func (p *Proxy) speculate(ctx context.Context, r *http.Request, key string, body []byte) *speculation {
	if len(body) < aheadMin || p.health.isDown() {
		return nil
	}
	bs := p.bases.get(key)
	if bs == nil || bs.sent.body == nil {
		return nil
	}
	spans, size, length := ahead(body, bs.sent)
	if size < aheadMin/2 {
		return nil
	}
	sctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	out, err := p.upstreamRequest(sctx, r, pr, int64(length))
	if err != nil {
		cancel()
		return nil
	}
	s := &speculation{body: body, spans: spans, size: size, length: length, pw: pw, cancel: cancel,
		wrote: make(chan error, 1), done: make(chan sentResult, 1)}
	go func() {
		resp, err := p.hc.Do(out)
		s.done <- sentResult{resp, err}
	}()
	go func() {
		for _, sp := range spans {
			if _, err := pw.Write(body[sp.start:sp.end]); err != nil {
				s.wrote <- err
				return
			}
		}
		s.wrote <- nil
	}()
	return s
}

// matches says whether sent is what was sent ahead followed by the rest:
// the announced length, and the bytes sent ahead its beginning (compared
// byte for byte, not by where they came from). rest is what follows them.
func (s *speculation) matches(sent spliced) (rest spliced, ok bool) {
	if sent.Len() != s.length {
		return spliced{}, false
	}
	head, rest := sent.cut(s.size)
	var was spliced
	for _, sp := range s.spans {
		was.add(s.body[sp.start:sp.end])
	}
	return rest, head.equal(was)
}

// finish completes the request with sent, the compiled body, when the
// bytes sent ahead are its beginning: ok is then true and resp, err are
// the upstream's answer as send would have returned them. ok is false when
// the request was abandoned short of its length (the prediction was wrong,
// or the request failed before its body was complete): the caller sends
// sent whole, as if nothing had been sent ahead.
func (s *speculation) finish(sent spliced) (resp *http.Response, err error, ok bool) {
	rest, match := s.matches(sent)
	if !match {
		s.abandon()
		return nil, nil, false
	}
	werr := <-s.wrote
	for _, p := range rest.pieces {
		if werr != nil {
			break
		}
		_, werr = s.pw.Write(p)
	}
	if werr != nil {
		// The transport stopped reading the body short of its length: it
		// has the upstream's answer (an early refusal, as a plain send
		// would get it) or an error before the body was complete.
		res := <-s.done
		if res.err != nil {
			s.cancel()
			return nil, nil, false
		}
		return res.resp, nil, true
	}
	s.pw.Close()
	res := <-s.done
	if res.err != nil {
		s.cancel()
	}
	// The whole body was handed to the transport: whatever happened next
	// is the upstream's answer, as for a plain send (never sent twice).
	return res.resp, res.err, true
}

// abandon ends the request short of its length and lets its goroutines go.
func (s *speculation) abandon() {
	s.pw.CloseWithError(errAbandoned)
	s.cancel()
	go func() {
		<-s.wrote
		if res := <-s.done; res.resp != nil {
			res.resp.Body.Close()
		}
	}()
}
