package main

// bindery proxy: the gateway (package proxy), a host of the daemon's API
// like every other client command; it imports api and proxy, never the
// daemon's packages.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/proxy"
)

// defaultProxyListen: a port beside the usual local gateways' (LiteLLM
// 4000, claude-code-router 3456), free on a fresh machine.
const defaultProxyListen = "127.0.0.1:8787"

func proxyCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("proxy", "[--listen 127.0.0.1:PORT] [--upstream URL] [--socket PATH]", stdout, stderr)
	env := &proxyEnv{}
	str := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	listen := cmd.fs.String("listen", str("BINDERY_PROXY_LISTEN", defaultProxyListen), "address to listen on, loopback only (env BINDERY_PROXY_LISTEN)\nclients: ANTHROPIC_BASE_URL=http://ADDRESS")
	upstream := cmd.fs.String("upstream", str("BINDERY_UPSTREAM", proxy.DefaultUpstream), "the Messages API to forward to (env BINDERY_UPSTREAM)")
	socket := cmd.fs.String("socket", "", "the daemon's socket (env BINDERY_SOCKET; default\n$XDG_RUNTIME_DIR/bindery/bindery.sock)")
	compileTimeout := cmd.fs.Duration("compile-timeout", env.duration("BINDERY_COMPILE_TIMEOUT", 2*time.Second), "wait this long for the daemon, then send the request\nunchanged (env BINDERY_COMPILE_TIMEOUT)")
	idle := cmd.fs.Duration("idle-timeout", env.duration("BINDERY_IDLE_TIMEOUT", 5*time.Minute), "end a stream the upstream is silent in this long\n(env BINDERY_IDLE_TIMEOUT)")
	upTimeout := cmd.fs.Duration("upstream-timeout", env.duration("BINDERY_UPSTREAM_TIMEOUT", 10*time.Minute), "wait this long for the upstream's answer to begin\n(env BINDERY_UPSTREAM_TIMEOUT)")
	maxBody := cmd.fs.Int64("max-body", env.int("BINDERY_PROXY_MAX_BODY", 32<<20), "bytes of a request body; more is 413 (env BINDERY_PROXY_MAX_BODY)")
	maxStreams := cmd.fs.Int("max-streams", int(env.int("BINDERY_MAX_STREAMS", 1024)), "requests in flight; more is 529 (env BINDERY_MAX_STREAMS)")
	metricsAddr := cmd.fs.String("metrics", str("BINDERY_PROXY_METRICS", ""), "serve metrics in Prometheus' text format at\nhttp://ADDRESS/metrics, loopback only; off when empty\n(env BINDERY_PROXY_METRICS)")
	logLevel := cmd.fs.String("log-level", str("BINDERY_LOG_LEVEL", "info"), "debug, info, warn or error (env BINDERY_LOG_LEVEL)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if len(env.errs) > 0 {
		return errors.Join(env.errs...)
	}
	for name, v := range map[string]time.Duration{"--compile-timeout": *compileTimeout, "--idle-timeout": *idle, "--upstream-timeout": *upTimeout} {
		if v <= 0 {
			return cmd.fail("%s %s: want a positive duration", name, v)
		}
	}
	if *maxBody <= 0 || *maxStreams <= 0 {
		return cmd.fail("--max-body and --max-streams must be positive")
	}
	if err := proxy.Loopback(*listen); err != nil {
		return err
	}
	if *metricsAddr != "" {
		if err := proxy.Loopback(*metricsAddr); err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cmd.fail("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sock := *socket
	if sock == "" {
		sock = os.Getenv("BINDERY_SOCKET")
	}
	client := api.NewClient(sock)
	p, err := proxy.New(proxy.Config{
		Upstream: *upstream, Client: client, CompileTimeout: *compileTimeout,
		IdleTimeout: *idle, UpstreamTimeout: *upTimeout, MaxBody: *maxBody, MaxStreams: *maxStreams, Log: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	// The port actually bound (":0" picks one): scripts and tests read it.
	addr := ln.Addr().String()
	fmt.Fprintf(stdout, "bindery proxy: listening on http://%s, forwarding to %s\n", addr, strings.TrimSuffix(*upstream, "/"))
	fmt.Fprintf(stdout, "  Claude Code, the SDKs: ANTHROPIC_BASE_URL=http://%s\n  opencode: provider.anthropic.options.baseURL \"http://%s/v1\"\n", addr, addr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := client.Health(hctx); err != nil {
		log.Warn("proxy: bindery is not answering yet; requests go upstream unchanged until it does", "err", err)
	}
	cancel()
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: a stream lasts as long as the model writes.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			srv.Close()
			return fmt.Errorf("listen on %s (--metrics): %w", *metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", p.Metrics())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		defer msrv.Close()
		fmt.Fprintf(stdout, "  metrics: http://%s/metrics\n", mln.Addr())
		go func() {
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics: %w", err)
			}
		}()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	// Shutdown: stop accepting, let the streams in flight finish (bounded),
	// then wait for their accepts, so no reply a client got goes unrecorded.
	stop()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("proxy: shutdown", "err", err)
	}
	if err := p.Wait(sctx); err != nil {
		log.Warn("proxy: accepts still in flight at exit", "err", err)
	}
	return nil
}

// proxyEnv reads the flags' variables; a value that does not parse is
// kept and refused before the proxy starts, naming it (one per call of
// the command: nothing is left over for the next).
type proxyEnv struct{ errs []error }

func (e *proxyEnv) duration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil && d > 0 {
			return d
		}
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want a positive duration such as 2s", name, v))
	}
	return def
}

func (e *proxyEnv) int(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n > 0 {
			return n
		}
		e.errs = append(e.errs, fmt.Errorf("%s=%q: want a positive whole number", name, v))
	}
	return def
}
