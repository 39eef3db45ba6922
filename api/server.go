// Package api is bindery's wire contract (design/api.md): the JSON types,
// the HTTP handlers served over the Unix socket, and the Go client the CLI
// and editor integrations use.
//
// api depends on nothing else in bindery but binding: the handlers reach
// the daemon's state through the small interfaces declared here, which the
// daemon implements with its database and watcher.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// Sessions is what the session endpoints read.
type Sessions interface {
	ListSessions(ctx context.Context) ([]Session, error)
	// GetSession returns an *Error with CodeNotFound for an unknown id.
	GetSession(ctx context.Context, id string) (SessionDetail, error)
}

// HealthReporter answers GET /v1/health.
type HealthReporter interface {
	Health(ctx context.Context) (Health, error)
}

// Server holds what the handlers need. Fill the fields, then call Handler.
type Server struct {
	Sessions Sessions
	Health   HealthReporter
	// Binder serves compile, accept, release and conversations; Events
	// serves the websocket feed. Each route is registered only when set.
	Binder Binder
	Events *EventFeed
	// Reports serves GET /v1/report and GET /v1/whatif (registered only
	// when set).
	Reports ReportSource
	// Team serves GET /v1/report/team (team.go; registered only when set).
	Team TeamSource
	// UID is the only peer uid served (normally the daemon's own).
	UID int
	// MaxBody limits request bodies (DefaultMaxBody when 0); larger ones
	// get 413 body_too_large.
	MaxBody int64
	// Limits bound ids, paths, signatures and the body rate (limits.go).
	Limits Limits
	// Classify, when set, maps an error that is not an *Error to one (the
	// daemon names storage failures this way); nil or a nil answer means
	// internal.
	Classify func(error) *Error
	Version  string
	Logger   *slog.Logger
}

// routes is the one place every endpoint is registered.
func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /v1/sessions", s.handleSessions)
	mux.HandleFunc("GET /v1/sessions/{id}", s.handleSession)
	if s.Binder != nil {
		mux.HandleFunc("POST /v1/compile", s.handleCompile)
		mux.HandleFunc("POST /v1/accept", s.handleAccept)
		mux.HandleFunc("POST /v1/release", s.handleRelease)
		mux.HandleFunc("GET /v1/conversations", s.handleConversations)
		mux.HandleFunc("GET /v1/conversations/{id}", s.handleConversation)
		mux.HandleFunc("GET /v1/account-salt", s.handleAccountSalt)
		mux.HandleFunc("POST /v1/account-alias", s.handleAccountAlias)
	}
	if s.Events != nil {
		mux.Handle("GET /v1/events", s.Events)
	}
	if s.Reports != nil {
		mux.HandleFunc("GET /v1/report", s.handleReport)
		mux.HandleFunc("GET /v1/whatif", s.handleWhatIf)
	}
	if s.Team != nil {
		mux.HandleFunc("GET /v1/report/team", s.handleTeamReport)
	}
}

// Handler returns the HTTP handler: peer check, body limit, routing, and
// JSON errors for everything the mux would answer in plain text.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.MaxBody <= 0 {
		s.MaxBody = DefaultMaxBody
	}
	s.Limits = s.Limits.Normalized()
	mux := http.NewServeMux()
	s.routes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(VersionHeader, s.Version)
		p, known, perr := PeerFromContext(r.Context())
		if err := CheckPeer(p, known, perr, s.UID); err != nil {
			s.Logger.Warn("refused a peer", "err", err)
			writeError(w, err)
			return
		}
		// A browser page must never drive the daemon (DNS rebinding,
		// a local web page posting to a forwarded socket).
		if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
			writeError(w, Errorf(CodeForbidden, "requests from browsers are refused"))
			return
		}
		if r.ContentLength > s.MaxBody {
			writeError(w, Errorf(CodeBodyTooLarge, "request body is %d bytes; the limit is %d (--max-body)", r.ContentLength, s.MaxBody))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &rateBody{body: r.Body, rc: http.NewResponseController(w), start: time.Now(), lim: s.Limits}
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.MaxBody)
		if h, pattern := mux.Handler(r); pattern == "" {
			s.noRoute(w, r, h)
			return
		}
		mux.ServeHTTP(w, r) // (mux.Handler does not set r's path values)
	})
}

// noRoute turns the mux's plain-text 404 and 405 into JSON errors.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.code == http.StatusMethodNotAllowed {
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, Errorf(CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
		return
	}
	writeError(w, Errorf(CodeNotFound, "no endpoint %s %s", r.Method, r.URL.Path))
}

// fail answers with err: an *Error as it is, anything else as internal
// (logged with its detail, which the client does not see).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if e, ok := errors.AsType[*Error](err); ok {
		writeError(w, e)
		return
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	if s.Classify != nil {
		if e := s.Classify(err); e != nil {
			s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
			writeError(w, e)
			return
		}
	}
	s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, Errorf(CodeInternal, "internal error (see the daemon's log)"))
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h, err := s.Health.Health(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	dir := r.URL.Query().Get("cwd")
	if dir != "" && (len(dir) > MaxWorkspacePath || !filepath.IsAbs(dir)) {
		writeError(w, Errorf(CodeBadRequest, "cwd must be an absolute path of at most %d bytes", MaxWorkspacePath))
		return
	}
	list, err := s.Sessions.ListSessions(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if dir != "" {
		in := list[:0]
		for _, ses := range list {
			if InWorkspace(ses.Cwd, dir) {
				in = append(in, ses)
			}
		}
		list = in
	}
	if list == nil {
		list = []Session{}
	}
	writeJSON(w, http.StatusOK, SessionList{Sessions: list})
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" {
		writeError(w, Errorf(CodeBadRequest, "a session id is required"))
		return
	}
	if e := checkLen("session", "id", id, s.Limits.ID, "--max-id"); e != nil {
		writeError(w, e)
		return
	}
	d, err := s.Sessions.GetSession(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// DecodeJSON reads a JSON request body into v: 415 for another content
// type, 413 beyond the body limit, 400 for bad JSON or trailing data.
// Every POST handler reads its body through it.
func DecodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return Errorf(CodeUnsupportedMedia, "the body must be application/json, not %q", ct)
		}
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		if e := bodyError(err); e != nil {
			return e
		}
		if errors.Is(err, io.EOF) {
			return Errorf(CodeBadRequest, "empty request body")
		}
		return Errorf(CodeBadRequest, "request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if e := bodyError(err); e != nil {
			return e
		}
		return Errorf(CodeBadRequest, "request body: data after the JSON value")
	}
	return nil
}

// Peer is who is on the other end of a connection (SO_PEERCRED).
type Peer struct {
	PID int32
	UID uint32
	GID uint32
}

type peerKey struct{}

// WithPeer stores a connection's peer credentials in its context (the
// daemon does this in http.Server.ConnContext).
func WithPeer(ctx context.Context, p Peer, err error) context.Context {
	return context.WithValue(ctx, peerKey{}, peerInfo{p, err})
}

type peerInfo struct {
	peer Peer
	err  error
}

// PeerFromContext returns what WithPeer stored.
func PeerFromContext(ctx context.Context) (Peer, bool, error) {
	v, ok := ctx.Value(peerKey{}).(peerInfo)
	return v.peer, ok, v.err
}

// CheckPeer allows only a peer whose uid is uid. A connection without
// credentials (not a Unix socket, or the lookup failed) is refused too:
// bindery serves only its own user.
func CheckPeer(p Peer, known bool, lookupErr error, uid int) *Error {
	switch {
	case lookupErr != nil:
		return Errorf(CodeForbidden, "cannot read the peer's credentials: %v", lookupErr)
	case !known:
		return Errorf(CodeForbidden, "connection without peer credentials (bindery serves only its Unix socket)")
	case int64(p.UID) != int64(uid):
		return Errorf(CodeForbidden, "peer uid %d (pid %d) is not bindery's uid %d", p.UID, p.PID, uid)
	}
	return nil
}

// statusRecorder keeps the status and headers the mux's fallback handler
// writes, and drops its plain-text body.
type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.code = code }
