package daemon

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/watcher"
)

// Every setting has a flag and a BINDERY_* variable, and every limit is in
// the README's Limits table with its flag.
func TestEveryFlagHasEnvAndLimitsAreDocumented(t *testing.T) {
	c, err := DefaultConfig(envMap("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.Flags(fs)
	envRe := regexp.MustCompile(`env BINDERY_[A-Z_]+`)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]bool{"max-body": true, "max-messages": true, "max-id": true, "max-path": true, "max-signature": true,
		"min-body-rate": true, "body-grace": true, "header-timeout": true, "idle-timeout": true, "feed-buffer": true,
		"feed-stall": true, "accepted-window": true}
	fs.VisitAll(func(f *flag.Flag) {
		if !envRe.MatchString(f.Usage) {
			t.Errorf("--%s names no BINDERY_* variable: %q", f.Name, f.Usage)
		}
		if limits[f.Name] && !strings.Contains(string(readme), "`--"+f.Name+"`") {
			t.Errorf("--%s is not in the README's Limits table", f.Name)
		}
	})

	c, err = DefaultConfig(envMap("HOME", "/h", "BINDERY_MAX_MESSAGES", "7", "BINDERY_MAX_ID", "8", "BINDERY_MAX_PATH", "9",
		"BINDERY_MAX_SIGNATURE", "2KiB", "BINDERY_MIN_BODY_RATE", "1KiB", "BINDERY_BODY_GRACE", "3s", "BINDERY_HEADER_TIMEOUT", "4s",
		"BINDERY_IDLE_TIMEOUT", "5s", "BINDERY_FEED_BUFFER", "6", "BINDERY_FEED_STALL", "7s", "BINDERY_ACCEPTED_WINDOW", "300",
		"BINDERY_EVENTS_MAX", "11", "BINDERY_EVENTS_MAX_AGE", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.MaxMessages != 7 || c.MaxID != 8 || c.MaxPath != 9 || c.MaxSignature != 2048 || c.MinBodyRate != 1024 ||
		c.BodyGrace != 3*time.Second || c.HeaderTimeout != 4*time.Second || c.IdleTimeout != 5*time.Second ||
		c.FeedBuffer != 6 || c.FeedStall != 7*time.Second || c.AcceptedWindow != 300 || c.EventsMax != 11 || c.EventsMaxAge != time.Hour {
		t.Errorf("limits from env: %+v", c)
	}
	for _, bad := range [][]string{{"BINDERY_MAX_ID", "many"}, {"BINDERY_FEED_STALL", "long"}, {"BINDERY_MIN_BODY_RATE", "fast"}} {
		if _, err := DefaultConfig(envMap("HOME", "/h", bad[0], bad[1])); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: %v, want an error naming it", bad[0], bad[1], err)
		}
	}
	c, _ = DefaultConfig(envMap("HOME", "/h"))
	c.MaxID = 0
	if err := c.Resolve(); err == nil || !strings.Contains(err.Error(), "--max-id") {
		t.Errorf("--max-id 0: %v", err)
	}
}

// --max-line-bytes is bounded both ways, the upper bound being the one
// ReadReply reads a reply line to (watcher.MaxLineLimit): each edge is
// taken, one byte past it is a clear error naming the flag.
func TestMaxLineBytesBounds(t *testing.T) {
	for _, c := range []struct {
		n  int64
		ok bool
	}{{MinMaxLineBytes - 1, false}, {MinMaxLineBytes, true}, {watcher.MaxLineLimit, true}, {watcher.MaxLineLimit + 1, false}} {
		cfg, err := DefaultConfig(envMap("HOME", "/h"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxLineBytes = c.n
		err = cfg.Resolve()
		if c.ok && err != nil {
			t.Errorf("--max-line-bytes %d: %v, want it taken", c.n, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "--max-line-bytes")) {
			t.Errorf("--max-line-bytes %d: %v, want an error naming the flag", c.n, err)
		}
	}
}
