package daemon

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/watcher"
)

// Config is everything `bindery serve` can be told. Every setting has a
// default a newcomer never needs to change, an environment variable and a
// flag (the flag wins). This file is the one place settings are defined:
// add a field, its default in DefaultConfig and its flag in Flags.
//
//	flag              env                    default
//	--agent-dir       BINDERY_AGENT_DIR      $PI_CODING_AGENT_DIR, else ~/.pi/agent (sessions are read from <agent-dir>/sessions)
//	--session-dir     BINDERY_SESSION_DIRS   none; flat folders of session files (pi --session-dir); repeat the flag, or ':'-separate the env
//	--state-dir       BINDERY_STATE_DIR      $STATE_DIRECTORY, else $XDG_STATE_HOME/bindery, else ~/.local/state/bindery
//	--db              BINDERY_DB             <state-dir>/bindery.db
//	--socket          BINDERY_SOCKET         $RUNTIME_DIRECTORY/bindery.sock, else $XDG_RUNTIME_DIR/bindery/bindery.sock, else <state-dir>/run/bindery.sock
//	--max-body        BINDERY_MAX_BODY       64MiB (request bodies beyond it get 413)
//	--max-line-bytes  BINDERY_MAX_LINE_BYTES 64MiB (a longer session line is skipped with an ingest error; at least 256KiB)
//	--rescan          BINDERY_RESCAN         10s (full rescan of the session folders, in case fsnotify missed something)
//	--shutdown-timeout BINDERY_SHUTDOWN_TIMEOUT 10s (how long in-flight requests may finish on SIGTERM)
//	--log-level       BINDERY_LOG_LEVEL      info (debug, info, warn, error)
//	--models          BINDERY_MODELS         <state-dir>/models.json if it exists; else the built-in model table (binding.DefaultModelTable)
//	--events-max      BINDERY_EVENTS_MAX     100000 (events the log keeps; 0: no count bound)
//	--events-max-age  BINDERY_EVENTS_MAX_AGE 720h (0: no age bound)
//
// Limits (README "Limits"; each answers its own error):
//
//	--max-messages    BINDERY_MAX_MESSAGES   100000 (messages in one compiled request; more: 400 limit_exceeded)
//	--max-id          BINDERY_MAX_ID         256 (bytes of a conversation, branch, compile id, release path)
//	--max-path        BINDERY_MAX_PATH       4096 (bytes of a compile's sessionFile)
//	--max-signature   BINDERY_MAX_SIGNATURE  512KiB (a release's signature)
//	--min-body-rate   BINDERY_MIN_BODY_RATE  64KiB (bytes/s a request body must keep up after the grace; else 408 body_timeout)
//	--body-grace      BINDERY_BODY_GRACE     10s
//	--header-timeout  BINDERY_HEADER_TIMEOUT 10s (to send a request's headers)
//	--idle-timeout    BINDERY_IDLE_TIMEOUT   2m (an idle keep-alive connection is closed)
//	--accepted-window BINDERY_ACCEPTED_WINDOW 10000 (accepted compiles a conversation remembers: a repeated accept answers 200 within it, 404 compile_forgotten beyond)
//	--feed-buffer     BINDERY_FEED_BUFFER    1024 (events a websocket subscriber may fall behind before it is dropped)
//	--feed-stall      BINDERY_FEED_STALL     30s (how long one event write to a subscriber may block)
//
// pi's own session-folder settings are followed too: $PI_CODING_AGENT_SESSION_DIR
// and "sessionDir" in <agent-dir>/settings.json (later pi versions).
type Config struct {
	AgentDir        string
	SessionDirs     []string
	StateDir        string
	Database        string
	Socket          string
	MaxBody         int64
	MaxLineBytes    int64
	Rescan          time.Duration
	ShutdownTimeout time.Duration
	LogLevel        slog.Level
	// The event log behind GET /v1/events keeps at most EventsMax events
	// and none older than EventsMaxAge (0: no bound of that kind).
	EventsMax    int64
	EventsMaxAge time.Duration
	// Models names a model-table override file (binding.ParseModelTable);
	// Resolve reads it into ModelTable. A file that does not parse stops
	// the daemon from starting: a wrong table can cost refused requests.
	Models     string
	ModelTable *binding.ModelTable

	// Limits on what clients send (README "Limits").
	MaxMessages   int
	MaxID         int
	MaxPath       int
	MaxSignature  int64
	MinBodyRate   int64
	BodyGrace     time.Duration
	HeaderTimeout time.Duration
	IdleTimeout   time.Duration
	FeedBuffer    int
	FeedStall     time.Duration
	// AcceptedWindow is binding.Retention.Tombstones.
	AcceptedWindow int

	// Shared is the shared tier's DSN (issue 29, README "Sharing across
	// machines"); empty: this machine alone, as before. Machine names this
	// machine in it (default: the host name). SharedWait bounds a
	// compile's read-through of stamps it does not hold.
	Shared  string
	Machine string
	// Person names whose spend this machine's requests are in the team's
	// report (--person, BINDERY_PERSON; default the OS user running the
	// daemon): the daemon cannot see who typed a prompt, only whose
	// account it runs under, and one person usually is one account.
	Person string
	// TeamScan is how often the team report's facts are refreshed
	// (--team-scan, BINDERY_TEAM_SCAN): how stale the team's report may be.
	TeamScan   time.Duration
	SharedWait time.Duration

	// Not settable from the command line.
	Version  string
	Logger   *slog.Logger
	Progress func(Progress) // called as the first ingest advances (nil: not reported)
	Getenv   func(string) string
}

// Progress is how far ingest has got through what was on disk at start.
type Progress struct {
	Done, Total int64 // bytes
	Finished    bool  // the first full scan is over
}

// DefaultConfig returns the defaults, read from the environment (getenv is
// os.Getenv outside tests). Derived paths (database, socket) stay empty
// until Resolve, so a --state-dir flag moves them too.
func DefaultConfig(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		MaxBody:         api.DefaultMaxBody,
		MaxLineBytes:    DefaultMaxLineBytes,
		Rescan:          10 * time.Second,
		ShutdownTimeout: 10 * time.Second,
		SharedWait:      time.Second,
		TeamScan:        30 * time.Second,
		LogLevel:        slog.LevelInfo,
		EventsMax:       100_000,
		EventsMaxAge:    30 * 24 * time.Hour,
		MaxMessages:     DefaultMaxMessages,
		MaxID:           api.DefaultLimits.ID,
		MaxPath:         api.DefaultLimits.Path,
		MaxSignature:    int64(api.DefaultLimits.Signature),
		MinBodyRate:     api.DefaultLimits.MinBodyRate,
		BodyGrace:       api.DefaultLimits.BodyGrace,
		HeaderTimeout:   10 * time.Second,
		IdleTimeout:     2 * time.Minute,
		FeedBuffer:      api.DefaultSubscriberBuffer,
		FeedStall:       30 * time.Second,
		AcceptedWindow:  binding.DefaultRetention.Tombstones,
		Getenv:          getenv,
		Database:        getenv("BINDERY_DB"),
		Socket:          getenv("BINDERY_SOCKET"),
		Models:          getenv("BINDERY_MODELS"),
	}
	home := getenv("HOME")
	switch {
	case getenv("BINDERY_AGENT_DIR") != "":
		c.AgentDir = expandHome(getenv("BINDERY_AGENT_DIR"), home)
	case getenv("PI_CODING_AGENT_DIR") != "":
		c.AgentDir = expandHome(getenv("PI_CODING_AGENT_DIR"), home)
	case home != "":
		c.AgentDir = filepath.Join(home, ".pi", "agent")
	}
	if v := getenv("BINDERY_SESSION_DIRS"); v != "" {
		for _, d := range filepath.SplitList(v) {
			if d != "" {
				c.SessionDirs = append(c.SessionDirs, expandHome(d, home))
			}
		}
	}
	var err error
	if c.StateDir, err = api.DefaultStateDir(getenv); err != nil {
		return c, err
	}
	var errs []error
	if v := getenv("BINDERY_MAX_BODY"); v != "" {
		if c.MaxBody, err = parseSize(v); err != nil {
			errs = append(errs, fmt.Errorf("BINDERY_MAX_BODY: %w", err))
		}
	}
	if v := getenv("BINDERY_MAX_LINE_BYTES"); v != "" {
		if c.MaxLineBytes, err = parseSize(v); err != nil {
			errs = append(errs, fmt.Errorf("BINDERY_MAX_LINE_BYTES: %w", err))
		}
	}
	for _, d := range []struct {
		env string
		p   *int64
	}{{"BINDERY_MAX_SIGNATURE", &c.MaxSignature}, {"BINDERY_MIN_BODY_RATE", &c.MinBodyRate}} {
		if v := getenv(d.env); v != "" {
			if *d.p, err = parseSize(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.env, err))
			}
		}
	}
	for _, d := range []struct {
		env string
		p   *int
	}{{"BINDERY_MAX_MESSAGES", &c.MaxMessages}, {"BINDERY_MAX_ID", &c.MaxID}, {"BINDERY_MAX_PATH", &c.MaxPath}, {"BINDERY_FEED_BUFFER", &c.FeedBuffer},
		{"BINDERY_ACCEPTED_WINDOW", &c.AcceptedWindow}} {
		if v := getenv(d.env); v != "" {
			if *d.p, err = strconv.Atoi(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.env, err))
			}
		}
	}
	if v := getenv("BINDERY_EVENTS_MAX"); v != "" {
		if c.EventsMax, err = strconv.ParseInt(v, 10, 64); err != nil {
			errs = append(errs, fmt.Errorf("BINDERY_EVENTS_MAX: %w", err))
		}
	}
	for _, d := range []struct {
		env string
		p   *time.Duration
	}{{"BINDERY_RESCAN", &c.Rescan}, {"BINDERY_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout}, {"BINDERY_EVENTS_MAX_AGE", &c.EventsMaxAge},
		{"BINDERY_BODY_GRACE", &c.BodyGrace}, {"BINDERY_HEADER_TIMEOUT", &c.HeaderTimeout}, {"BINDERY_IDLE_TIMEOUT", &c.IdleTimeout},
		{"BINDERY_FEED_STALL", &c.FeedStall}} {
		if v := getenv(d.env); v != "" {
			if *d.p, err = time.ParseDuration(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.env, err))
			}
		}
	}
	c.Shared = getenv("BINDERY_SHARED")
	if v := getenv("BINDERY_MACHINE"); v != "" {
		c.Machine = v
	}
	if v := getenv("BINDERY_TEAM_SCAN"); v != "" {
		if c.TeamScan, err = time.ParseDuration(v); err != nil {
			errs = append(errs, fmt.Errorf("BINDERY_TEAM_SCAN: %w", err))
		}
	}
	if v := getenv("BINDERY_PERSON"); v != "" {
		c.Person = v
	}
	if v := getenv("BINDERY_SHARED_WAIT"); v != "" {
		if c.SharedWait, err = time.ParseDuration(v); err != nil {
			errs = append(errs, fmt.Errorf("BINDERY_SHARED_WAIT: %w", err))
		}
	}
	if v := getenv("BINDERY_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("BINDERY_LOG_LEVEL: %w", err))
		}
	}
	return c, errors.Join(errs...)
}

// Flags registers a flag for every setting on fs, defaulting to c's values.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.AgentDir, "agent-dir", c.AgentDir, "pi's agent directory; sessions are read from <agent-dir>/sessions (env BINDERY_AGENT_DIR, else PI_CODING_AGENT_DIR)")
	fs.Func("session-dir", "also follow the session files in this flat folder (pi --session-dir); repeatable (env BINDERY_SESSION_DIRS, ':'-separated)", func(s string) error {
		c.SessionDirs = append(c.SessionDirs, s)
		return nil
	})
	fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "where the database and lock live (env BINDERY_STATE_DIR)")
	fs.StringVar(&c.Database, "db", c.Database, "the SQLite database (env BINDERY_DB; default <state-dir>/bindery.db)")
	fs.StringVar(&c.Socket, "socket", c.Socket, "the Unix socket to serve on (env BINDERY_SOCKET; default $XDG_RUNTIME_DIR/bindery/bindery.sock)")
	fs.Func("max-body", fmt.Sprintf("largest request body, e.g. 64MiB (env BINDERY_MAX_BODY; default %s)", formatSize(c.MaxBody)), func(s string) error {
		n, err := parseSize(s)
		c.MaxBody = n
		return err
	})
	fs.Func("max-line-bytes", fmt.Sprintf("longest session line read; a longer one is skipped with an ingest error (env BINDERY_MAX_LINE_BYTES; default %s, at least 256KiB)", formatSize(c.MaxLineBytes)), func(s string) error {
		n, err := parseSize(s)
		c.MaxLineBytes = n
		return err
	})
	fs.DurationVar(&c.Rescan, "rescan", c.Rescan, "how often to rescan the session folders in full (env BINDERY_RESCAN)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long in-flight requests may take to finish on shutdown (env BINDERY_SHUTDOWN_TIMEOUT)")
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env BINDERY_LOG_LEVEL)")
	fs.StringVar(&c.Models, "models", c.Models, "a JSON file overriding the model table: which models bind thinking and read whose blocks (env BINDERY_MODELS; default <state-dir>/models.json if it exists)")
	fs.Int64Var(&c.EventsMax, "events-max", c.EventsMax, "the event log keeps at most this many events (0: no count bound) (env BINDERY_EVENTS_MAX)")
	fs.DurationVar(&c.EventsMaxAge, "events-max-age", c.EventsMaxAge, "the event log keeps no event older than this (0: no age bound) (env BINDERY_EVENTS_MAX_AGE)")

	fs.IntVar(&c.MaxMessages, "max-messages", c.MaxMessages, "most messages in one compiled request; more answer 400 limit_exceeded (env BINDERY_MAX_MESSAGES)")
	fs.IntVar(&c.MaxID, "max-id", c.MaxID, "most bytes in a conversation, branch or compile id or a release path; longer answer 400 limit_exceeded (env BINDERY_MAX_ID)")
	fs.IntVar(&c.MaxPath, "max-path", c.MaxPath, "most bytes in a compile's sessionFile (env BINDERY_MAX_PATH)")
	sizeFlag(fs, &c.MaxSignature, "max-signature", "most bytes in a release's signature (env BINDERY_MAX_SIGNATURE)")
	sizeFlag(fs, &c.MinBodyRate, "min-body-rate", "bytes per second a request body must keep up after --body-grace; slower answers 408 body_timeout (env BINDERY_MIN_BODY_RATE)")
	fs.DurationVar(&c.BodyGrace, "body-grace", c.BodyGrace, "time a request body has before --min-body-rate applies (env BINDERY_BODY_GRACE)")
	fs.DurationVar(&c.HeaderTimeout, "header-timeout", c.HeaderTimeout, "time a client has to send a request's headers (env BINDERY_HEADER_TIMEOUT)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "an idle keep-alive connection is closed after this (env BINDERY_IDLE_TIMEOUT)")
	fs.IntVar(&c.AcceptedWindow, "accepted-window", c.AcceptedWindow, "accepted compiles a conversation remembers: a repeated accept within them answers 200 (repeated), beyond them 404 compile_forgotten (env BINDERY_ACCEPTED_WINDOW)")
	fs.IntVar(&c.FeedBuffer, "feed-buffer", c.FeedBuffer, "events a websocket subscriber may fall behind before it is dropped with a close reason (env BINDERY_FEED_BUFFER)")
	fs.StringVar(&c.Shared, "shared", c.Shared, "join a team's shared tier: a PostgreSQL DSN (env BINDERY_SHARED; README \"Sharing across machines\"; its password is never shown)")
	fs.StringVar(&c.Machine, "machine", c.Machine, "this machine's name in the shared tier (env BINDERY_MACHINE; default the host name)")
	fs.StringVar(&c.Person, "person", c.Person, "whose spend this machine's requests are in the team's report (env BINDERY_PERSON; default the OS user)")
	fs.DurationVar(&c.TeamScan, "team-scan", c.TeamScan, "how often the team report's facts are recomputed and shipped (env BINDERY_TEAM_SCAN)")
	fs.DurationVar(&c.SharedWait, "shared-wait", c.SharedWait, "how long a compile waits for the shared tier's stamps of blocks this machine has none for; past it they are stripped (env BINDERY_SHARED_WAIT)")
	fs.DurationVar(&c.FeedStall, "feed-stall", c.FeedStall, "how long one event write to a websocket subscriber may block before the connection is cut (env BINDERY_FEED_STALL)")
}

// DefaultMaxMessages bounds a compiled request's messages: the provider's
// own bound (api.ProviderMaxMessages).
const DefaultMaxMessages = api.ProviderMaxMessages

func sizeFlag(fs *flag.FlagSet, p *int64, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s; e.g. 64KiB (default %s)", usage, formatSize(*p)), func(s string) error {
		n, err := parseSize(s)
		*p = n
		return err
	})
}

// Resolve fills the derived paths and checks the settings.
func (c *Config) Resolve() error {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.AgentDir == "" {
		return errors.New("no agent directory: set --agent-dir, PI_CODING_AGENT_DIR or HOME")
	}
	if c.StateDir == "" {
		return errors.New("no state directory: set --state-dir")
	}
	var err error
	if c.AgentDir, err = filepath.Abs(c.AgentDir); err != nil {
		return err
	}
	if c.StateDir, err = filepath.Abs(c.StateDir); err != nil {
		return err
	}
	if c.Database == "" {
		c.Database = filepath.Join(c.StateDir, "bindery.db")
	}
	if c.Socket == "" {
		// The socket's fallback lives under the state dir, which a flag may
		// have moved: resolve it against the final one.
		state := c.StateDir
		getenv := c.Getenv
		c.Socket, err = api.DefaultSocket(func(k string) string {
			if k == "BINDERY_STATE_DIR" {
				return state
			}
			return getenv(k)
		})
		if err != nil {
			return err
		}
	}
	if err := c.loadModels(); err != nil {
		return err
	}
	if c.Database, err = filepath.Abs(c.Database); err != nil {
		return err
	}
	if c.Socket, err = filepath.Abs(c.Socket); err != nil {
		return err
	}
	if len(c.Socket) > maxSocketPath {
		return fmt.Errorf("socket path %s is %d bytes; Unix sockets allow at most %d: choose a shorter --socket", c.Socket, len(c.Socket), maxSocketPath)
	}
	if c.MaxBody < 1<<20 {
		return fmt.Errorf("--max-body %d is below 1MiB", c.MaxBody)
	}
	if c.MaxLineBytes < MinMaxLineBytes || c.MaxLineBytes > watcher.MaxLineLimit {
		return fmt.Errorf("--max-line-bytes %d is outside 256KiB..1GiB", c.MaxLineBytes)
	}
	if c.Rescan < 100*time.Millisecond {
		return fmt.Errorf("--rescan %s is below 100ms", c.Rescan)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("--shutdown-timeout must be positive")
	}
	if c.SharedWait <= 0 || c.SharedWait > 10*time.Second {
		return fmt.Errorf("--shared-wait %s is outside (0, 10s]: a compile waits that long at most", c.SharedWait)
	}
	if c.Machine == "" {
		if h, err := os.Hostname(); err == nil {
			c.Machine = h
		}
	}
	if len(c.Machine) == 0 || len(c.Machine) > 128 {
		return fmt.Errorf("--machine %q: want 1 to 128 bytes", c.Machine)
	}
	if c.TeamScan < 100*time.Millisecond || c.TeamScan > time.Hour {
		return fmt.Errorf("--team-scan %s is outside [100ms, 1h]", c.TeamScan)
	}
	if c.Person == "" {
		c.Person = osUser()
	}
	if len(c.Person) == 0 || len(c.Person) > 128 || strings.ContainsFunc(c.Person, unicode.IsControl) {
		return fmt.Errorf("--person %q: want 1 to 128 bytes, no control characters", c.Person)
	}
	for _, b := range []struct {
		flag string
		v    int64
	}{{"--max-messages", int64(c.MaxMessages)}, {"--max-id", int64(c.MaxID)}, {"--max-path", int64(c.MaxPath)},
		{"--max-signature", c.MaxSignature}, {"--min-body-rate", c.MinBodyRate}, {"--feed-buffer", int64(c.FeedBuffer)},
		{"--body-grace", int64(c.BodyGrace)}, {"--header-timeout", int64(c.HeaderTimeout)}, {"--idle-timeout", int64(c.IdleTimeout)},
		{"--feed-stall", int64(c.FeedStall)}, {"--accepted-window", int64(c.AcceptedWindow)}} {
		if b.v <= 0 {
			return fmt.Errorf("%s must be positive", b.flag)
		}
	}
	return nil
}

// DefaultMaxLineBytes bounds one session line: pi's largest lines are tool
// results and images, well below it. MinMaxLineBytes is the watcher's read
// chunk, below which the bound cannot be kept.
const (
	DefaultMaxLineBytes = 64 << 20
	MinMaxLineBytes     = 256 << 10
)

// maxSocketPath is sun_path's size less the terminating NUL: 108 bytes on
// Linux, 104 on macOS and the BSDs.
var maxSocketPath = map[bool]int{true: 107, false: 103}[runtime.GOOS == "linux"]

// SessionRoots are the folders to follow: <agent-dir>/sessions (one
// subfolder per project), pi's configured session folder if any, and the
// flat --session-dir folders.
func (c *Config) SessionRoots() []Root {
	roots := []Root{{Dir: filepath.Join(c.AgentDir, "sessions"), Recursive: true}}
	home := c.Getenv("HOME")
	if d := c.Getenv("PI_CODING_AGENT_SESSION_DIR"); d != "" {
		roots = append(roots, Root{Dir: expandHome(d, home), Recursive: true})
	}
	if d := piSettingsSessionDir(c.AgentDir, home); d != "" {
		roots = append(roots, Root{Dir: d, Recursive: true})
	}
	for _, d := range c.SessionDirs {
		roots = append(roots, Root{Dir: expandHome(d, home)})
	}
	// Absolute, cleaned, no duplicates (the first, recursive one wins).
	seen := map[string]bool{}
	out := roots[:0]
	for _, r := range roots {
		if abs, err := filepath.Abs(r.Dir); err == nil {
			r.Dir = abs
		}
		if !seen[r.Dir] {
			seen[r.Dir] = true
			out = append(out, r)
		}
	}
	return out
}

// Root is one session folder.
type Root struct {
	Dir       string
	Recursive bool
}

// piSettingsSessionDir reads "sessionDir" from pi's settings.json; a
// missing or unreadable file means none.
func piSettingsSessionDir(agentDir, home string) string {
	b, err := os.ReadFile(filepath.Join(agentDir, "settings.json"))
	if err != nil {
		return ""
	}
	var s struct {
		SessionDir string `json:"sessionDir"`
	}
	if json.Unmarshal(b, &s) != nil || s.SessionDir == "" {
		return ""
	}
	d := expandHome(s.SessionDir, home)
	if !filepath.IsAbs(d) {
		d = filepath.Join(agentDir, d)
	}
	return d
}

// expandHome expands a leading ~ as pi does for PI_CODING_AGENT_DIR.
func expandHome(p, home string) string {
	if home == "" {
		return p
	}
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}

// parseSize reads "67108864", "64MiB", "64M" (binary), "64MB" (decimal).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// loadModels reads the model-table override: the named file, else
// <state-dir>/models.json when it exists.
func (c *Config) loadModels() error {
	path, explicit := c.Models, c.Models != ""
	if !explicit {
		path = filepath.Join(c.StateDir, "models.json")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("model table: %w", err)
	}
	t, err := binding.ParseModelTable(data)
	if err != nil {
		return fmt.Errorf("model table %s: %w", path, err)
	}
	c.Models, c.ModelTable = path, t
	return nil
}
