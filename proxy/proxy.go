package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/my-pi/bindery/api"
)

// DefaultUpstream is the Anthropic API.
const DefaultUpstream = "https://api.anthropic.com"

// Config is what a Proxy runs with; a zero field takes its default.
type Config struct {
	// Upstream is the Messages API's base URL, without /v1.
	Upstream string
	// Client talks to the daemon (api's client: the proxy is a host of the
	// API, nothing more).
	Client *api.Client
	// CompileTimeout bounds the wait for the daemon before a request goes
	// upstream as the client sent it (default 2 s).
	CompileTimeout time.Duration
	// CallTimeout bounds an accept or a release (default 10 s).
	CallTimeout time.Duration
	// ProbeInterval: while the daemon is down, requests go straight
	// upstream and one probe a ProbeInterval notices it is back (default 1 s).
	ProbeInterval time.Duration
	// UpstreamTimeout bounds the wait for the upstream's answer to begin
	// (default 10 min, Claude Code's own API timeout).
	UpstreamTimeout time.Duration
	// IdleTimeout bounds the silence between two reads of a streamed
	// answer (default 5 min; the provider pings far more often).
	IdleTimeout time.Duration
	// MaxBody bounds a client's request body (default 32 MiB, the
	// provider's own request limit).
	MaxBody int64
	// MaxReply bounds the side copy of one reply (default 32 MiB): a
	// longer reply still streams to the client, and is not accepted.
	MaxReply int
	// MaxStreams bounds the Messages requests in flight (default 1024);
	// past it a request is answered 529 overloaded_error at once.
	MaxStreams int
	// MaxHeld bounds the bytes of the bases kept for compiles by
	// reference (default 256 MiB).
	MaxHeld int
	// Log is where the proxy says what it did (default slog.Default()).
	// No credential, header value or body is ever logged.
	Log *slog.Logger
	// Transport sends upstream requests (default: a transport with
	// ProxyFromEnvironment and ResponseHeaderTimeout UpstreamTimeout).
	Transport http.RoundTripper
}

// Proxy is the gateway: an http.Handler.
type Proxy struct {
	cfg      Config
	upstream *url.URL
	log      *slog.Logger
	client   *api.Client
	hc       *http.Client
	bases    *bases
	health   *health
	slots    chan struct{}
	wg       sync.WaitGroup // accepts in flight
	salt     accountSalt    // account.go
	keys     historyKeys    // conversation.go
	metrics  *metrics       // metrics.go
}

// New makes a proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == "" {
		cfg.Upstream = DefaultUpstream
	}
	u, err := url.Parse(strings.TrimSuffix(cfg.Upstream, "/"))
	if err != nil {
		// url's error quotes the URL, and with it any password in it.
		return nil, errors.New("the upstream URL does not parse")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream %s is not an http(s) URL", u.Redacted())
	}
	if u.User != nil {
		return nil, errors.New("the upstream URL carries a user or password: give credentials in the client's headers, never in the URL")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.CompileTimeout, 2*time.Second)
	def(&cfg.CallTimeout, 10*time.Second)
	def(&cfg.ProbeInterval, time.Second)
	def(&cfg.UpstreamTimeout, 10*time.Minute)
	def(&cfg.IdleTimeout, 5*time.Minute)
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 32 << 20
	}
	if cfg.MaxReply <= 0 {
		cfg.MaxReply = 32 << 20
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 1024
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = 256 << 20
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Client == nil {
		cfg.Client = api.NewClient("")
	}
	if cfg.Transport == nil {
		cfg.Transport = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: cfg.UpstreamTimeout,
			// A stream's events come in chunks of a few KB; with the
			// default 4 KB read buffer each read returned at most one, and
			// each became its own write and flush to the client. With room
			// for many, one read takes all that has arrived.
			ReadBufferSize: 64 << 10,
			// A body sent ahead through a pipe (speculate.go) is copied
			// through the write buffer: at the default 4 KB, 1 MB was 256
			// writes, each waking the upstream's reader on a busy machine.
			WriteBufferSize: 64 << 10,
		}
	}
	p := &Proxy{
		cfg: cfg, upstream: u, log: cfg.Log, client: cfg.Client,
		hc: &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is the client's to follow
		}},
		bases:   newBases(cfg.MaxHeld),
		slots:   make(chan struct{}, cfg.MaxStreams),
		metrics: newMetrics(),
	}
	p.health = &health{p: p}
	p.metrics.reg.MustRegister(newDaemonMetrics(p))
	return p, nil
}

// ServeHTTP routes: the Messages endpoints are compiled, everything else
// passes through.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &timedWriter{ResponseWriter: w, m: p.metrics, start: time.Now()}
	defer tw.done()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		tw.route = "messages"
		p.messages(tw, r, false)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		tw.route = "count_tokens"
		p.messages(tw, r, true)
	default:
		tw.route = "other"
		p.pass(tw, r)
	}
}

// Wait waits for the accepts in flight (at shutdown), at most until ctx ends.
func (p *Proxy) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Loopback reports whether addr (host:port) names only this machine: an
// IP in 127.0.0.0/8 or ::1, or localhost. The proxy forwards the client's
// credentials; it listens nowhere else.
func Loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q is not a loopback address (127.0.0.1, ::1 or localhost): the proxy carries your API credentials and listens on this machine only", addr)
	}
	return nil
}
