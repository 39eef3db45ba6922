package daemon

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

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
	keep   db.CompileRetention
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
	memos   memoSet

	trees *treeCache // session trees for Conversation (the daemon shares GetSession's)
}

// BinderConfig configures a Binder. Zero values are the defaults.
type BinderConfig struct {
	Models   *binding.ModelTable // nil: binding.DefaultModelTable()
	Compiles db.CompileRetention // zero: db.DefaultCompileRetention
	// Follow asks the watcher to follow a session file a compile named
	// (sessionFile); nil ignores it.
	Follow func(ctx context.Context, path string) error
	Logger *slog.Logger
	// MaxMessages bounds a compiled request's messages (0:
	// DefaultMaxMessages).
	MaxMessages int
}

// NewBinder returns a Binder writing through j.
func NewBinder(j *Journal, cfg BinderConfig) *Binder {
	if cfg.Models == nil {
		cfg.Models = binding.DefaultModelTable()
	}
	if cfg.Compiles.PerBranch == 0 {
		cfg.Compiles = db.DefaultCompileRetention
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = DefaultMaxMessages
	}
	return &Binder{j: j, db: j.DB, models: cfg.Models, keep: cfg.Compiles, follow: cfg.Follow, log: cfg.Logger, maxMessages: cfg.MaxMessages,
		convs: map[string]*conv{}, byID: map[string]string{}, trees: &treeCache{}}
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

// conv is one conversation's state in memory: a mirror of its rows,
// loaded lazily from the database on first use.
type conv struct {
	mu       convLock
	id       string
	loaded   bool
	stored   bool // its row exists
	row      db.ConversationRow
	branches map[string]*db.BranchRow
	compiles map[string]*compileEntry
	releases []db.ReleaseRow
	followed bool
}

type compileEntry struct {
	seq      int64
	branch   string
	accepted bool
	stamped  int
	released int
	rec      *binding.CompileRecord // nil once forgotten (accepted compiles only)
}

func (b *Binder) conv(id string) *conv {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.convs[id]
	if ok {
		return c
	}
	if len(b.convs) >= maxConversations {
		for k, v := range b.convs {
			if v.mu.TryLock() {
				delete(b.convs, k)
				v.mu.Unlock()
				if len(b.convs) < maxConversations {
					break
				}
			}
		}
	}
	c = &conv{id: id, mu: newConvLock()}
	b.convs[id] = c
	return c
}

// lock locks the conversation and loads it if needed. A conversation
// evicted while the caller waited is replaced by a fresh one.
func (b *Binder) lock(ctx context.Context, id string) (*conv, error) {
	for {
		c := b.conv(id)
		if err := c.mu.Lock(ctx, id); err != nil {
			return nil, err
		}
		b.mu.Lock()
		current := b.convs[id] == c
		b.mu.Unlock()
		if !current {
			c.mu.Unlock()
			continue
		}
		if !c.loaded {
			if err := b.load(ctx, c); err != nil {
				c.mu.Unlock()
				return nil, err
			}
		}
		return c, nil
	}
}

func (b *Binder) load(ctx context.Context, c *conv) error {
	st, err := b.db.LoadConversation(ctx, c.id)
	if err != nil {
		return err
	}
	c.stored = st.Found
	c.row = st.Conversation
	c.branches = map[string]*db.BranchRow{}
	for i := range st.Branches {
		br := st.Branches[i]
		c.branches[br.Branch] = &br
	}
	c.compiles = map[string]*compileEntry{}
	for _, r := range st.Compiles {
		c.compiles[r.ID] = &compileEntry{seq: r.Seq, branch: r.Branch, accepted: r.AcceptedMs != 0,
			stamped: r.Stamped, released: r.Released, rec: r.Record}
	}
	c.releases = st.Releases
	c.loaded = true
	return nil
}

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

// pathInfo is what a compile knows of a pi branch.
type pathInfo struct {
	pi bool                // the conversation is a pi session bindery has ingested
	at []binding.PathEntry // the compile's leaf path, root first (nil when the leaf is not ingested)
	on map[string]bool     // ids on at
	// proven: the leaf is not ingested; at is the path of the deepest
	// ancestor the request proves, so compiles off it may still be on the
	// branch (made at leaves after it)
	proven bool
	memo   map[string]pathMemo // other leaves' paths, looked up once per call
	// forkedFrom: for a conversation without a session tree, the branches
	// (of the same conversation) this one was forked from, nearest first.
	// Their compiles are this branch's history before the fork.
	forkedFrom map[string]bool
}

type pathMemo struct {
	path  []binding.PathEntry
	found bool
}

func toBindingPath(p []db.PathEntry) []binding.PathEntry {
	out := make([]binding.PathEntry, len(p))
	for i, e := range p {
		out[i] = binding.PathEntry{ID: e.ID, Seq: e.Seq}
	}
	return out
}

func (b *Binder) branchPath(ctx context.Context, conversation, branch string) (*pathInfo, error) {
	pi := &pathInfo{memo: map[string]pathMemo{}}
	if branch == "" {
		return pi, nil
	}
	p, found, err := b.db.SessionPath(ctx, conversation, branch)
	if err != nil {
		return nil, err
	}
	if found {
		pi.pi = true
		pi.at = toBindingPath(p)
		pi.on = make(map[string]bool, len(p))
		for _, e := range p {
			pi.on[e.ID] = true
		}
		return pi, nil
	}
	// The leaf is not ingested yet (pi writes the reply after the request),
	// or this is not a pi session: a session bindery knows makes it pi.
	if _, err := b.db.Session(ctx, conversation); err == nil {
		pi.pi = true
	} else if !errors.Is(err, db.ErrNotFound) {
		return nil, err
	}
	return pi, nil
}

// provenAncestor handles a compile at a pi leaf bindery has not ingested
// yet (pi writes the entry and sends the request at about the same time):
// the branch is taken to descend from the deepest entry the request proves
// it contains, the entry holding its latest thinking block that the
// session file already shows.
func (b *Binder) provenAncestor(ctx context.Context, pi *pathInfo, conversation string, keys []binding.Digest) error {
	for i := len(keys) - 1; i >= 0; i-- {
		entries, err := b.db.BlockEntries(ctx, conversation, keys[i:i+1])
		if err != nil {
			return err
		}
		entry, ok := entries[keys[i]]
		if !ok {
			continue
		}
		p, found, err := b.db.SessionPath(ctx, conversation, entry)
		if err != nil {
			return err
		}
		if found {
			pi.at = toBindingPath(p)
			pi.on = make(map[string]bool, len(p))
			for _, e := range p {
				pi.on[e.ID] = true
			}
			pi.proven = true
		}
		return nil
	}
	return nil
}

// forkedFrom lists the branches of c that call's branch was forked from, by
// the parent recorded when each branch was first compiled (or, for a branch
// compiled now for the first time, the call's own parent). A host without a
// tree (pi without a session file, any other host naming forks with parent)
// moves to a new branch name at each fork, and a reply whose accept was lost
// was answered to a compile made on the branch before the move: attribution
// by prefix must be able to find it there.
func (c *conv) forkedFrom(call *api.CompileCall) map[string]bool {
	var next string
	if br := c.branches[call.Branch]; br != nil {
		if br.ParentConversation == c.id {
			next = br.ParentBranch
		}
	} else if call.Parent != nil && (call.Parent.Conversation == c.id || call.Parent.Conversation == "") {
		next = call.Parent.Branch
	}
	var out map[string]bool
	for depth := 0; next != "" && next != call.Branch && !out[next] && depth < 64; depth++ {
		if out == nil {
			out = map[string]bool{}
		}
		out[next] = true
		br := c.branches[next]
		if br == nil || br.ParentConversation != c.id {
			break
		}
		next = br.ParentBranch
	}
	return out
}

func (b *Binder) leafPath(ctx context.Context, pi *pathInfo, conversation, leaf string) ([]binding.PathEntry, bool, error) {
	if m, ok := pi.memo[leaf]; ok {
		return m.path, m.found, nil
	}
	p, found, err := b.db.SessionPath(ctx, conversation, leaf)
	if err != nil {
		return nil, false, err
	}
	m := pathMemo{path: toBindingPath(p), found: found}
	pi.memo[leaf] = m
	return m.path, m.found, nil
}

// onBranch reports whether a compile made at branch other belongs to the
// branch being compiled: the same name, or for pi an entry on its path. A
// pi leaf bindery has not ingested yet counts every compile of the
// conversation: attribution matches by message chain, so a compile of
// another branch can only qualify if it sent exactly the same messages.
func (pi *pathInfo) onBranch(branch, other string) bool {
	if other == branch {
		return true
	}
	if !pi.pi {
		return pi.forkedFrom[other]
	}
	if pi.at == nil || pi.proven {
		return true
	}
	return pi.on[other]
}

// Compile implements api.Binder.
func (b *Binder) Compile(ctx context.Context, call *api.CompileCall) (*api.CompileAnswer, error) {
	req, err := b.parse(ctx, call.Conversation, call.Request)
	switch {
	case errors.Is(err, binding.ErrCanceled):
		return nil, fmt.Errorf("compile of conversation %q: %w", call.Conversation, context.Cause(ctx))
	case errors.Is(err, binding.ErrTooManyMessages):
		return nil, api.Errorf(api.CodeLimitExceeded, "compile: request: %v (--max-messages)", err)
	case err != nil:
		return nil, api.Errorf(api.CodeBadRequest, "compile: request: %v", err)
	}
	if !req.Bound {
		// Not a Messages body: an empty plan, nothing to remember.
		if req.NotMessages != "" {
			b.log.Debug("compile: another API's body passed through", "conversation", call.Conversation, "why", req.NotMessages)
		}
		ans := &api.CompileAnswer{CompilePlan: api.CompilePlan{CompileID: newCompileID(idUnbound, 0), Strips: []api.Strip{},
			DroppedMessages: []string{}, Cache: api.CacheChange{Cause: binding.CauseNone}, NotMessages: req.NotMessages}}
		if call.Return != api.ReturnPlan {
			ans.Request = call.Request
		}
		return ans, nil
	}

	seq, err := b.nextSeq(ctx)
	if err != nil {
		return nil, err
	}
	id := newCompileID(idReal, seq)
	if call.DryRun {
		id = newCompileID(idDryRun, seq)
	}

	compiled, err := func() (*binding.Compiled, error) {
		c, err := b.lock(ctx, call.Conversation)
		if err != nil {
			return nil, err
		}
		defer c.mu.Unlock() // a panic (net/http recovers it) must not keep the conversation locked
		return b.compileLocked(ctx, c, call, req, id, seq)
	}()
	if err != nil {
		return nil, err
	}
	if !call.DryRun {
		b.mu.Lock()
		if len(b.byID) >= maxRememberedIDs {
			clear(b.byID) // a lookup falls back to the database
		}
		b.byID[id] = call.Conversation
		b.mu.Unlock()
	}
	return b.answer(call, req, compiled), nil
}

func (b *Binder) compileLocked(ctx context.Context, c *conv, call *api.CompileCall, req *binding.Request, id string, seq int64) (*binding.Compiled, error) {
	if call.SessionFile != "" && !c.followed && b.follow != nil {
		if err := b.follow(ctx, call.SessionFile); err != nil {
			b.log.Warn("compile: cannot follow the session file", "file", call.SessionFile, "err", err)
		} else {
			c.followed = true
		}
	}
	pi, err := b.branchPath(ctx, call.Conversation, call.Branch)
	if err != nil {
		return nil, err
	}
	if !pi.pi {
		pi.forkedFrom = c.forkedFrom(call)
	}
	keys := binding.StampKeys(req)
	if pi.pi && pi.at == nil {
		if err := b.provenAncestor(ctx, pi, call.Conversation, keys); err != nil {
			return nil, err
		}
	}
	stamps, err := b.stamps(ctx, keys)
	if err != nil {
		return nil, err
	}
	released, err := b.released(ctx, c, pi, call, keys)
	if err != nil {
		return nil, err
	}
	var remembered []*binding.CompileRecord
	var owner *binding.CompileRecord
	for _, e := range c.compiles {
		if e.rec == nil || !pi.onBranch(call.Branch, e.branch) {
			continue
		}
		remembered = append(remembered, e.rec)
		if e.accepted && (owner == nil || e.seq > owner.Seq) {
			owner = e.rec
		}
	}
	engaged, err := b.engaged(ctx, c, call)
	if err != nil {
		return nil, err
	}
	var compactions map[binding.Digest]binding.Compaction
	if ck := binding.CompactionKeys(req); len(ck) > 0 {
		if compactions, err = b.db.Compactions(ctx, ck); err != nil {
			return nil, err
		}
	}
	compiled, err := binding.Compile(binding.CompileInput{
		ID: id, Conversation: call.Conversation, Branch: call.Branch, Seq: seq,
		Request: req, BindsThinking: call.BindsThinking, DryRun: call.DryRun, Engaged: engaged,
		Stamps: stamps, Released: released, Remembered: remembered, Owner: owner, Models: b.models,
		Compactions: compactions,
	})
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "compile: %v", err)
	}
	if call.DryRun || compiled.Persist.Record == nil {
		return compiled, nil
	}
	rec := compiled.Persist.Record
	if ctx.Err() != nil {
		// The caller is gone: nobody will send this request, so nothing
		// of it is recorded (the host compiles again when it retries).
		return nil, fmt.Errorf("compile of conversation %q abandoned: %w", call.Conversation, context.Cause(ctx))
	}
	if err := b.persistCompile(ctx, c, call, compiled, rec); err != nil {
		return nil, err
	}
	return compiled, nil
}

func (b *Binder) stamps(ctx context.Context, keys []binding.Digest) (map[binding.Digest]binding.Stamp, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := b.db.Stamps(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[binding.Digest]binding.Stamp, len(rows))
	for k, r := range rows {
		out[k] = r.Stamp
	}
	return out, nil
}

// engaged: the conversation's own engagement, or its parent's (a fork).
func (b *Binder) engaged(ctx context.Context, c *conv, call *api.CompileCall) (bool, error) {
	if c.row.EngagedCompile != "" {
		return true, nil
	}
	parent := c.row.ParentConversation
	if !c.stored {
		p, err := b.parentOf(ctx, call)
		if err != nil {
			return false, err
		}
		if p != nil {
			parent = p.Conversation
		}
	}
	if parent == "" || parent == c.id {
		return false, nil
	}
	pst, err := b.db.LoadConversation(ctx, parent)
	if err != nil {
		return false, err
	}
	return pst.Conversation.EngagedCompile != "", nil
}

// parentOf is where a new conversation was made from: the host's parent,
// or for a pi session file the session its header names.
func (b *Binder) parentOf(ctx context.Context, call *api.CompileCall) (*api.BranchRef, error) {
	if call.Parent != nil && call.Parent.Conversation != "" && call.Parent.Conversation != call.Conversation {
		return call.Parent, nil
	}
	s, err := b.db.Session(ctx, call.Conversation)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s.ParentSession == "" {
		return nil, nil
	}
	// pi's header names the parent's file (pi-sessions.md); an id is
	// taken as it is (v1's branchedFrom)
	parent := s.ParentSession
	if strings.ContainsRune(parent, '/') {
		id, err := b.sessionAtPath(ctx, parent)
		if err != nil || id == "" {
			return nil, err
		}
		parent = id
	}
	if parent == call.Conversation {
		return nil, nil
	}
	return &api.BranchRef{Conversation: parent}, nil
}

// sessionAtPath is the id of the session in the file a pi header's
// parentSession names: the session ingested at that path, else, when the
// path is not known (the agent dir moved or is reached through a symlink,
// the file was renamed), the id pi put in the file's name if bindery knows
// a session with that id. "" when neither finds one.
func (b *Binder) sessionAtPath(ctx context.Context, path string) (string, error) {
	id, found, err := b.db.SessionIDByPath(ctx, path)
	if err != nil || found {
		return id, err
	}
	id, ok := piFileSessionID(path)
	if !ok {
		return "", nil
	}
	if _, err := b.db.Session(ctx, id); errors.Is(err, db.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	return id, nil
}

// piFileSessionID is the session id in a pi session file's name,
// <ISO timestamp with ':' and '.' as '-'>_<sessionId>.jsonl
// (pi-sessions.md §1). The timestamp holds no '_', so the id is all after
// the first one: a UUID, or a caller-provided id matching [A-Za-z0-9._-].
func piFileSessionID(path string) (string, bool) {
	name, ok := strings.CutSuffix(filepath.Base(path), ".jsonl")
	if !ok {
		return "", false
	}
	ts, id, ok := strings.Cut(name, "_")
	if !ok || !strings.HasSuffix(ts, "Z") || id == "" {
		return "", false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return "", false
		}
	}
	return id, true
}

// released returns the keys of the request released on the compile's
// branch: its own releases, signature releases of the conversation, pi
// releases that reach it through the session tree, and those inherited
// from a parent branch or conversation as it was at the fork.
func (b *Binder) released(ctx context.Context, c *conv, pi *pathInfo, call *api.CompileCall, keys []binding.Digest) (map[binding.Digest]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	inReq := make(map[binding.Digest]bool, len(keys))
	for _, k := range keys {
		inReq[k] = true
	}
	out := map[binding.Digest]bool{}
	var piRels []db.ReleaseRow
	for _, r := range c.releases {
		if !inReq[r.Key] || out[r.Key] {
			continue
		}
		switch {
		case r.Branch == call.Branch || r.Branch == signatureBranch:
			out[r.Key] = true
		case pi.pi:
			piRels = append(piRels, r)
		}
	}
	if len(piRels) > 0 {
		if pi.at == nil {
			// The leaf is not ingested: its path is unknown, so every
			// release of the session may reach it. Stripping a block the
			// provider would keep costs retention; keeping one it refuses
			// costs the request.
			for _, r := range piRels {
				out[r.Key] = true
			}
		} else {
			var need []binding.Digest
			for _, r := range piRels {
				need = append(need, r.Key)
			}
			entries, err := b.db.BlockEntries(ctx, c.id, need)
			if err != nil {
				return nil, err
			}
			for _, r := range piRels {
				if out[r.Key] {
					continue
				}
				madeOn, found, err := b.leafPath(ctx, pi, c.id, r.Branch)
				if err != nil {
					return nil, err
				}
				if !found {
					out[r.Key] = true // made at a leaf never ingested: conservative
					continue
				}
				entry, ok := entries[r.Key]
				if !ok {
					// The block's entry is unknown: take it as on the
					// release's path, so only the fork rule decides.
					entry = madeOn[len(madeOn)-1].ID
				}
				if binding.ReleaseReaches(madeOn, entry, r.Seq, pi.at) {
					out[r.Key] = true
				}
			}
		}
	}
	// Inherited: the branch's parent (a host's fork), then the
	// conversation's parent (a fork into a new conversation or session).
	br := c.branches[call.Branch]
	var parents []parentRef
	switch {
	case br != nil && br.ParentConversation != "":
		parents = append(parents, parentRef{br.ParentConversation, br.ParentBranch, br.ParentRelease})
	case br == nil && call.Parent != nil && (call.Parent.Conversation == c.id || call.Parent.Conversation == "") && call.Parent.Branch != call.Branch:
		parents = append(parents, parentRef{c.id, call.Parent.Branch, -1})
	}
	if c.stored && c.row.ParentConversation != "" {
		parents = append(parents, parentRef{c.row.ParentConversation, c.row.ParentBranch, c.row.ParentRelease})
	} else if !c.stored {
		p, err := b.parentOf(ctx, call)
		if err != nil {
			return nil, err
		}
		if p != nil {
			parents = append(parents, parentRef{p.Conversation, p.Branch, -1})
		}
	}
	for depth := 0; len(parents) > 0 && depth < 16; depth++ {
		p := parents[0]
		parents = parents[1:]
		var rels []db.ReleaseRow
		var st *db.ConversationState
		if p.conversation == c.id {
			rels = c.releases
		} else {
			var err error
			if st, err = b.db.LoadConversation(ctx, p.conversation); err != nil {
				return nil, err
			}
			rels = st.Releases
		}
		var bind []binding.Release
		for _, r := range rels {
			if !inReq[r.Key] || (p.branch != "" && r.Branch != p.branch && r.Branch != signatureBranch) {
				continue
			}
			rel := r.Release
			rel.Seq = r.ID // forks named with parent are ordered by release id
			bind = append(bind, rel)
		}
		upTo := p.upTo
		if upTo < 0 {
			upTo = 1<<62 - 1 // a fork made now inherits everything so far
		}
		for _, r := range binding.InheritedReleases(bind, upTo) {
			out[r.Key] = true
		}
		if st != nil && st.Conversation.ParentConversation != "" {
			parents = append(parents, parentRef{st.Conversation.ParentConversation, st.Conversation.ParentBranch, min(upTo, st.Conversation.ParentRelease)})
		}
	}
	return out, nil
}

type parentRef struct {
	conversation, branch string
	upTo                 int64 // releases.id high-water; -1: now
}

// signatureBranch scopes a release by signature to every branch.
const signatureBranch = "*"

func (b *Binder) persistCompile(ctx context.Context, c *conv, call *api.CompileCall, compiled *binding.Compiled, rec *binding.CompileRecord) error {
	now := time.Now().UnixMilli()
	var newConv *db.ConversationRow
	var newBranch *db.BranchRow
	var stampRows []db.StampRow
	owner := ""
	if br := c.branches[rec.Branch]; br != nil {
		owner = br.Owner
	}
	nullRecords, forget := b.retention(c, rec.ID, compileEntry{seq: rec.Seq, branch: rec.Branch, rec: rec}, owner)
	err := b.j.Write(ctx, func(ctx context.Context, tx *sql.Tx, emit Emit) error {
		newConv, newBranch, stampRows = nil, nil, nil
		lastRel := int64(-1)
		lastRelease := func() (int64, error) {
			if lastRel < 0 {
				n, err := db.LastReleaseID(ctx, tx)
				if err != nil {
					return 0, err
				}
				lastRel = n
			}
			return lastRel, nil
		}
		if !c.stored || (call.SessionFile != "" && c.row.SessionFile == "") {
			row := c.row
			row.ID, row.CreatedMs = c.id, now
			if call.SessionFile != "" {
				row.SessionFile = call.SessionFile
			}
			if !c.stored {
				p, err := b.parentOf(ctx, call)
				if err != nil {
					return err
				}
				if p != nil {
					n, err := lastRelease()
					if err != nil {
						return err
					}
					row.ParentConversation, row.ParentBranch, row.ParentRelease = p.Conversation, p.Branch, n
					pst, err := b.db.LoadConversation(ctx, p.Conversation)
					if err != nil {
						return err
					}
					if pst.Conversation.EngagedCompile != "" {
						row.EngagedCompile, row.EngagedMs = pst.Conversation.EngagedCompile, now
						if err := emit(api.EventEngage, c.id, map[string]any{"compileId": pst.Conversation.EngagedCompile,
							"branch": call.Branch, "parent": p}); err != nil {
							return err
						}
					}
				}
			}
			if err := db.UpsertConversation(ctx, tx, row); err != nil {
				return err
			}
			newConv = &row
		}
		if c.branches[call.Branch] == nil {
			br := db.BranchRow{Conversation: c.id, Branch: call.Branch, CreatedMs: now}
			if call.Parent != nil && (call.Parent.Conversation == c.id || call.Parent.Conversation == "") && call.Parent.Branch != call.Branch {
				n, err := lastRelease()
				if err != nil {
					return err
				}
				br.ParentConversation, br.ParentBranch, br.ParentRelease = c.id, call.Parent.Branch, n
			}
			if err := db.UpsertBranch(ctx, tx, br); err != nil {
				return err
			}
			newBranch = &br
		}
		if err := db.InsertCompile(ctx, tx, rec, now); err != nil {
			return err
		}
		if err := db.ForgetCompiles(ctx, tx, nullRecords, forget); err != nil {
			return err
		}
		var err error
		for _, s := range compiled.Persist.Stamps {
			stampRows = append(stampRows, db.StampRow{Stamp: s, Source: "prefix", Conversation: c.id, Branch: call.Branch, Compile: rec.ID, CreatedMs: now})
		}
		if stampRows, err = db.InsertStamps(ctx, tx, stampRows); err != nil {
			return err
		}
		if _, err := linkStamps(ctx, tx, c.id, stampRows); err != nil {
			return err
		}
		strips := stripsOf(compiled)
		fields := map[string]any{"compileId": rec.ID, "branch": call.Branch, "engaged": compiled.Engaged, "binds": compiled.Binds,
			"thinkingStripped": len(strips), "thinkingKept": len(compiled.Kept), "droppedMessages": droppedOf(compiled), "cache": cacheOf(compiled), "model": rec.Model}
		if len(strips) > 0 {
			fields["strips"] = strips
		}
		if compiled.FirstAfterEngagement {
			fields["firstAfterEngagement"] = true
		}
		if len(stampRows) > 0 {
			fields["stamped"] = len(stampRows)
		}
		if err := emit(api.EventCompile, c.id, fields); err != nil {
			return err
		}
		for _, s := range strips {
			if err := emit(api.EventStrip, c.id, map[string]any{"compileId": rec.ID, "branch": call.Branch,
				"path": s.Path, "reason": s.Reason, "tokens": s.Tokens}); err != nil {
				return err
			}
		}
		for _, sk := range compiled.Skipped {
			if err := emit(api.EventStampSkipped, c.id, map[string]any{"compileId": rec.ID, "branch": call.Branch,
				"message": binding.MessagePath(sk.Message), "compiles": sk.Compiles,
				"reason": "two remembered compiles qualify with different prefixes and no accept said which one the reply answered"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if newConv != nil {
		c.row, c.stored = *newConv, true
	}
	if newBranch != nil {
		c.branches[newBranch.Branch] = newBranch
	}
	c.compiles[rec.ID] = &compileEntry{seq: rec.Seq, branch: rec.Branch, rec: rec}
	c.applyRetention(nullRecords, forget)
	return nil
}

func linkStamps(ctx context.Context, tx *sql.Tx, conversation string, rows []db.StampRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	keys := make([]binding.Digest, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return db.LinkStampsInSession(ctx, tx, conversation, keys)
}

func stripsOf(c *binding.Compiled) []api.Strip {
	out := make([]api.Strip, len(c.Strips))
	for i, s := range c.Strips {
		out[i] = api.Strip{Path: s.Pos.Path(), Reason: string(s.Reason), Tokens: s.Tokens}
	}
	return out
}

func droppedOf(c *binding.Compiled) []string {
	out := make([]string, len(c.Dropped))
	for i, m := range c.Dropped {
		out[i] = binding.MessagePath(m)
	}
	return out
}

func cacheOf(c *binding.Compiled) api.CacheChange {
	cause := c.Cache.Cause
	if cause == "" {
		cause = binding.CauseNone
	}
	return api.CacheChange{FirstChange: c.Cache.Path, Cause: cause}
}

func (b *Binder) answer(call *api.CompileCall, req *binding.Request, c *binding.Compiled) *api.CompileAnswer {
	ans := &api.CompileAnswer{CompilePlan: api.CompilePlan{
		CompileID: c.ID, Bound: c.Bound, Engaged: c.Engaged, DryRun: call.DryRun,
		ThinkingStripped: len(c.Strips), ThinkingKept: len(c.Kept), Strips: stripsOf(c), DroppedMessages: droppedOf(c), Cache: cacheOf(c),
	}}
	if call.Return == api.ReturnPlan {
		return ans
	}
	if len(c.Strips) == 0 && len(c.Dropped) == 0 {
		ans.Request = call.Request
		return ans
	}
	strip := make(map[binding.Pos]bool, len(c.Strips))
	for _, s := range c.Strips {
		strip[s.Pos] = true
	}
	drop := make(map[int]bool, len(c.Dropped))
	for _, m := range c.Dropped {
		drop[m] = true
	}
	ans.Request = binding.Rewrite(call.Request, req,
		func(m, blk int) bool { return strip[binding.Pos{Message: m, Block: blk}] },
		func(m int) bool { return drop[m] })
	return ans
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

// Accept implements api.Binder.
func (b *Binder) Accept(ctx context.Context, call *api.AcceptCall) (*api.AcceptAnswer, error) {
	switch {
	case strings.HasPrefix(call.CompileID, idDryRun):
		return nil, api.Errorf(api.CodeDryRunCompile, "compile %q was a dry run: it cannot be accepted", call.CompileID)
	case strings.HasPrefix(call.CompileID, idUnbound):
		// Not a Messages request: nothing was bound, nothing to record.
		return &api.AcceptAnswer{Accepted: true}, nil
	}
	convID, err := b.lookup(ctx, call.CompileID)
	if err != nil {
		return nil, err
	}
	c, err := b.lock(ctx, convID)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	e := c.compiles[call.CompileID]
	if e == nil || (e.rec == nil && !e.accepted) {
		return nil, b.unknownCompile(ctx, call.CompileID)
	}
	if e.accepted {
		return &api.AcceptAnswer{Accepted: true, Stamped: e.stamped, Released: e.released, Repeated: true}, nil
	}
	var owner *binding.CompileRecord
	if br := c.branches[e.branch]; br != nil && br.Owner != "" {
		if oe := c.compiles[br.Owner]; oe != nil {
			owner = oe.rec
		}
	}
	trs := make([]binding.InputTransformation, len(call.InputTransformations))
	for i, t := range call.InputTransformations {
		trs[i] = binding.InputTransformation{Type: t.Type, Path: t.Path, Reason: t.Reason}
	}
	out, err := binding.Accept(binding.AcceptInput{Record: e.rec, Owner: owner, Engaged: c.row.EngagedCompile != "",
		Reply: call.Reply, Transformations: trs, Models: b.models})
	if err != nil {
		switch binding.Code(err) {
		case "unknown-compile":
			return nil, b.unknownCompile(ctx, call.CompileID)
		case "dry-run":
			return nil, api.Errorf(api.CodeDryRunCompile, "compile %q was a dry run", call.CompileID)
		case "bad-reply", "bad-path", "bad-request":
			return nil, api.Errorf(api.CodeBadRequest, "accept: %v", err)
		}
		return nil, err
	}
	if out.Noop {
		return &api.AcceptAnswer{Accepted: true, Stamped: e.stamped, Released: e.released, Repeated: true}, nil
	}
	rec := out.Record
	now := time.Now().UnixMilli()
	ownerID := rec.ID // an accept that makes rec the owner keeps its record
	if !out.Owner {
		if br := c.branches[rec.Branch]; br != nil {
			ownerID = br.Owner
		}
	}
	nullRecords, forget := b.retention(c, rec.ID, compileEntry{seq: rec.Seq, branch: rec.Branch, accepted: true, rec: rec}, ownerID)
	var stamped []db.StampRow
	var released []db.ReleaseRow
	err = b.j.Write(ctx, func(ctx context.Context, tx *sql.Tx, emit Emit) error {
		stamped, released = nil, nil
		hw, err := db.IngestHighWater(ctx, tx)
		if err != nil {
			return err
		}
		var srows []db.StampRow
		for _, s := range out.Stamps {
			srows = append(srows, db.StampRow{Stamp: s, Source: "accept", Conversation: c.id, Branch: rec.Branch, Compile: rec.ID, CreatedMs: now})
		}
		if stamped, err = db.InsertStamps(ctx, tx, srows); err != nil {
			return err
		}
		if _, err := linkStamps(ctx, tx, c.id, stamped); err != nil {
			return err
		}
		if _, err := db.InsertCompactions(ctx, tx, c.id, out.Compactions, now); err != nil {
			return err
		}
		var rrows []db.ReleaseRow
		for _, r := range out.Releases {
			r.Seq = hw
			rrows = append(rrows, db.ReleaseRow{Release: r, Conversation: c.id, Branch: rec.Branch, CreatedMs: now})
		}
		if released, err = db.InsertReleases(ctx, tx, rrows); err != nil {
			return err
		}
		if out.Owner {
			if err := db.UpsertBranch(ctx, tx, db.BranchRow{Conversation: c.id, Branch: rec.Branch, Owner: rec.ID, CreatedMs: now}); err != nil {
				return err
			}
		}
		if out.Engage {
			row := c.row
			row.ID, row.EngagedCompile, row.EngagedMs = c.id, rec.ID, now
			if row.CreatedMs == 0 {
				row.CreatedMs = now
			}
			if err := db.UpsertConversation(ctx, tx, row); err != nil {
				return err
			}
			if err := emit(api.EventEngage, c.id, map[string]any{"compileId": rec.ID, "branch": rec.Branch}); err != nil {
				return err
			}
		}
		if err := db.MarkAccepted(ctx, tx, rec, now, len(stamped), len(released)); err != nil {
			return err
		}
		if err := db.ForgetCompiles(ctx, tx, nullRecords, forget); err != nil {
			return err
		}
		if err := emit(api.EventAccept, c.id, map[string]any{"compileId": rec.ID, "branch": rec.Branch,
			"stamped": len(stamped), "released": len(released), "owner": out.Owner, "reply": len(call.Reply) > 0}); err != nil {
			return err
		}
		if len(released) > 0 {
			if err := emit(api.EventRelease, c.id, releaseFields(rec.ID, rec.Branch, "accept", released)); err != nil {
				return err
			}
		}
		for _, ev := range out.Events {
			f := map[string]any{"compileId": rec.ID, "branch": rec.Branch, "transformation": ev.Type, "reason": ev.Reason, "path": ev.Path}
			if ev.Orig != "" {
				f["hostPath"] = ev.Orig
			}
			if err := emit(api.EventTransform, c.id, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// mirror what was committed
	e.accepted, e.stamped, e.released, e.rec = true, len(stamped), len(released), rec
	for _, r := range released {
		c.releases = append(c.releases, r)
	}
	if out.Owner {
		br := c.branches[rec.Branch]
		if br == nil {
			br = &db.BranchRow{Conversation: c.id, Branch: rec.Branch, CreatedMs: now}
			c.branches[rec.Branch] = br
		}
		br.Owner = rec.ID
	}
	if out.Engage {
		c.row.EngagedCompile, c.row.EngagedMs, c.stored = rec.ID, now, true
	}
	c.applyRetention(nullRecords, forget)
	return &api.AcceptAnswer{Accepted: true, Stamped: len(stamped), Released: len(released)}, nil
}

// retention picks what the conversation forgets once next (a compile
// being added, or one being accepted) is committed, from the mirror alone
// (design/binding.md: at least the 32 most recent unaccepted compiles per
// branch):
//   - unaccepted compiles beyond the newest PerBranch of their branch or
//     PerConversation of the conversation are forgotten (accept: 404);
//   - accepted records beyond the newest PerBranch of the branch (except
//     its owner) or AcceptedRecords of the conversation are dropped, their
//     ids kept so a repeated accept still answers 200 (pi makes every leaf
//     a branch, so the per-branch bound alone would keep one per turn);
//   - accepted compiles beyond the newest Tombstones are forgotten.
//
// One pass over the mirror; sorting only where a bound is exceeded.
func (b *Binder) retention(c *conv, nextID string, next compileEntry, owner string) (nullRecords, forget []string) {
	keep := b.keep.Normalized()
	type item struct {
		id  string
		seq int64
	}
	var brUnacc, unacc, brRec, rec, tombs []item
	visit := func(id string, e *compileEntry) {
		it := item{id, e.seq}
		switch {
		case !e.accepted:
			unacc = append(unacc, it)
			if e.branch == next.branch {
				brUnacc = append(brUnacc, it)
			}
		case e.rec != nil:
			rec = append(rec, it)
			if e.branch == next.branch && id != owner {
				brRec = append(brRec, it)
			}
			tombs = append(tombs, it)
		default:
			tombs = append(tombs, it)
		}
	}
	for id, e := range c.compiles {
		if id != nextID {
			visit(id, e)
		}
	}
	visit(nextID, &next)
	// beyond returns the items older than the newest n.
	beyond := func(items []item, n int) []item {
		if len(items) <= n {
			return nil
		}
		slices.SortFunc(items, func(a, b item) int { return int(b.seq - a.seq) })
		return items[n:]
	}
	gone := map[string]bool{}
	for _, it := range beyond(brUnacc, keep.PerBranch) {
		gone[it.id] = true
	}
	for _, it := range beyond(unacc, keep.PerConversation) {
		gone[it.id] = true
	}
	for _, it := range beyond(tombs, keep.Tombstones) {
		gone[it.id] = true
	}
	dropped := map[string]bool{}
	for _, it := range beyond(brRec, keep.PerBranch) {
		dropped[it.id] = true
	}
	// the conversation-wide record bound is amortized: it runs once the
	// bound is overshot by an eighth, and then cuts back to the bound
	if len(rec) > keep.AcceptedRecords+keep.AcceptedRecords/8 {
		for _, it := range beyond(rec, keep.AcceptedRecords) {
			dropped[it.id] = true
		}
	}
	for id := range gone {
		forget = append(forget, id)
	}
	for id := range dropped {
		if !gone[id] {
			nullRecords = append(nullRecords, id)
		}
	}
	return nullRecords, forget
}

// applyRetention mirrors a committed retention plan.
func (c *conv) applyRetention(nullRecords, forget []string) {
	for _, id := range nullRecords {
		if e := c.compiles[id]; e != nil {
			e.rec = nil
		}
	}
	for _, id := range forget {
		delete(c.compiles, id)
	}
}

func releaseFields(compile, branch, source string, rels []db.ReleaseRow) map[string]any {
	list := make([]map[string]any, len(rels))
	for i, r := range rels {
		m := map[string]any{"block": hex.EncodeToString(r.Key[:8]), "reason": r.Reason}
		if r.Path != "" {
			m["path"] = r.Path
		}
		list[i] = m
	}
	f := map[string]any{"branch": branch, "source": source, "released": len(rels), "blocks": list}
	if compile != "" {
		f["compileId"] = compile
	}
	return f
}

// Release implements api.Binder.
func (b *Binder) Release(ctx context.Context, call *api.ReleaseCall) (*api.ReleaseAnswer, error) {
	var convID string
	if call.CompileID != "" && call.Signature == "" {
		switch {
		case strings.HasPrefix(call.CompileID, idDryRun):
			return nil, api.Errorf(api.CodeDryRunCompile, "compile %q was a dry run: nothing of it was sent", call.CompileID)
		case strings.HasPrefix(call.CompileID, idUnbound):
			return &api.ReleaseAnswer{}, nil
		}
		var err error
		if convID, err = b.lookup(ctx, call.CompileID); err != nil {
			return nil, err
		}
		if convID != call.Conversation {
			return nil, api.Errorf(api.CodeBadRequest, "compile %q belongs to conversation %q, not %q", call.CompileID, convID, call.Conversation)
		}
	}
	c, err := b.lock(ctx, call.Conversation)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var rels []binding.Release
	var refused *binding.CompileRecord // the compile whose request the provider refused
	branch := signatureBranch
	compile := ""
	if call.Signature != "" {
		rel := binding.SignatureRelease(call.Signature)
		known, err := b.blockKnown(ctx, c, rel.Key)
		if err != nil {
			return nil, err
		}
		if !known {
			return &api.ReleaseAnswer{Released: 0, Reason: unknownSignature}, nil
		}
		rels = []binding.Release{rel}
	} else {
		e := c.compiles[call.CompileID]
		if e == nil || e.rec == nil {
			return nil, b.unknownCompile(ctx, call.CompileID)
		}
		if rels, err = binding.ReleaseAtPath(e.rec, call.Path); err != nil {
			if binding.Code(err) == "bad-path" {
				return nil, api.Errorf(api.CodeBadRequest, "release: %v", err)
			}
			return nil, err
		}
		branch, compile = e.branch, e.rec.ID
		if !e.accepted {
			refused = binding.MarkRefused(e.rec)
		}
	}
	now := time.Now().UnixMilli()
	var added []db.ReleaseRow
	err = b.j.Write(ctx, func(ctx context.Context, tx *sql.Tx, emit Emit) error {
		hw, err := db.IngestHighWater(ctx, tx)
		if err != nil {
			return err
		}
		// A conversation not compiled yet gets no row here: its first
		// compile creates it with its parent (persistCompile), which a
		// row made now would keep it from ever recording.
		rows := make([]db.ReleaseRow, len(rels))
		for i, r := range rels {
			r.Seq = hw
			rows[i] = db.ReleaseRow{Release: r, Conversation: c.id, Branch: branch, CreatedMs: now}
		}
		if added, err = db.InsertReleases(ctx, tx, rows); err != nil {
			return err
		}
		if refused != nil {
			if err := db.UpdateRecord(ctx, tx, refused); err != nil {
				return err
			}
		}
		if len(added) > 0 {
			return emit(api.EventRelease, c.id, releaseFields(compile, branch, "host", added))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.releases = append(c.releases, added...)
	if refused != nil {
		c.compiles[call.CompileID].rec = refused
	}
	return &api.ReleaseAnswer{Released: len(added)}, nil
}

// Conversation implements api.Binder.
func (b *Binder) Conversation(ctx context.Context, id string) (*api.ConversationState, error) {
	c, err := b.lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if !c.stored && len(c.compiles) == 0 && len(c.releases) == 0 {
		return nil, api.Errorf(api.CodeUnknownConversation, "conversation %q is unknown to bindery", id)
	}
	byBranch, total, linked, err := b.db.StampCounts(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &api.ConversationState{Conversation: id, Engaged: c.row.EngagedCompile != "", SessionFile: c.row.SessionFile,
		Stamps: total, StampsLinked: linked, Compiles: len(c.compiles), Branches: []api.BranchState{}, Releases: []api.ReleaseInfo{}}
	if c.row.ParentConversation != "" {
		st.Parent = &api.BranchRef{Conversation: c.row.ParentConversation, Branch: c.row.ParentBranch}
	}
	relCount := map[string]int{}
	for _, r := range c.releases {
		relCount[r.Branch]++
		st.Releases = append(st.Releases, api.ReleaseInfo{Branch: r.Branch, Block: hex.EncodeToString(r.Key[:]), Reason: r.Reason,
			CompileID: r.Compile, Time: time.UnixMilli(r.CreatedMs).UTC().Format(time.RFC3339Nano)})
	}
	seen := map[string]bool{}
	add := func(name string) *api.BranchState {
		st.Branches = append(st.Branches, api.BranchState{Branch: name, Releases: relCount[name], Stamps: byBranch[name]})
		seen[name] = true
		return &st.Branches[len(st.Branches)-1]
	}
	idx := map[string]int{}
	for _, br := range sortedBranches(c.branches) {
		bs := add(br.Branch)
		bs.Owner = br.Owner
		if br.ParentConversation != "" {
			bs.Parent = &api.BranchRef{Conversation: br.ParentConversation, Branch: br.ParentBranch}
		}
		idx[br.Branch] = len(st.Branches) - 1
	}
	for _, e := range c.compiles {
		i, ok := idx[e.branch]
		if !ok {
			add(e.branch)
			i = len(st.Branches) - 1
			idx[e.branch] = i
		}
		if e.accepted {
			st.Branches[i].Accepted++
		} else {
			st.Branches[i].Unaccepted++
		}
	}
	if n := relCount[signatureBranch]; n > 0 && !seen[signatureBranch] {
		add(signatureBranch)
	}
	if err := b.treeBranches(ctx, c, st, byBranch); err != nil {
		return nil, err
	}
	return st, nil
}

// treeBranches turns a pi session's per-leaf rows into its tree's branches
// (design/binding.md: a pi branch is identified by its path, so a compile
// at a descendant leaf is on the same branch). The per-leaf rows stay, as
// CompileLeaves. A conversation that is not an ingested pi session is left
// as it is.
func (b *Binder) treeBranches(ctx context.Context, c *conv, st *api.ConversationState, stampsBy map[string]int) error {
	_, tree, err := b.db.SessionTree(ctx, c.id, b.trees.get(c.id))
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	b.trees.put(c.id, tree)
	leaves := tree.Branches()
	type treeBranch struct {
		state api.BranchState
		path  []binding.PathEntry
		on    map[string]bool
		owner int64 // seq of the owner compile
	}
	out := make([]treeBranch, len(leaves))
	for i, l := range leaves {
		p, _ := tree.PathEntries(l.Leaf)
		tb := treeBranch{path: toBindingPath(p), on: make(map[string]bool, len(p))}
		for _, e := range p {
			tb.on[e.ID] = true
		}
		tb.state = api.BranchState{Branch: l.Leaf, Current: l.Current, Entries: l.Depth}
		out[i] = tb
	}
	// The compiles, and the stamps their accepts minted, on each path;
	// names that are not entries of the tree keep a row of their own.
	var notInTree []api.BranchState
	for _, row := range st.Branches {
		if _, in := tree.PathEntries(row.Branch); in || row.Branch == signatureBranch {
			continue // releases by signature are counted on every branch
		}
		row.NotInTree = true
		notInTree = append(notInTree, row)
	}
	for id, e := range c.compiles {
		for i := range out {
			tb := &out[i]
			if !tb.on[e.branch] {
				continue
			}
			if !e.accepted {
				tb.state.Unaccepted++
				continue
			}
			tb.state.Accepted++
			if tb.state.Owner == "" || e.seq > tb.owner {
				tb.owner = e.seq
				tb.state.Owner = id
			}
		}
	}
	for name, n := range stampsBy {
		for i := range out {
			if out[i].on[name] {
				out[i].state.Stamps += n
			}
		}
	}
	// Releases in force at each leaf, decided as a compile there decides
	// them (released, above).
	var keys []binding.Digest
	for _, r := range c.releases {
		if r.Branch != signatureBranch {
			keys = append(keys, r.Key)
		}
	}
	entries, err := b.db.BlockEntries(ctx, c.id, keys)
	if err != nil {
		return err
	}
	for _, r := range c.releases {
		madeOn, known := []binding.PathEntry(nil), false
		if r.Branch != signatureBranch {
			var p []db.PathEntry
			p, known = tree.PathEntries(r.Branch)
			madeOn = toBindingPath(p)
		}
		for i := range out {
			tb := &out[i]
			switch {
			case r.Branch == signatureBranch, !known:
				// by signature: every branch; made at a leaf the tree
				// does not show: a compile takes it as reaching (safe)
				tb.state.Releases++
			default:
				entry, ok := entries[r.Key]
				if !ok {
					entry = madeOn[len(madeOn)-1].ID
				}
				if binding.ReleaseReaches(madeOn, entry, r.Seq, tb.path) {
					tb.state.Releases++
				}
			}
		}
	}
	st.SessionTree = true
	st.CompileLeaves = st.Branches
	st.Branches = make([]api.BranchState, 0, len(out)+len(notInTree))
	for _, tb := range out {
		st.Branches = append(st.Branches, tb.state)
	}
	st.Branches = append(st.Branches, notInTree...)
	return nil
}

func sortedBranches(m map[string]*db.BranchRow) []*db.BranchRow {
	out := make([]*db.BranchRow, 0, len(m))
	for _, b := range m {
		out = append(out, b)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].CreatedMs < out[j-1].CreatedMs || (out[j].CreatedMs == out[j-1].CreatedMs && out[j].Branch < out[j-1].Branch)); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

var _ api.Binder = (*Binder)(nil)
