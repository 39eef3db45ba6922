package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Limits bound what a client may send; each bound has a flag (bindery
// serve -h) and answers its own clear error. The zero value of a field is
// its default (DefaultLimits).
type Limits struct {
	// ID bounds, in bytes, every identifier a call names: conversation,
	// branch and compile ids, a parent's ids, a release's path, a feed's
	// conversation filter.
	ID int
	// Path bounds a compile's sessionFile (PATH_MAX on Linux).
	Path int
	// Signature bounds a release's signature (or redacted data).
	Signature int
	// A request body must arrive within BodyGrace plus its size at
	// MinBodyRate bytes per second; a slower one is cut with 408
	// body_timeout (a client trickling bytes would otherwise hold its
	// connection and goroutine forever).
	MinBodyRate int64
	BodyGrace   time.Duration
}

// DefaultLimits: pi's ids are UUIDs and 8-hex-digit entry ids and its
// compile ids ~18 bytes, so 256 leaves room for any host without letting a
// call grow the state folder by megabytes; real signatures are a few
// hundred bytes, redacted thinking data some kilobytes. A local client
// sends a 64 MiB body in well under a second; 64 KiB/s after a 10 s grace
// only ever stops a stalled or hostile one.
var DefaultLimits = Limits{ID: 256, Path: 4096, Signature: 512 << 10, MinBodyRate: 64 << 10, BodyGrace: 10 * time.Second}

// Normalized fills zero fields with their defaults.
func (l Limits) Normalized() Limits {
	d := DefaultLimits
	if l.ID <= 0 {
		l.ID = d.ID
	}
	if l.Path <= 0 {
		l.Path = d.Path
	}
	if l.Signature <= 0 {
		l.Signature = d.Signature
	}
	if l.MinBodyRate <= 0 {
		l.MinBodyRate = d.MinBodyRate
	}
	if l.BodyGrace <= 0 {
		l.BodyGrace = d.BodyGrace
	}
	return l
}

// ProviderMaxMessages is the most messages Anthropic's Messages API takes
// in one request: a longer one could only be refused by the provider. The
// daemon's --max-messages defaults to it, and the proxy reads no further.
const ProviderMaxMessages = 100_000

// Error codes of the limits.
const (
	// CodeLimitExceeded [400]: a field is longer than its bound (ids,
	// paths, signatures) or a request holds more messages than the daemon
	// takes; the message names the field, its size, the bound and the flag.
	CodeLimitExceeded = "limit_exceeded"
	// CodeBodyTimeout [408]: the request body arrived slower than the
	// minimum rate (--min-body-rate after --body-grace).
	CodeBodyTimeout = "body_timeout"
)

// checkLen answers limit_exceeded when a field of call is over max.
func checkLen(call, field string, v string, max int, flag string) *Error {
	if len(v) <= max {
		return nil
	}
	return Errorf(CodeLimitExceeded, "%s: %q is %d bytes; the limit is %d (%s)", call, field, len(v), max, flag)
}

// firstErr returns the first non-nil error.
func firstErr(errs ...*Error) *Error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (l Limits) checkCompile(c *CompileCall) *Error {
	errs := []*Error{
		checkLen("compile", "conversation", c.Conversation, l.ID, "--max-id"),
		checkLen("compile", "branch", c.Branch, l.ID, "--max-id"),
		checkLen("compile", "sessionFile", c.SessionFile, l.Path, "--max-path"),
	}
	if c.Parent != nil {
		errs = append(errs, checkLen("compile", "parent.conversation", c.Parent.Conversation, l.ID, "--max-id"),
			checkLen("compile", "parent.branch", c.Parent.Branch, l.ID, "--max-id"))
	}
	if c.Base != nil {
		errs = append(errs, checkLen("compile", "base.compileId", c.Base.CompileID, l.ID, "--max-id"))
	}
	return firstErr(errs...)
}

func (l Limits) checkAccept(c *AcceptCall) *Error {
	errs := []*Error{checkLen("accept", "compileId", c.CompileID, l.ID, "--max-id")}
	for i, t := range c.InputTransformations {
		errs = append(errs, checkLen("accept", fmt.Sprintf("inputTransformations.%d.path", i), t.Path, l.ID, "--max-id"))
	}
	return firstErr(errs...)
}

func (l Limits) checkRelease(c *ReleaseCall) *Error {
	return firstErr(
		checkLen("release", "conversation", c.Conversation, l.ID, "--max-id"),
		checkLen("release", "branch", c.Branch, l.ID, "--max-id"),
		checkLen("release", "compileId", c.CompileID, l.ID, "--max-id"),
		checkLen("release", "path", c.Path, l.ID, "--max-id"),
		checkLen("release", "signature", c.Signature, l.Signature, "--max-signature"),
	)
}

// rateBody enforces the minimum body rate: before each read the
// connection's read deadline is moved to start + grace + read/rate, so a
// body arriving at or above the rate never meets it.
type rateBody struct {
	body  io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	n     int64
	lim   Limits
	done  bool
}

// errBodyTooSlow is what a body read returns once the deadline passed.
type errBodyTooSlow struct {
	read int64
	lim  Limits
}

func (e *errBodyTooSlow) Error() string {
	return fmt.Sprintf("the request body arrived slower than %d bytes/s after a %s grace (%d bytes read); see --min-body-rate and --body-grace", e.lim.MinBodyRate, e.lim.BodyGrace, e.read)
}

func (b *rateBody) Read(p []byte) (int, error) {
	if b.done {
		return b.body.Read(p)
	}
	allowed := b.lim.BodyGrace + time.Duration(float64(b.n)/float64(b.lim.MinBodyRate)*float64(time.Second))
	b.rc.SetReadDeadline(b.start.Add(allowed))
	n, err := b.body.Read(p)
	b.n += int64(n)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, &errBodyTooSlow{read: b.n, lim: b.lim}
	case err != nil:
		// The body is over (EOF, or an error): the deadline must not
		// outlive it, or it would end net/http's background read, and
		// with it the request's context, in the middle of the work.
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *rateBody) Close() error { return b.body.Close() }

// bodyError turns a body read error into its answer.
func bodyError(err error) *Error {
	if mb, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return Errorf(CodeBodyTooLarge, "request body exceeds the limit of %d bytes (--max-body)", mb.Limit)
	}
	if slow, ok := errors.AsType[*errBodyTooSlow](err); ok {
		return Errorf(CodeBodyTimeout, "%s", slow.Error())
	}
	return nil
}
