package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unique"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// compileFacts is everything a compile decides from besides its request,
// read once, before the decision, under the conversation's lock; the
// commit that follows reuses it and reads nothing but its transaction.
type compileFacts struct {
	path *pathInfo
	// parent is where the conversation was made from: as stored, or for a
	// conversation compiled for the first time, the host's parent or the
	// session its pi header names (parentOf); nil: nowhere.
	parent      *api.BranchRef
	parentState *db.ConversationState // the parent's stored state (nil without a parent)

	stamps []*binding.Stamp // of the request's StampKeys, in order
	// shareBase is the remembered compile the record shares with (nil:
	// none), chosen before the decision, which builds the record sharing
	// it (binding.RecordShare).
	shareBase   *compileEntry
	released    map[binding.Digest]bool
	remembered  []*binding.CompileRecord
	owner       *binding.CompileRecord
	engaged     bool
	compactions map[binding.Digest]binding.Compaction
}

// gather reads a compile's facts.
func (b *Binder) gather(ctx context.Context, c *conv, call *api.CompileCall, req *binding.Request) (*compileFacts, error) {
	f := &compileFacts{}
	// The conversation's pi session row, read only where a fact needs it
	// (a leaf not ingested yet, a conversation compiled for the first time).
	var session *db.Session
	sessionRow := func() (db.Session, error) {
		if session == nil {
			s, err := b.db.Session(ctx, c.id)
			switch {
			case errors.Is(err, db.ErrNotFound):
			case err != nil:
				return db.Session{}, fmt.Errorf("pi session of conversation %q: %w", c.id, err)
			}
			session = &s
		}
		return *session, nil
	}
	var err error
	if f.path, err = b.branchPath(ctx, c, call.Branch, sessionRow); err != nil {
		return nil, err
	}
	if !f.path.pi {
		f.path.forkedFrom = c.forkedFrom(call)
	}
	keys := binding.AppendStampKeys(c.keys[:0], req)
	c.keys = keys // scratch: nothing of this compile keeps keys
	if f.path.pi && !f.path.found {
		if err := b.provenAncestor(ctx, f.path, c.id, keys); err != nil {
			return nil, err
		}
	}
	switch {
	case c.stored && c.row.ParentConversation != "":
		f.parent = &api.BranchRef{Conversation: c.row.ParentConversation, Branch: c.row.ParentBranch}
	case !c.stored:
		s, err := sessionRow()
		if err != nil {
			return nil, err
		}
		if f.parent, err = b.parentOf(ctx, call, s); err != nil {
			return nil, err
		}
	}
	if f.parent != nil && f.parent.Conversation != c.id {
		if f.parentState, err = b.db.LoadConversation(ctx, f.parent.Conversation); err != nil {
			return nil, fmt.Errorf("parent %q of conversation %q: %w", f.parent.Conversation, c.id, err)
		}
	}
	if f.stamps, err = b.stamps(ctx, c, keys); err != nil {
		return nil, err
	}
	safe := true
	if b.shared != nil && len(keys) > 0 {
		// the tier's releases first: one another machine made is seen
		// before this compile decides (shared_facts.go); a request with
		// no thinking block has nothing a release could strip
		if safe, err = b.syncReleases(ctx, c); err != nil {
			return nil, err
		}
	}
	if f.released, err = b.released(ctx, c, f, call, req.Model, keys); err != nil {
		return nil, err
	}
	if !safe {
		f.released = stripAll(f.released, keys)
	}
	for e := range c.recorded {
		if !f.path.onBranch(call.Branch, e.branch) {
			continue
		}
		f.remembered = append(f.remembered, e.rec)
		if e.accepted && (f.owner == nil || e.seq > f.owner.Seq) {
			f.owner = e.rec
		}
	}
	f.engaged = c.row.EngagedCompile != "" || (f.parentState != nil && f.parentState.Conversation.EngagedCompile != "")
	if ck := binding.CompactionKeys(req); len(ck) > 0 {
		if f.compactions, err = b.db.Compactions(ctx, ck); err != nil {
			return nil, fmt.Errorf("compactions of conversation %q: %w", c.id, err)
		}
	}
	return f, nil
}

// stamps are the stamps of keys, in their order (binding.CompileInput's
// Stamps), from the conversation's cache where it holds them and
// otherwise read, the ones found cached for its next compile: a long
// conversation's compile reads only its new blocks' stamps.
//
// The last compile's answer comes first: a conversation's next request
// repeats its blocks in the same order, and a stamp whose key is the
// key asked is that key's stamp (one per key, never changed), so it is
// taken after one compare; only the keys it does not answer are looked up
// in the cache. Looking up every key was a random read per block of a
// long history each turn.
func (b *Binder) stamps(ctx context.Context, c *conv, keys []binding.Digest) ([]*binding.Stamp, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	c.absent.settle(b.db)
	out := make([]*binding.Stamp, len(keys))
	last := c.lastStamps
	c.lastStamps = nil // until out is complete: an error must not leave it half made
	var need []binding.Digest
	var at []int // where each of need is in keys
	for i, k := range keys {
		if i < len(last) && last[i] != nil && last[i].Key == k {
			out[i] = last[i]
		} else if st, ok := c.stamps[k]; ok {
			out[i] = st
		} else if !c.absent.has(k) || b.readThrough != nil {
			// Joined to a shared tier, a key without a stamp here may have
			// one there by now (another machine's reply): absence here says
			// nothing of there, so it is asked again.
			need, at = append(need, k), append(at, i)
		}
	}
	if len(need) == 0 {
		c.lastStamps = out
		return out, nil
	}
	rows, err := b.db.Stamps(ctx, need)
	if err != nil {
		return nil, fmt.Errorf("stamps: %w", err)
	}
	if b.readThrough != nil && len(rows) < len(need) {
		if err := b.readThrough.fill(ctx, b.j, c.id, need, keys[len(keys)-1], rows); err != nil {
			return nil, err
		}
	}
	if c.stamps == nil || len(c.stamps)+len(rows) > stampsCached {
		// started again: the request's own cached stamps come along
		fresh := make(map[binding.Digest]*binding.Stamp, len(rows)+len(keys)-len(need))
		for i, k := range keys {
			if out[i] != nil {
				fresh[k] = out[i]
			}
		}
		c.restartStamps(fresh)
	}
	for j, k := range need {
		r, ok := rows[k]
		if !ok {
			c.absent.add(k)
			continue
		}
		st, cached := c.stamps[k] // a key the request repeats is read once
		if !cached {
			st = c.cachedStamp(r.Stamp)
			c.stamps[k] = st
		}
		out[at[j]] = st
	}
	c.lastStamps = out
	return out, nil
}

// cacheStamps adds stamps just recorded (the first of their keys: a key
// already stamped is not among them) to the conversation's cache.
func (c *conv) cacheStamps(rows []db.StampRow) {
	if len(rows) == 0 {
		return
	}
	if c.stamps == nil || len(c.stamps)+len(rows) > stampsCached {
		c.restartStamps(make(map[binding.Digest]*binding.Stamp, len(rows)))
	}
	for _, r := range rows {
		c.stamps[r.Key] = c.cachedStamp(r.Stamp) // the cache's own: rows belong to the caller
	}
}

// restartStamps makes fresh c's stamp cache, holding only the model
// names of its stamps (a hostile host's compile per model name would
// otherwise keep every name it ever sent).
func (c *conv) restartStamps(fresh map[binding.Digest]*binding.Stamp) {
	models := make(map[unique.Handle[string]]struct{})
	for _, st := range fresh {
		models[unique.Make(st.Model)] = struct{}{} // the handle c.models holds: the same canonical name
	}
	c.stamps, c.models = fresh, models
}

// cachedStamp is st as the conversation's cache holds it.
//   - Its model name is the one copy every stamp of that name shares
//     (unique.Make). A decision compares each block's minting model with
//     the last one it looked up; names read row by row were equal strings
//     at distinct addresses, so each compare read the name's bytes, a cache
//     miss per block of a long history. Shared, the compare stops at the
//     pointer. c.models holds a handle of each name: unique forgets a
//     canonical value once no handle of it is left, so, holding only the
//     strings, every GC made the names cached after it copies again.
//   - It lies next to the stamps cached before it (slab: arrays of
//     stampSlab, never moved, so the pointers hold). Stamps are added as
//     their blocks are (a reply's after its request's), so a decision,
//     which reads each block's stamp in request order, reads them one after
//     another; each one allocated on its own, they were spread over the
//     heap, and reading them was a third of a long conversation's verdicts.
func (c *conv) cachedStamp(st binding.Stamp) *binding.Stamp {
	h := unique.Make(st.Model)
	if _, ok := c.models[h]; !ok {
		if c.models == nil {
			c.models = map[unique.Handle[string]]struct{}{}
		}
		c.models[h] = struct{}{} // the canonical name outlives the next GC
	}
	st.Model = h.Value()
	if len(c.slab) == cap(c.slab) {
		c.slab = make([]binding.Stamp, 0, stampSlab)
	}
	c.slab = append(c.slab, st)
	return &c.slab[len(c.slab)-1]
}

// stampSlab is how many stamps one of the cache's arrays holds (about
// 37 KB): an array is kept while any stamp in it is used, so a cache that
// starts again keeps at most that much per stamp it carries over.
const stampSlab = 256

// branchPath is what the compile's branch is on pi's tree: whether the
// leaf is ingested, and which of the leaves c's remembered compiles were
// made at lie on its path (onBranch), the one question every compile asks
// of the path. It asks the store exactly that (db.SessionPathHas): building
// the whole path and a set of its ids each turn was a third of a pi turn
// past a few thousand entries. The path itself is read only where a
// release needs it (releaseTree). A leaf not ingested yet (pi writes the
// reply after the request) is still a leaf of pi's tree when bindery has
// ingested the conversation's session (its row, from session).
func (b *Binder) branchPath(ctx context.Context, c *conv, branch string, session func() (db.Session, error)) (*pathInfo, error) {
	pi := &pathInfo{memo: map[string]pathMemo{}}
	if branch == "" {
		return pi, nil
	}
	// A leaf named by two compiles is asked twice: pi makes one compile
	// per leaf, bar retries, so a set would cost more than it saves.
	leaves := make([]string, 0, len(c.recorded))
	for e := range c.recorded {
		if e.branch != branch {
			leaves = append(leaves, e.branch)
		}
	}
	on, found, err := b.db.SessionPathHas(ctx, c.id, branch, leaves)
	if err != nil {
		return nil, fmt.Errorf("path of leaf %q in session %q: %w", branch, c.id, err)
	}
	if found {
		pi.pi, pi.found, pi.on = true, true, on
		return pi, nil
	}
	s, err := session()
	if err != nil {
		return nil, err
	}
	pi.pi = s.ID != ""
	return pi, nil
}

// released decides which of keys (the request's thinking blocks) are
// released on the compile's branch (binding.ReleasedOn), from the
// conversation's releases, pi's tree where the conversation is a pi
// session, and the forks it descends from. No gap release reaches a
// target that does not bind (model, or the host's override), whenever it
// was recorded: a database written before issue 31 needs no migration.
func (b *Binder) released(ctx context.Context, c *conv, f *compileFacts, call *api.CompileCall, model string, keys []binding.Digest) (map[binding.Digest]bool, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	in := binding.ReachInput{Branch: call.Branch, Releases: branchReleases(c.releases),
		NotBinding: !binding.TargetBinds(b.models, model, call.BindsThinking)}
	if f.path.pi {
		tree, err := b.releaseTree(ctx, c, f.path, call.Branch, keys)
		if err != nil {
			return nil, err
		}
		in.Tree = tree
	}
	// The branch's parent (a host's fork within the conversation), then
	// the conversation's parent (a fork into a new conversation or session).
	br := c.branches[call.Branch]
	switch {
	case br != nil && br.ParentConversation != "":
		rels := in.Releases
		if br.ParentConversation != c.id {
			st, err := b.db.LoadConversation(ctx, br.ParentConversation)
			if err != nil {
				return nil, fmt.Errorf("parent %q of branch %q of conversation %q: %w", br.ParentConversation, call.Branch, c.id, err)
			}
			rels = branchReleases(st.Releases)
		}
		in.Forks = append(in.Forks, &binding.Fork{Branch: br.ParentBranch, UpTo: br.ParentRelease, Releases: rels})
	case br == nil && call.Parent != nil && (call.Parent.Conversation == c.id || call.Parent.Conversation == "") && call.Parent.Branch != call.Branch:
		in.Forks = append(in.Forks, &binding.Fork{Branch: call.Parent.Branch, UpTo: binding.ForkNow, Releases: in.Releases})
	}
	if f.parentState != nil {
		upTo := binding.ForkNow // a fork made now inherits everything so far
		if c.stored {
			upTo = c.row.ParentRelease
		}
		fork := &binding.Fork{Branch: f.parent.Branch, UpTo: upTo, Releases: branchReleases(f.parentState.Releases)}
		if err := b.forkAncestry(ctx, fork, f.parentState, c.id); err != nil {
			return nil, err
		}
		in.Forks = append(in.Forks, fork)
	}
	return binding.ReleasedOn(in, keys), nil
}

// forkAncestry links fork, made from the conversation st, to st's own
// parents, up to binding.MaxForkDepth and never through one twice.
func (b *Binder) forkAncestry(ctx context.Context, fork *binding.Fork, st *db.ConversationState, child string) error {
	seen := map[string]bool{child: true, st.Conversation.ID: true}
	for depth := 1; depth < binding.MaxForkDepth; depth++ {
		up := st.Conversation
		if up.ParentConversation == "" || seen[up.ParentConversation] {
			return nil
		}
		seen[up.ParentConversation] = true
		var err error
		if st, err = b.db.LoadConversation(ctx, up.ParentConversation); err != nil {
			return fmt.Errorf("ancestor %q of conversation %q: %w", up.ParentConversation, child, err)
		}
		fork.Parent = &binding.Fork{Branch: up.ParentBranch, UpTo: up.ParentRelease, Releases: branchReleases(st.Releases)}
		fork = fork.Parent
	}
	return nil
}

// releaseTree is what pi's tree shows of the releases among keys made at
// other leaves: the leaves' paths and the blocks' entries, read only when
// the compile's own path is known (otherwise every release reaches).
func (b *Binder) releaseTree(ctx context.Context, c *conv, pi *pathInfo, branch string, keys []binding.Digest) (*binding.ReleaseTree, error) {
	if (!pi.found && pi.at == nil) || len(c.releases) == 0 {
		return &binding.ReleaseTree{At: pi.at}, nil
	}
	inReq := make(map[binding.Digest]bool, len(keys))
	for _, k := range keys {
		inReq[k] = true
	}
	var need []binding.Digest
	leaves := map[string]bool{}
	for _, r := range c.releases {
		if inReq[r.Key] && r.Branch != branch && r.Branch != binding.SignatureBranch {
			need = append(need, r.Key)
			leaves[r.Branch] = true
		}
	}
	if len(need) == 0 {
		// every release the request's blocks have is the branch's own
		// or by signature: they reach whatever the tree (Reaches)
		return &binding.ReleaseTree{At: pi.at}, nil
	}
	if pi.found && pi.at == nil {
		// The leaf's path, read now that a release needs it; and the
		// leaves on it again from this same read, so that the two
		// agree whatever was ingested since branchPath.
		if b.beforePathRead != nil {
			b.beforePathRead()
		}
		p, found, err := b.db.SessionPath(ctx, c.id, branch)
		if err != nil {
			return nil, fmt.Errorf("path of leaf %q in session %q: %w", branch, c.id, err)
		}
		if !found {
			// gone since branchPath (the file rewritten): as a leaf not
			// ingested, every release reaches and every compile counts
			pi.found, pi.on = false, nil
			return &binding.ReleaseTree{}, nil
		}
		pi.at = toBindingPath(p)
		pi.on = make(map[string]bool, len(p))
		for _, e := range p {
			pi.on[e.ID] = true
		}
	}
	tree := &binding.ReleaseTree{At: pi.at}
	entries, err := b.blockEntries(ctx, pi, c.id, need)
	if err != nil {
		return nil, err
	}
	tree.Entries = entries
	tree.Paths = make(map[string][]binding.PathEntry, len(leaves))
	for leaf := range leaves {
		p, found, err := b.leafPath(ctx, pi, c.id, leaf)
		if err != nil {
			return nil, err
		}
		if found {
			tree.Paths[leaf] = p
		}
	}
	return tree, nil
}

// blockEntries is db.BlockEntries through the compile's memo: a block's
// entry is read once per compile, whichever fact asks first.
func (b *Binder) blockEntries(ctx context.Context, pi *pathInfo, conversation string, keys []binding.Digest) (map[binding.Digest]string, error) {
	if pi.entries == nil {
		pi.entries = map[binding.Digest]string{}
	}
	var need []binding.Digest
	for _, k := range keys {
		if _, ok := pi.entries[k]; !ok {
			need = append(need, k)
		}
	}
	if len(need) > 0 {
		got, err := b.db.BlockEntries(ctx, conversation, need)
		if err != nil {
			return nil, fmt.Errorf("entries of blocks in session %q: %w", conversation, err)
		}
		for _, k := range need {
			pi.entries[k] = got[k] // "": not in the file
		}
	}
	out := make(map[binding.Digest]string, len(keys))
	for _, k := range keys {
		if e := pi.entries[k]; e != "" {
			out[k] = e
		}
	}
	return out, nil
}

// branchReleases is rows as binding reads them.
func branchReleases(rows []db.ReleaseRow) []binding.BranchRelease {
	out := make([]binding.BranchRelease, len(rows))
	for i, r := range rows {
		out[i] = binding.BranchRelease{Release: r.Release, Branch: r.Branch, Order: r.ID}
	}
	return out
}

// parentOf is where a new conversation was made from: the host's parent,
// or for a pi session file the session its header names.
func (b *Binder) parentOf(ctx context.Context, call *api.CompileCall, s db.Session) (*api.BranchRef, error) {
	if call.Parent != nil && call.Parent.Conversation != "" && call.Parent.Conversation != call.Conversation {
		return call.Parent, nil
	}
	if s.ParentSession == "" {
		return nil, nil
	}
	// pi's header names the parent's file (pi-sessions.md); an id is
	// taken as it is (v1's branchedFrom)
	parent := s.ParentSession
	if strings.ContainsRune(parent, '/') {
		id, err := b.sessionAtPath(ctx, parent)
		if err != nil {
			return nil, fmt.Errorf("parent session of %q at %s: %w", call.Conversation, parent, err)
		}
		if id == "" {
			return nil, nil
		}
		parent = id
	}
	if parent == call.Conversation {
		return nil, nil
	}
	return &api.BranchRef{Conversation: parent}, nil
}

// pathInfo is what a compile knows of a pi branch.
type pathInfo struct {
	pi bool // the conversation is a pi session bindery has ingested
	// found: the compile's leaf is ingested; on then holds the leaves of
	// the conversation's remembered compiles that lie on its path (every
	// id on it once at is read)
	found bool
	on    map[string]bool
	// at is the compile's leaf path, root first, read only for a release
	// (releaseTree); or, proven, the path the request proves (nil: neither)
	at []binding.PathEntry
	// proven: the leaf is not ingested; at is the path of the deepest
	// ancestor the request proves, so compiles off it may still be on the
	// branch (made at leaves after it)
	proven bool
	memo   map[string]pathMemo // other leaves' paths, looked up once per call
	// entries: the session entry of each block looked up in this call
	// ("": not in the file), read once whichever fact asks
	entries map[binding.Digest]string
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

// provenAncestor handles a compile at a pi leaf bindery has not ingested
// yet (pi writes the entry and sends the request at about the same time):
// the branch is taken to descend from the deepest entry the request proves
// it contains, the entry holding its latest thinking block that the
// session file already shows.
func (b *Binder) provenAncestor(ctx context.Context, pi *pathInfo, conversation string, keys []binding.Digest) error {
	for i := len(keys) - 1; i >= 0; i-- {
		entries, err := b.blockEntries(ctx, pi, conversation, keys[i:i+1])
		if err != nil {
			return err
		}
		entry, ok := entries[keys[i]]
		if !ok {
			continue
		}
		p, found, err := b.db.SessionPath(ctx, conversation, entry)
		if err != nil {
			return fmt.Errorf("path of entry %q in session %q: %w", entry, conversation, err)
		}
		if found {
			pi.at = toBindingPath(p)
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
		return nil, false, fmt.Errorf("path of leaf %q in session %q: %w", leaf, conversation, err)
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
	if !pi.found {
		return true
	}
	return pi.on[other]
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
	id, ok := watcher.FileSessionID(path)
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
