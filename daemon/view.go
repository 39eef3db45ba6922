package daemon

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// Conversation implements api.Binder.
func (b *Binder) Conversation(ctx context.Context, id string) (*api.ConversationState, error) {
	st, err := b.conversation(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("conversation %q: %w", id, err)
	}
	return st, nil
}

// Conversations implements api.Binder: read from the database, where
// every compile and accept is before it is answered.
func (b *Binder) Conversations(ctx context.Context) (*api.ConversationList, error) {
	rows, err := b.db.HostConversations(ctx)
	if err != nil {
		return nil, err
	}
	l := &api.ConversationList{Conversations: make([]api.ConversationSummary, len(rows))}
	ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	for i, r := range rows {
		client, _, ok := strings.Cut(r.ID, ":")
		if !ok && r.Branches > 0 && !strings.ContainsAny(r.ID, " /") {
			client = r.ID
		} else if !ok {
			client = ""
		}
		l.Conversations[i] = api.ConversationSummary{Conversation: r.ID, Client: client, Engaged: r.Engaged, Created: ts(r.CreatedMs),
			LastActivity: ts(r.LastMs), Branches: r.Branches, Compiles: r.Compiles, Accepted: r.Accepted, Stamps: r.Stamps, Releases: r.Releases,
			Retries: r.Retries, Replies: r.Replies, Input: r.Input, Output: r.Output, CacheRead: r.CacheRead, CacheWrite: r.CacheWrite}
	}
	return l, nil
}

func (b *Binder) conversation(ctx context.Context, id string) (*api.ConversationState, error) {
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
	if n := relCount[binding.SignatureBranch]; n > 0 && !seen[binding.SignatureBranch] {
		add(binding.SignatureBranch)
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
	_, tree, _, err := b.db.SessionTree(ctx, c.id, b.trees.get(c.id))
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
		if _, in := tree.PathEntries(row.Branch); in || row.Branch == binding.SignatureBranch {
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
	// them (binding.Reaches).
	var keys []binding.Digest
	paths := map[string][]binding.PathEntry{}
	for _, r := range c.releases {
		if r.Branch == binding.SignatureBranch {
			continue
		}
		keys = append(keys, r.Key)
		if p, known := tree.PathEntries(r.Branch); known {
			paths[r.Branch] = toBindingPath(p)
		}
	}
	entries, err := b.db.BlockEntries(ctx, c.id, keys)
	if err != nil {
		return fmt.Errorf("entries of released blocks: %w", err)
	}
	rels := branchReleases(c.releases)
	for i := range out {
		tb := &out[i]
		at := &binding.ReleaseTree{At: tb.path, Paths: paths, Entries: entries}
		for _, r := range rels {
			if binding.Reaches(r, tb.state.Branch, at) {
				tb.state.Releases++
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
