// Package daemon composes bindery: configuration, the state directory's
// lock, the database, the session watcher feeding it, and the API served on
// a private Unix socket; and it owns the lifecycle.
//
// Start-up order: resolve the config; create the state and socket folders
// (0700, ours); take the locks (<db>.lock, <socket>.lock: a second daemon on
// the same database or socket refuses to start while the first lives);
// open and migrate the database; listen on the socket (replacing a stale
// one from a crash); start the HTTP server and the watcher under an
// errgroup; then tell systemd READY=1.
//
// Shutdown order, on SIGINT/SIGTERM (the context's cancellation) or when a
// component fails:
//
//  1. STOPPING=1 to systemd.
//  2. Stop accepting: http.Server.Shutdown closes the listener and waits up
//     to --shutdown-timeout for in-flight requests. The socket file is
//     removed at the end, and only if it is still the one this daemon
//     created (device and inode): a file put at the path is never deleted.
//  3. Close the live feeds (hooks in onShutdown; websockets are not ended by
//     Shutdown).
//  4. Stop the watcher: its context is cancelled and Run returns after the
//     batch in flight, if any, has been committed or rolled back whole (a
//     batch's transaction is never cut by the cancellation).
//  5. With --shared: stop the shipper and ship what the outbox holds, at
//     most ShipAtExit (what is left ships at the next start), then close
//     the shared tier's pool.
//  6. Close the database: PRAGMA optimize, readers, then the writer.
//  7. Release the locks.
//
// A second signal ends the process at once (cmd/bindery restores the
// default signal handling after the first); that loses nothing committed,
// and nothing half-written is ever committed.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/sharedtier"
	"github.com/my-pi/bindery/watcher"
)

// Run serves until ctx is cancelled, then shuts down in the documented
// order. It returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Resolve(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	}
	d := &daemon{cfg: cfg, log: log, started: time.Now()}
	return d.run(ctx)
}

// daemon holds the running components; the handlers read them through
// the api interfaces it implements (state.go).
type daemon struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	store   *db.DB
	watch   *watcher.Watcher
	ingest  *ingester
	roots   []Root
	watchOK func() error      // the watcher's exit, for health
	trees   treeCache         // GET /v1/sessions/{id}
	binder  *Binder           // owners of a session's branches (nil until wired)
	shared  *sharedtier.Store // the shared tier (--shared); nil: this machine alone
	ship    *shipper          // its outbox's shipper

	// onShutdown runs after the server stopped accepting and before the
	// watcher stops (step 3): live feeds close here.
	onShutdown []func()
}

func (d *daemon) run(ctx context.Context) (err error) {
	cfg := d.cfg
	for _, dir := range []string{cfg.StateDir, dirOf(cfg.Database)} {
		if err := privateDir(dir); err != nil {
			return err
		}
	}
	if err := privateDir(dirOf(cfg.Socket)); err != nil {
		return err
	}
	dbLock, err := acquireLock(cfg.Database+".lock", "database")
	if err != nil {
		return err
	}
	defer dbLock.release()
	sockLock, err := acquireLock(cfg.Socket+".lock", "socket")
	if err != nil {
		return err
	}
	defer sockLock.release()

	d.store, err = db.Open(ctx, cfg.Database, db.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.store.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		d.log.Info("stopped")
	}()

	var ship *shipper
	if cfg.Shared != "" {
		// A DSN that does not parse stops the start; a server that does
		// not answer does not (the machine works alone until it does).
		if d.shared, err = sharedtier.Open(cfg.Shared, cfg.Machine); err != nil {
			return err
		}
		defer d.shared.Close()
		if err := d.store.EnableOutbox(ctx, time.Now().UnixMilli()); err != nil {
			return err
		}
		if err := d.joinAccounts(ctx); err != nil {
			return err
		}
		ship = &shipper{wake: make(chan struct{}, 1), store: d.store, shared: d.shared, log: d.log.With("component", "shared")}
		d.ship = ship
		d.log.Info("joined a shared tier", "shared", d.shared.Name(), "machine", cfg.Machine)
	}

	saved, err := d.store.Cursors(ctx)
	if err != nil {
		return err
	}
	d.roots = cfg.SessionRoots()
	wroots := make([]watcher.Root, len(d.roots))
	for i, r := range d.roots {
		wroots[i] = watcher.Root{Dir: r.Dir, Recursive: r.Recursive}
	}
	d.ingest = newIngester(d.store, saved, cfg.Progress)
	d.ingest.measure(d.roots)
	d.watch = watcher.New(watcher.Config{
		Roots:        wroots,
		Rescan:       cfg.Rescan,
		MaxLineBytes: int(cfg.MaxLineBytes),
		Logger:       d.log,
		GroupSink:    d.ingest.sinkGroup,
		Prepare:      d.ingest.prepare,
	}, watcherCursors(saved))

	ln, removeSocket, err := listenSocket(cfg.Socket)
	if err != nil {
		return err
	}
	defer func() {
		// After the server closed the listener (it has by the time Run
		// returns): remove only our own socket (socket.go).
		if err := removeSocket(); err != nil {
			d.log.Warn("socket not removed", "err", err)
		}
	}()
	apiServer := &api.Server{
		Sessions: d,
		Health:   d,
		UID:      os.Getuid(),
		MaxBody:  cfg.MaxBody,
		Limits: api.Limits{ID: cfg.MaxID, Path: cfg.MaxPath, Signature: int(cfg.MaxSignature),
			MinBodyRate: cfg.MinBodyRate, BodyGrace: cfg.BodyGrace},
		Classify: d.classifyStorage,
		Version:  cfg.Version,
		Logger:   d.log.With("component", "api"),
	}
	journal := d.wireBinding(apiServer) // binding_wire.go: compile/accept/release, the event feed
	d.wireReport(apiServer)             // report_wire.go: GET /v1/report
	srv := &http.Server{
		Handler:           apiServer.Handler(),
		ConnContext:       peerContext,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(d.log.With("component", "http").Handler(), slog.LevelWarn),
	}

	g, gctx := errgroup.WithContext(ctx)
	// The watcher's context is not gctx: it is cancelled in step 4, after
	// the server has stopped, not at the first signal.
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	watchDone := make(chan struct{})
	var watchErr error
	d.watchOK = func() error {
		select {
		case <-watchDone:
			if watchErr != nil {
				return watchErr
			}
			return errors.New("stopped")
		default:
			return nil
		}
	}

	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve %s: %w", cfg.Socket, err)
		}
		return nil
	})
	g.Go(func() error {
		defer close(watchDone)
		watchErr = d.watch.Run(watchCtx, d.ingest.sink)
		if watchErr == nil && watchCtx.Err() == nil {
			watchErr = errors.New("watcher stopped on its own")
		}
		if watchErr != nil && watchCtx.Err() == nil {
			return fmt.Errorf("watcher: %w", watchErr)
		}
		return nil
	})
	g.Go(func() error { return d.trackFirstScan(gctx) })
	g.Go(func() error { return d.watchdog(gctx) })
	g.Go(func() error { return journal.RunPruner(gctx, time.Minute) })
	// The shipper's context is not gctx: it stops in step 5, after the
	// last writes.
	shipCtx, stopShip := context.WithCancel(context.WithoutCancel(ctx))
	defer stopShip()
	shipDone := make(chan struct{})
	if ship != nil {
		go func() { defer close(shipDone); ship.run(shipCtx) }()
	} else {
		close(shipDone)
	}
	g.Go(func() error {
		<-gctx.Done()
		d.log.Info("shutting down", "cause", context.Cause(gctx))
		if err := notify("STOPPING=1"); err != nil {
			d.log.Warn("systemd notify", "err", err)
		}
		// 2. Stop accepting; let in-flight requests finish.
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			d.log.Warn("requests still running at the shutdown timeout; closing them", "err", err)
			srv.Close()
		}
		// 3. Close live feeds.
		for _, f := range d.onShutdown {
			f()
		}
		// 4. Stop the watcher; Run returns after the batch in flight.
		stopWatch()
		<-watchDone
		// 5. Ship what the outbox holds (bounded).
		stopShip()
		<-shipDone
		if ship != nil {
			ship.drain()
		}
		return nil
	})

	// files_known is what the database knew at start; the files found on
	// disk are logged when the first scan is over ("first scan done").
	d.log.Info("serving", "socket", cfg.Socket, "database", cfg.Database, "roots", len(d.roots),
		"files_known", len(saved), "version", cfg.Version)
	if err := notify("READY=1\nSTATUS=serving on " + cfg.Socket); err != nil {
		d.log.Warn("systemd notify", "err", err)
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err // 6 and 7: the deferred database close and lock releases
}

// trackFirstScan marks the first ingest finished once the watcher has
// completed its first full scan, so the progress bar can end.
func (d *daemon) trackFirstScan(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if st := d.watch.Status(); !st.LastRescan.IsZero() {
			d.log.Info("first scan done", "files", st.Files, "bytes", st.Bytes, "ingested", st.Ingested)
			d.ingest.finished.Store(true)
			d.ingest.report()
			return nil
		}
	}
}

func dirOf(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			if i == 0 {
				return "/"
			}
			return p[:i]
		}
	}
	return "."
}
