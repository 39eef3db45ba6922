// Command bindery is the bindery daemon and its command-line client.
//
//	bindery serve [flags]            run the daemon (see `bindery serve -h`)
//	bindery status [--json]          the daemon's health
//	bindery sessions [--json]        every pi session bindery knows
//	bindery show [--json] <session>  one session: branches, frontiers
//
// The client commands find the daemon's socket as the daemon does
// ($BINDERY_SOCKET, else $XDG_RUNTIME_DIR/bindery/bindery.sock, else under
// the state directory); --socket overrides it. Exit status: 0 on success,
// 1 on an error, 2 on bad usage, 3 when the daemon is not running, 4 when
// status finds it degraded (something is not being followed).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/my-pi/bindery/api"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `bindery keeps a durable record of pi's sessions and thinking blocks.

Usage:
  bindery serve [flags]            run the daemon (bindery serve -h lists the flags)
  bindery status [--json]          the daemon's health; what is not followed (exit 4 then)
  bindery sessions [--json]        every pi session bindery knows
  bindery show [--json] <session>  one session (or conversation): branches, frontiers, binding state
  bindery compile --conversation ID [--branch B] --file request.json [--plan] [--dry-run] [--out FILE]
  bindery accept --compile ID [--reply FILE] [--transformations FILE]
  bindery release --conversation ID (--compile ID --path messages.N.content.M | --signature SIG)
  bindery tail [--conversation ID] [--since SEQ] [--json]   the live event feed
  bindery report [--session ID] [--json] [--chart FILE.svg|.html]   cache and thinking economics
  bindery version

Client commands take --socket PATH (env BINDERY_SOCKET).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = serve(rest, stderr)
	case "status":
		err = status(rest, stdout, stderr)
	case "sessions":
		err = sessions(rest, stdout, stderr)
	case "show":
		err = show(rest, stdout, stderr)
	case "compile":
		err = compileCmd(rest, stdout, stderr)
	case "accept":
		err = acceptCmd(rest, stdout, stderr)
	case "release":
		err = releaseCmd(rest, stdout, stderr)
	case "tail":
		err = tailCmd(rest, stdout, stderr)
	case "report":
		err = reportCmd(rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "bindery", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "bindery: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	fmt.Fprintln(stderr, "bindery:", err)
	if _, ok := errors.AsType[*api.NotRunningError](err); ok {
		return 3
	}
	if _, ok := errors.AsType[*degradedError](err); ok {
		return 4
	}
	return 1
}

// errUsage is returned after the usage was already printed.
var errUsage = errors.New("usage")
