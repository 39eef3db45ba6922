package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// watchdog sends systemd WATCHDOG=1 at half the interval systemd asked for
// ($WATCHDOG_USEC, set by WatchdogSec= in the unit), but only while the
// daemon's loops are healthy: the watcher's loop has made progress within
// its stall bound, the database answers a read, and the socket answers an
// HTTP request (accept loop, connection check and router, end to end). A wedged loop (the FIFO
// of issue 13 was one) then stops the pings, and systemd restarts the
// service instead of leaving it to answer health checks while following
// nothing. Without $WATCHDOG_USEC (or with $WATCHDOG_PID naming another
// process) it does nothing.
func (d *daemon) watchdog(ctx context.Context) error {
	interval, ok := watchdogInterval(os.Getenv)
	if !ok {
		return nil
	}
	every := interval / 2
	// The watcher's loop wakes at least every --rescan; a rescan over many
	// files beats per file. Allow two rescans and the watchdog interval.
	stall := 2*d.cfg.Rescan + interval
	t := time.NewTicker(every)
	defer t.Stop()
	sick := ""
	for {
		why := d.unhealthy(ctx, every, stall)
		if ctx.Err() != nil {
			return nil // shutting down: the socket is closing, say nothing
		}
		switch {
		case why == "":
			if sick != "" {
				d.log.Info("healthy again; systemd watchdog pings resume")
			}
			if err := notify("WATCHDOG=1"); err != nil {
				d.log.Warn("systemd notify", "err", err)
			}
		case why != sick:
			d.log.Error("unhealthy: systemd watchdog pings stop, systemd will restart bindery", "why", why)
		}
		sick = why
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// unhealthy says what is wrong, or "".
func (d *daemon) unhealthy(ctx context.Context, timeout, stall time.Duration) string {
	if err := d.watchOK(); err != nil {
		return "the watcher stopped: " + err.Error()
	}
	if beat := d.watch.Beat(); !beat.IsZero() && time.Since(beat) > stall {
		return "the watcher's loop has made no progress for " + time.Since(beat).Round(time.Second).String()
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := d.store.Ping(pctx); err != nil && ctx.Err() == nil {
		return "the database does not answer: " + err.Error()
	}
	if d.cfg.Socket != "" {
		if err := probeSocket(d.cfg.Socket, timeout); err != nil && ctx.Err() == nil {
			return "the socket does not answer: " + err.Error()
		}
	}
	return ""
}

// probeSocket sends one request to the daemon's own socket and waits for
// the status line of any answer (the path is unknown: the router answers
// 404 without touching the database).
func probeSocket(path string, timeout time.Duration) error {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET /v1/watchdog-probe HTTP/1.1\r\nHost: bindery\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "HTTP/1.") {
		return fmt.Errorf("answered %q", line)
	}
	return nil
}

// watchdogInterval is systemd's watchdog interval for this process.
func watchdogInterval(getenv func(string) string) (time.Duration, bool) {
	usec, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0, false
	}
	if pid := getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0, false
	}
	return time.Duration(usec) * time.Microsecond, true
}
