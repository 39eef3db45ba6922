// Command bindery is the bindery daemon and its command-line client.
//
//	bindery serve [flags]            run the daemon (see `bindery serve -h`)
//	bindery status [--json]          the daemon's health
//	bindery sessions [--json]        every pi session bindery knows
//	bindery show [--json] <session>  one session: branches, frontiers
//
// The client commands find the daemon's socket as the daemon does
// ($BINDERY_SOCKET, else $XDG_RUNTIME_DIR/bindery/bindery.sock, else under
// the state directory); --socket overrides it. Exit status (flags.go): 0 on
// success or help, 1 on an error, 2 on bad usage, 3 when the daemon is not
// running, 4 when status finds it degraded (something is not followed).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/my-pi/bindery/api"
)

// version is set at build time with -ldflags "-X main.version=..."; else
// it is read from the build (buildVersion).
var version = ""

const usage = `bindery keeps a durable record of pi's sessions and thinking blocks.

Usage:
  bindery serve [flags]          run the daemon (bindery serve -h lists flags)
  bindery service install|uninstall|status   run the daemon at every login
  bindery status [--json]        the daemon's health (exit 4: not all followed)
  bindery sessions [--cwd DIR]   every pi session bindery knows
  bindery show <session>         one session or conversation: branches,
                                 frontiers, binding state
  bindery compile --conversation ID --file request.json [--branch B]
                  [--plan] [--dry-run] [--out FILE]
  bindery accept --compile ID [--reply FILE] [--transformations FILE]
  bindery release --conversation ID
                  (--compile ID --path messages.N.content.M | --signature SIG)
  bindery tail [--conversation ID] [--since SEQ]   the live event feed
  bindery report [--session ID] [--chart FILE.svg|.html]   what thinking and
                                 caching cost
  bindery whatif [--session ID] [--keep N] [--chart FILE]   your sessions
                                 replayed under thinking policies
  bindery conversations          bindery proxy's conversations (Claude Code,
                                 opencode, the SDKs)
  bindery proxy [--listen 127.0.0.1:PORT] [--upstream URL]
                                 Anthropic API gateway
  bindery version

Client commands take --socket PATH (env BINDERY_SOCKET) and --json; a session
id may be given as any unique prefix of it. Every command takes -h/--help.
Exit status: 0 done, 1 failed, 2 bad usage, 3 the daemon is not running,
4 status found something not followed.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = serve(rest, stdout, stderr)
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
	case "whatif":
		err = whatifCmd(rest, stdout, stderr)
	case "service":
		err = serviceCmd(rest, stdout, stderr)
	case "proxy":
		err = proxyCmd(rest, stdout, stderr)
	case "conversations":
		err = conversationsCmd(rest, stdout, stderr)
	case "version", "--version":
		err = versionCmd(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "bindery: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	}
	fmt.Fprintln(stderr, wrapText("bindery: "+err.Error(), 80, "  "))
	if _, ok := errors.AsType[*api.NotRunningError](err); ok {
		return exitDown
	}
	if _, ok := errors.AsType[*degradedError](err); ok {
		return exitDegraded
	}
	return exitError
}

// buildVersion is the -X version, else the module version of the build
// (go install ...@v1.2.3), else the VCS revision it was built from (with
// "-dirty" for uncommitted changes), else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		case "vcs.time":
			when = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if when != "" {
		return fmt.Sprintf("devel %s%s (%s)", rev, dirty, when)
	}
	return "devel " + rev + dirty
}

// versionCmd prints the build's version, as text or (--json) as
// {"version": ...} for tools.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("version", "[--json]", stdout, stderr)
	asJSON := cmd.fs.Bool("json", false, "print JSON instead of text")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, map[string]string{"version": buildVersion()})
	}
	_, err := fmt.Fprintln(stdout, "bindery", buildVersion())
	return err
}
