package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/my-pi/bindery/daemon"
)

func serve(args []string, stdout, stderr io.Writer) error {
	if runtime.GOOS == "windows" {
		// Said at start rather than found out at the first call: the
		// daemon would refuse every connection (api checks who connects).
		return errors.New("bindery serve does not run on Windows: it cannot tell who connects to its\n" +
			"socket (no peer credentials there), so it would refuse every call.\n" +
			"Run bindery inside WSL; the client commands build here but need a daemon")
	}
	cfg, err := daemon.DefaultConfig(os.Getenv)
	if err != nil {
		return err
	}
	cmd := newCommand("serve", "[flags]\n\nRuns the daemon in the foreground until SIGINT or SIGTERM (SIGHUP is logged and ignored). Flags:", stdout, stderr)
	cfg.Flags(cmd.fs)
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	cfg.Version = buildVersion()

	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if os.Getenv("JOURNAL_STREAM") != "" {
		// journald stamps each line itself.
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	var bar *progressBar
	if f, ok := stderr.(*os.File); ok && isTerminal(f) && os.Getenv("JOURNAL_STREAM") == "" {
		bar = &progressBar{w: f}
		cfg.Progress = bar.update
		cfg.Logger = slog.New(slog.NewTextHandler(bar, opts))
	} else {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, opts))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal now ends the process at once
	}()
	// SIGHUP (a closing terminal, systemctl reload) must not kill the
	// daemon. Every setting is read once at start and nothing can be
	// reloaded in place, so it is logged and otherwise ignored: restart
	// the daemon to apply changed flags, environment or model table.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			cfg.Logger.Info("SIGHUP ignored: bindery reads its settings only at start; restart it to apply changes")
		}
	}()
	err = daemon.Run(ctx, cfg)
	if bar != nil {
		bar.clear()
	}
	if errors.Is(err, daemon.ErrLocked) {
		return fmt.Errorf("%w\n(bindery status shows the running daemon)", err)
	}
	return err
}

// progressBar draws the first ingest's progress on the terminal's last
// line; log lines are written above it (it is the logger's writer).
type progressBar struct {
	w     *os.File
	mu    sync.Mutex
	shown bool
	last  time.Time
	line  string
	done  bool
}

// minBarBytes: smaller archives are read too fast for a bar to help.
const minBarBytes = 16 << 20

func (b *progressBar) update(p daemon.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || p.Total < minBarBytes {
		return
	}
	if p.Finished {
		b.line = fmt.Sprintf("ingested %s of pi sessions", humanBytes(p.Total))
		b.draw()
		b.w.WriteString("\n")
		b.shown, b.done = false, true
		return
	}
	if time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	const width = 30
	frac := float64(p.Done) / float64(p.Total)
	n := int(frac * width)
	b.line = fmt.Sprintf("ingesting [%s%s] %3.0f%% %s / %s", strings.Repeat("=", n), strings.Repeat(" ", width-n),
		frac*100, humanBytes(p.Done), humanBytes(p.Total))
	b.draw()
}

func (b *progressBar) draw() {
	b.w.WriteString("\r\033[K" + b.line)
	b.shown = true
}

// Write prints a log line above the bar.
func (b *progressBar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shown {
		b.w.WriteString("\r\033[K")
	}
	n, err := b.w.Write(p)
	if b.shown {
		b.w.WriteString(b.line)
	}
	return n, err
}

func (b *progressBar) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shown {
		b.w.WriteString("\r\033[K")
		b.shown = false
	}
}
