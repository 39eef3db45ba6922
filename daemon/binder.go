package daemon

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// The Binder's jobs, a file each: the conversations it mirrors and their
// locks (mirror.go), what a compile knows before it decides (facts.go),
// compile (compile.go), accept (accept.go), release (release.go), a reply
// seen only in the session file (attribute.go), and the conversation view
// (view.go). What it decides is binding's; this package
// gathers the facts, commits the outcome and publishes the events.

// Binder wires binding's pure decision to the database and the feed: it
// implements api.Binder. The decision work of a compile (parsing,
// hashing, deciding, rewriting) runs outside every shared lock, so
// compiles on different conversations run in parallel; one conversation's
// calls are serialized by its own lock, and only the commit is serialized
// across conversations (by the journal's single writer).
type Binder struct {
	j      *Journal
	db     *db.DB
	models *binding.ModelTable
	keep   binding.Retention
	follow func(ctx context.Context, path string) error
	log    *slog.Logger

	maxMessages int

	seqMu     sync.Mutex // guards loading seq's high-water
	seqLoaded atomic.Bool
	seq       atomic.Int64

	mu    sync.Mutex
	convs map[string]*conv
	byID  map[string]string // compile id -> conversation, for ids compiled since start

	parsers sync.Pool
	// knownTaken counts the messages parses took from a base's parse
	// (binding.KnownPrefix) instead of reading them again; tests read it.
	knownTaken atomic.Int64
	memos      memoSet
	bases      baseStore // compile by reference (bases.go)
	maxBody    int

	trees *treeCache // session trees for Conversation (the daemon shares GetSession's)

	// readThrough asks the shared tier for stamps this machine has none
	// of (read_through.go); nil: this machine alone.
	readThrough *readThrough
	// shared orders releases, compiles and accepts across machines
	// (shared_facts.go); nil: this machine alone.
	shared *sharedFacts
	// tag is this machine's tag in the compile ids it mints (compileid.go).
	tag string
	// stamped, when set, is told after an accept recorded stamps (the
	// shared tier's shipper: shipper.poke).
	stamped func()

	// salt is the store's account salt once read; aliases the account
	// aliases, replaced whole under aliasMu (account.go)
	salt    atomic.Pointer[[]byte]
	aliases atomic.Pointer[map[string]string]
	aliasMu sync.Mutex

	// beforePathRead, when set, runs just before releaseTree reads the
	// leaf's path, after branchPath found the leaf: tests change the
	// session file in that window. nil outside tests.
	beforePathRead func()
}

// BinderConfig configures a Binder. Zero values are the defaults.
type BinderConfig struct {
	Models   *binding.ModelTable // nil: binding.DefaultModelTable()
	Compiles binding.Retention   // zero bounds: binding.DefaultRetention's
	// Follow asks the watcher to follow a session file a compile named
	// (sessionFile); nil ignores it.
	Follow func(ctx context.Context, path string) error
	Logger *slog.Logger
	// MaxMessages bounds a compiled request's messages (0:
	// DefaultMaxMessages).
	MaxMessages int
	// MaxBody bounds the whole request a compile by reference rebuilds, as
	// --max-body bounds one sent whole (0: api.DefaultMaxBody).
	MaxBody int64
	// Machine names this machine: the ids it mints carry its tag
	// (compileid.go), so they mean one compile across a shared tier.
	Machine string
}

// NewBinder returns a Binder writing through j.
func NewBinder(j *Journal, cfg BinderConfig) *Binder {
	if cfg.Models == nil {
		cfg.Models = binding.DefaultModelTable()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = DefaultMaxMessages
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = api.DefaultMaxBody
	}
	return &Binder{j: j, db: j.DB, models: cfg.Models, keep: cfg.Compiles.Normalized(), follow: cfg.Follow, log: cfg.Logger, maxMessages: cfg.MaxMessages, maxBody: int(cfg.MaxBody),
		convs: map[string]*conv{}, byID: map[string]string{}, trees: &treeCache{}, tag: machineTag(cfg.Machine)}
}

// maxConversations bounds the conversations kept in memory; the state of
// an evicted one is reloaded from the database on its next call.
const maxConversations = 4096

// maxRememberedIDs bounds the in-memory compile id -> conversation index.
const maxRememberedIDs = 1 << 16

// Compile ids say what kind of compile they name, so the answer to an
// accept does not depend on memory that a restart loses: a dry run's
// accept is 409 and an unbound request's accept a no-op, before and after
// a restart.
const (
	idReal    = "c_"
	idDryRun  = "d_"
	idUnbound = "u_"
)

// nextSeq loads the high-water on first use. A failed load (the first
// caller's context ended) is not remembered: the next call loads again.
func (b *Binder) nextSeq(ctx context.Context) (int64, error) {
	if _, err := b.seqHighWater(ctx); err != nil {
		return 0, err
	}
	return b.seq.Add(1), nil
}

// seqHighWater is the last compile seq assigned, loaded on first use.
func (b *Binder) seqHighWater(ctx context.Context) (int64, error) {
	if !b.seqLoaded.Load() {
		b.seqMu.Lock()
		if !b.seqLoaded.Load() {
			n, err := b.db.LastCompileSeq(ctx)
			if err != nil {
				b.seqMu.Unlock()
				return 0, err
			}
			b.seq.Store(n)
			b.seqLoaded.Store(true)
		}
		b.seqMu.Unlock()
	}
	return b.seq.Load(), nil
}

// lookup finds the conversation of a compile id: from memory, else from
// the database (a compile made before a restart).
func (b *Binder) lookup(ctx context.Context, id string) (string, error) {
	b.mu.Lock()
	conv, ok := b.byID[id]
	b.mu.Unlock()
	if ok {
		return conv, nil
	}
	row, found, err := b.db.Compile(ctx, id)
	if err != nil {
		return "", err
	}
	if !found {
		return "", b.unknownCompile(ctx, id)
	}
	return row.Conversation, nil
}

var _ api.Binder = (*Binder)(nil)
