package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
)

// Client talks to the daemon over its Unix socket. The zero value uses
// DefaultSocket; a Client is safe for concurrent use.
type Client struct {
	// Socket is the daemon's socket path ("" means DefaultSocket(os.Getenv)).
	Socket string

	once sync.Once
	http *http.Client
	err  error
}

// clientIdleConns bounds the connections a Client keeps open between
// calls: more concurrent callers than this dial for each call beyond it.
const clientIdleConns = 64

// NewClient returns a client for the socket at path ("" for the default).
func NewClient(socket string) *Client { return &Client{Socket: socket} }

// NotRunningError says the daemon is not listening on the socket.
type NotRunningError struct {
	Socket string
	Err    error
}

func (e *NotRunningError) Error() string {
	// Both ways to start it, since the reader may have either: the service
	// (Linux and macOS alike) or a terminal.
	return fmt.Sprintf("bindery is not running: nothing answers on %s\nstart it: bindery service install (at every login), or bindery serve", e.Socket)
}

func (e *NotRunningError) Unwrap() error { return e.Err }

func (c *Client) init() error {
	c.once.Do(func() {
		if c.Socket == "" {
			c.Socket, c.err = DefaultSocket(os.Getenv)
			if c.err != nil {
				return
			}
		}
		socket := c.Socket
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			// Every request goes to one host (the socket), so the per-host
			// limit is the pool: at net/http's default of 2, concurrent
			// callers sharing a Client (a benchmark's 16 conversations, an
			// editor's parallel reads) close all but 2 connections after each
			// round and dial again the next.
			MaxIdleConns:        clientIdleConns,
			MaxIdleConnsPerHost: clientIdleConns,
			DisableCompression:  true,
		}
		c.http = &http.Client{Transport: tr}
	})
	return c.err
}

// Do sends a request to path (e.g. "/v1/sessions") with an optional JSON
// body (a json.RawMessage is sent as given, anything else through
// json.Marshal) and decodes a 2xx answer into out (when non-nil). A non-2xx answer
// is returned as *Error; a daemon that is not there as *NotRunningError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	if err := c.init(); err != nil {
		return err
	}
	var rd io.Reader
	if raw, ok := body.(json.RawMessage); ok {
		rd = bytes.NewReader(raw) // already encoded: sent as given
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	// The host is a placeholder: the transport always dials the socket.
	req, err := http.NewRequestWithContext(ctx, method, "http://bindery"+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if isNotRunning(err) {
			return &NotRunningError{Socket: c.Socket, Err: err}
		}
		return fmt.Errorf("%s %s via %s: %w", method, path, c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb errorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
			eb.Error.Status = resp.StatusCode
			return eb.Error
		}
		return &Error{Code: CodeInternal, Status: resp.StatusCode,
			Message: fmt.Sprintf("%s %s: status %s: %.200s", method, path, resp.Status, b)}
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// isNotRunning: nothing listens on the socket (no file, or a stale file
// left by a crash).
func isNotRunning(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// Health is GET /v1/health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.Do(ctx, http.MethodGet, "/v1/health", nil, &h)
	return h, err
}

// Sessions is GET /v1/sessions.
func (c *Client) Sessions(ctx context.Context) ([]Session, error) { return c.SessionsIn(ctx, "") }

// SessionsIn is GET /v1/sessions?cwd=DIR: the sessions of a workspace,
// those pi ran in DIR or a folder under it (InWorkspace). An empty dir
// lists every session.
func (c *Client) SessionsIn(ctx context.Context, dir string) ([]Session, error) {
	var l SessionList
	path := "/v1/sessions"
	if dir != "" {
		path += "?cwd=" + url.QueryEscape(dir)
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &l)
	return l.Sessions, err
}

// Session is GET /v1/sessions/{id}.
func (c *Client) Session(ctx context.Context, id string) (SessionDetail, error) {
	var d SessionDetail
	err := c.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, &d)
	return d, err
}

// Close releases idle connections.
func (c *Client) Close() {
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}
