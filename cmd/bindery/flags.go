package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes, the same for every command (README: "Exit codes").
const (
	exitOK       = 0 // done (also -h/--help: the usage was asked for)
	exitError    = 1 // the command failed: the message says why
	exitUsage    = 2 // bad usage: an unknown flag, a missing or extra argument
	exitDown     = 3 // the daemon is not running (nothing listens on the socket)
	exitDegraded = 4 // status: the daemon runs, but something is not followed
)

var (
	// errUsage is returned after the problem and the usage were printed.
	errUsage = errors.New("usage")
	// errHelp is returned after the usage was printed on request.
	errHelp = errors.New("help")
)

// command is one subcommand's flags. Every client command has --socket and
// --json; help prints each flag as --name, the way the README writes them.
type command struct {
	name, synopsis string
	fs             *flag.FlagSet
	stdout, stderr io.Writer
}

func newCommand(name, synopsis string, stdout, stderr io.Writer) *command {
	c := &command{name: name, synopsis: synopsis, fs: flag.NewFlagSet("bindery "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(io.Discard) // problems are reported by parse, help by usage
	return c
}

// client adds the client flags (--socket, --json).
func (c *command) client() *clientFlags {
	var f clientFlags
	c.fs.StringVar(&f.socket, "socket", "", "the daemon's socket (env BINDERY_SOCKET; default $XDG_RUNTIME_DIR/bindery/bindery.sock)")
	c.fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	return &f
}

// usage prints the synopsis and every flag as --name.
func (c *command) usage(w io.Writer) {
	// The synopsis line continues indented; a paragraph after it (serve's)
	// wraps flush.
	head, rest, _ := strings.Cut(fmt.Sprintf("Usage: bindery %s %s", c.name, c.synopsis), "\n")
	fmt.Fprintln(w, wrapText(head, 80, "    "))
	if rest != "" {
		fmt.Fprintln(w, wrapText(rest, 80, ""))
	}
	writeFlags(w, c.fs)
}

// writeFlags lists a flag set's flags as --name VALUE, each with its help
// indented below: flag.PrintDefaults writes -name, which is not how the
// README or any other help in bindery spells them.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(w, line)
		for _, l := range strings.Split(wrapText(help, 74, ""), "\n") {
			fmt.Fprintf(w, "      %s\n", l)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, "      (default %s)\n", f.DefValue)
		}
	})
}

// parse reads args; flags may come before or after the positional
// arguments, of which there must be between min and max (max < 0: any).
// -h or --help anywhere prints the usage on stdout (exit 0); any problem
// is named on stderr above the usage (exit 2).
func (c *command) parse(args []string, min, max int) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			c.usage(c.stdout)
			return nil, errHelp
		}
	}
	var rest []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, c.fail("%v", err)
		}
		if c.fs.NArg() == 0 {
			break
		}
		rest = append(rest, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	switch {
	case len(rest) < min:
		return nil, c.fail("missing an argument")
	case max >= 0 && len(rest) > max:
		return nil, c.fail("unexpected argument %q", rest[max])
	}
	return rest, nil
}

// emptyFlag fails when one of names was given as an empty string
// (--session ”): an empty id must not quietly mean "all of them".
func (c *command) emptyFlag(names ...string) error {
	var err error
	c.fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			if err == nil && f.Name == n && f.Value.String() == "" {
				err = c.fail("--%s is empty: name one (bindery sessions lists them)", n)
			}
		}
	})
	return err
}

// require fails with the first of names (flags) left empty.
func (c *command) require(names ...string) error {
	for _, n := range names {
		if f := c.fs.Lookup(n); f != nil && f.Value.String() == "" {
			return c.fail("missing --%s", n)
		}
	}
	return nil
}

// fail names the problem, prints the usage, and returns errUsage.
func (c *command) fail(format string, args ...any) error {
	fmt.Fprintf(c.stderr, "bindery %s: %s\n", c.name, fmt.Sprintf(format, args...))
	c.usage(c.stderr)
	return errUsage
}
