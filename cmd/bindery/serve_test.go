package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/daemon"
)

// TestProgressBar drives the bar through a pipe (standing in for the
// terminal) and checks what a user would see: a growing bar, log lines
// printed above it, and a final line once the first scan is over.
func TestProgressBar(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	bar := &progressBar{w: w}
	total := int64(100 << 20)
	bar.update(daemon.Progress{Done: 0, Total: 1 << 20}) // small archives get no bar
	bar.update(daemon.Progress{Done: total / 4, Total: total})
	bar.last = time.Time{} // the bar redraws at most every 100ms
	bar.Write([]byte("level=INFO msg=hello\n"))
	bar.update(daemon.Progress{Done: total / 2, Total: total})
	bar.update(daemon.Progress{Done: total, Total: total, Finished: true})
	bar.update(daemon.Progress{Done: total, Total: total}) // nothing after the end
	bar.clear()
	w.Close()
	got := <-out

	for _, want := range []string{
		"ingesting [=======                       ]  25% 25.0 MiB / 100.0 MiB",
		"\r\033[Klevel=INFO msg=hello\n",
		" 50% 50.0 MiB / 100.0 MiB",
		"ingested 100.0 MiB of pi sessions\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	if strings.Count(got, "ingested ") != 1 || strings.Contains(got[strings.Index(got, "ingested "):], "ingesting") {
		t.Errorf("bar drawn after the end: %q", got)
	}
	if isTerminal(w) {
		t.Error("a pipe is not a terminal")
	}
}

func TestUsageAndExitCodes(t *testing.T) {
	var o, e bytes.Buffer
	if code := run(nil, &o, &e); code != 2 || !strings.Contains(e.String(), "bindery serve") {
		t.Errorf("no args: %d %q", code, e.String())
	}
	e.Reset()
	if code := run([]string{"frobnicate"}, &o, &e); code != 2 || !strings.Contains(e.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, e.String())
	}
	e.Reset()
	if code := run([]string{"show"}, &o, &e); code != 2 || !strings.Contains(e.String(), "Usage: bindery show") {
		t.Errorf("show without a session: %d %q", code, e.String())
	}
	e.Reset()
	sock := t.TempDir() + "/none.sock"
	if code := run([]string{"sessions", "--socket", sock}, &o, &e); code != 3 || !strings.Contains(e.String(), "bindery is not running: nothing answers on") || !strings.Contains(e.String(), sock) {
		t.Errorf("not running: %d %q", code, e.String())
	}
	e.Reset()
	if code := run([]string{"serve", "--max-body", "lots"}, &o, &e); code != 2 {
		t.Errorf("bad flag: %d %q", code, e.String())
	}
	// One set of exit codes (flags.go, README): help is 0 and goes to
	// stdout, wherever -h or --help stands; every problem is 2 and named
	// above the usage; flags print as --name, as the README writes them.
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // in stdout
		stderr string // in stderr
	}{
		{[]string{"status", "-h"}, 0, "Usage: bindery status", ""},
		{[]string{"status", "--help"}, 0, "  --json\n", ""},
		{[]string{"tail", "--since", "3", "--help"}, 0, "  --no-reconnect\n", ""},
		{[]string{"serve", "-h"}, 0, "  --socket", ""},
		{[]string{"help"}, 0, "Exit status: 0 done, 1 failed, 2 bad usage, 3 the daemon is not running", ""},
		{[]string{"status", "extra"}, 2, "", `bindery status: unexpected argument "extra"`},
		{[]string{"show", "a", "b"}, 2, "", `bindery show: unexpected argument "b"`},
		{[]string{"show"}, 2, "", "bindery show: missing an argument"},
		{[]string{"compile", "--file", "x.json"}, 2, "", "bindery compile: missing --conversation"},
		{[]string{"compile", "--conversation", "c"}, 2, "", "bindery compile: missing --file"},
		{[]string{"accept"}, 2, "", "bindery accept: missing --compile"},
		{[]string{"release", "--conversation", "c"}, 2, "", "name the block: --compile and --path, or --signature"},
		{[]string{"report", "--chart", "x.png"}, 2, "", "the file must end in .svg or .html"},
		{[]string{"sessions", "--frob"}, 2, "", "flag provided but not defined: -frob"},
	} {
		o.Reset()
		e.Reset()
		code := run(c.args, &o, &e)
		if code != c.code || !strings.Contains(o.String(), c.stdout) || !strings.Contains(e.String(), c.stderr) {
			t.Errorf("bindery %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(c.args, " "), code, c.code, o.String(), e.String())
		}
		if strings.Contains(o.String()+e.String(), "\n  -json") || strings.Contains(o.String()+e.String(), "\n  -socket") {
			t.Errorf("bindery %s: a flag printed as -name:\n%s%s", strings.Join(c.args, " "), o.String(), e.String())
		}
	}
	o.Reset()
	if code := run([]string{"version"}, &o, &e); code != 0 || !strings.HasPrefix(o.String(), "bindery ") || strings.Contains(o.String(), "bindery dev\n") {
		t.Errorf("version: %d %q", code, o.String())
	}
}
