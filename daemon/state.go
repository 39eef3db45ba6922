package daemon

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// ListSessions implements api.Sessions.
func (d *daemon) ListSessions(ctx context.Context) ([]api.Session, error) {
	rows, err := d.store.Sessions(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make([]api.Session, len(rows))
	for i, s := range rows {
		out[i] = apiSession(s)
	}
	return out, nil
}

// GetSession implements api.Sessions.
func (d *daemon) GetSession(ctx context.Context, id string) (api.SessionDetail, error) {
	s, tree, files, err := d.store.SessionTree(ctx, id, d.trees.get(id))
	if errors.Is(err, db.ErrNotFound) {
		return api.SessionDetail{}, api.Errorf(api.CodeNotFound, "no session %q", id)
	}
	if err != nil {
		return api.SessionDetail{}, err
	}
	d.trees.put(id, tree)
	var owners map[string]string
	if d.binder != nil {
		if owners, err = d.binder.TreeOwners(ctx, id, tree); err != nil {
			return api.SessionDetail{}, err
		}
	}
	out := api.SessionDetail{Session: apiSession(s), Branches: []api.Branch{}, Frontier: []api.Frontier{},
		Stamps: s.Stamps, Releases: s.Releases}
	if len(files) > 1 {
		for _, f := range files {
			out.SameID = append(out.SameID, api.SessionFile{File: f.Path, Removed: f.Removed, LastActivity: f.LastActivity})
		}
	}
	out.Problem = d.fileProblem(s.Path)
	errs, err := d.store.FileIngestErrors(ctx, s.Path, maxSessionErrors)
	if err != nil {
		return api.SessionDetail{}, err
	}
	for _, e := range errs {
		out.IngestErrors = append(out.IngestErrors, apiIngestError(e))
	}
	for _, b := range tree.Branches() {
		out.Branches = append(out.Branches, api.Branch{Leaf: b.Leaf, Current: b.Current, Entries: b.Depth, LastActivity: b.Timestamp})
		f := api.Frontier{Branch: b.Leaf, Owner: owners[b.Leaf]}
		if b.Frontier != nil {
			f.Condense = &api.CondenseFrontier{Entry: b.Frontier.Entry, Timestamp: b.Frontier.Timestamp, Data: b.Frontier.Data}
		}
		out.Frontier = append(out.Frontier, f)
	}
	return out, nil
}

// treeCache keeps the trees of recently shown sessions, so showing a
// session again reads only the entries added since (SessionTree extends
// the cached tree). Bounded by the entries it holds in total.
type treeCache struct {
	mu    sync.Mutex
	trees map[string]*db.Tree
	nodes int
}

// maxCachedEntries bounds the cache (about 150 bytes an entry).
const maxCachedEntries = 200_000

func (c *treeCache) get(id string) *db.Tree {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trees[id]
}

func (c *treeCache) put(id string, t *db.Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trees == nil {
		c.trees = map[string]*db.Tree{}
	}
	if old := c.trees[id]; old != nil {
		c.nodes -= old.Len()
	}
	c.trees[id], c.nodes = t, c.nodes+t.Len()
	for k, v := range c.trees { // evict arbitrary others until within bounds
		if c.nodes <= maxCachedEntries {
			break
		}
		if k != id {
			c.nodes -= v.Len()
			delete(c.trees, k)
		}
	}
}

func apiSession(s db.Session) api.Session {
	return api.Session{
		ID: s.ID, File: s.Path, Cwd: s.Cwd, Version: s.Version, ParentSession: s.ParentSession,
		Entries: s.Entries, Leaf: s.Leaf, LastActivity: s.LastActivity, ThinkingBlocks: s.Thinking,
		Removed: s.Removed, Engaged: s.Engaged,
	}
}

// Health implements api.HealthReporter.
func (d *daemon) Health(ctx context.Context) (api.Health, error) {
	st, err := d.store.Stats(ctx)
	if err != nil {
		return api.Health{}, err
	}
	version, err := d.store.SchemaVersion(ctx)
	if err != nil {
		return api.Health{}, err
	}
	cursors, err := d.store.Cursors(ctx)
	if err != nil {
		return api.Health{}, err
	}
	var size int64
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(d.cfg.Database + suffix); err == nil {
			size += fi.Size()
		}
	}
	h := api.Health{
		Version:       d.cfg.Version,
		PID:           os.Getpid(),
		StartedAt:     d.started.UTC(),
		UptimeSeconds: time.Since(d.started).Seconds(),
		Socket:        d.cfg.Socket,
		Database: api.DatabaseHealth{
			Path: d.cfg.Database, SchemaVersion: version, SizeBytes: size,
			Entries: st.Entries, Thinking: st.ThinkingBlocks, IngestErrors: st.IngestErrors, LastEvent: st.LastEvent,
		},
		Watcher: api.WatcherHealth{
			Sessions: st.Sessions, RemovedSessions: st.RemovedSessions, Files: st.Files,
			IngestedBytes: st.IngestedBytes, LagBytes: lagBytes(cursors),
			InitialScan: d.ingest.finished.Load(), Running: true,
		},
	}
	for _, r := range d.roots {
		h.Watcher.Directories = append(h.Watcher.Directories, r.Dir)
	}
	if ms := d.ingest.lastIngest.Load(); ms != 0 {
		h.Watcher.LastIngest = time.UnixMilli(ms).UTC()
	}
	if err := d.watchOK(); err != nil {
		h.Watcher.Running, h.Watcher.Error = false, err.Error()
	}
	if d.shared != nil {
		n, err := d.store.OutboxLen(ctx)
		if err != nil {
			return api.Health{}, err
		}
		oldest, err := d.store.OutboxOldest(ctx)
		if err != nil {
			return api.Health{}, err
		}
		h.Shared = &api.SharedHealth{Name: d.shared.Name(), Machine: d.shared.Machine(), Outbox: n}
		if oldest > 0 {
			h.Shared.OutboxLagMs = max(0, time.Now().UnixMilli()-oldest)
		}
		if h.Shared.TeamOutbox, err = d.store.TeamOutboxLen(ctx); err != nil {
			return api.Health{}, err
		}
		if d.binder != nil && d.binder.readThrough != nil {
			rt := d.binder.readThrough
			s := h.Shared
			s.ReadThroughs, s.ReadThroughMisses, s.ReadThroughFound, s.ReadThroughWaitMs = rt.tally.health()
		}
	}
	ws := d.watch.Status()
	h.Watcher.LastRescan = ws.LastRescan.UTC()
	if ws.Degraded {
		h.Watcher.Error = "fsnotify unavailable or at its limit: rescans only"
	}
	// A session folder that does not exist yet is where pi will write its
	// first session: on a fresh install that is health, not a fault, so
	// it is listed but does not make the watcher degraded (status exit 0).
	missingOnly := true
	for _, p := range ws.Problems {
		h.Watcher.Problems = append(h.Watcher.Problems, apiProblem(p))
		missingOnly = missingOnly && p.Kind == watcher.FolderMissing
	}
	h.Watcher.Degraded = !h.Watcher.Running || ws.Degraded || !missingOnly
	errs, err := d.store.IngestErrors(ctx, "", maxHealthErrors)
	if err != nil {
		return api.Health{}, err
	}
	for _, e := range errs {
		h.Watcher.IngestErrors = append(h.Watcher.IngestErrors, apiIngestError(e))
	}
	return h, nil
}

// maxHealthErrors bounds the ingest errors /v1/health lists.
const maxHealthErrors = 20

// maxSessionErrors bounds the ingest errors GET /v1/sessions/{id} lists.
const maxSessionErrors = 100

func apiProblem(p watcher.Problem) api.WatcherProblem {
	return api.WatcherProblem{Path: p.Path, Kind: string(p.Kind), Reason: p.Reason, Since: p.Since.UTC()}
}

func apiIngestError(e db.RecordedError) api.IngestError {
	return api.IngestError{File: e.Path, Session: e.Session, Line: e.Line, Offset: e.Offset, Reason: e.Reason,
		Time: time.UnixMilli(e.TimeMS).UTC()}
}

// fileProblem is the watcher's problem with path, if any.
func (d *daemon) fileProblem(path string) *api.WatcherProblem {
	if d.watch == nil {
		return nil
	}
	for _, p := range d.watch.Status().Problems {
		if p.Path == path {
			ap := apiProblem(p)
			return &ap
		}
	}
	return nil
}
