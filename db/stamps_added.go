package db

import (
	"sync"

	"github.com/my-pi/bindery/binding"
)

// stampsAdded is the log of the stamps recorded lately, by commit: what a
// cache of keys found without a stamp needs to stay exact. A stamp never
// changes once recorded and none is ever deleted, so a key read without a
// stamp stays without one until a commit records it, and that commit is
// here (StampsAddedSince). The log is bounded; a reader older than its
// start learns only that it must read again.
type stampsAdded struct {
	mu    sync.Mutex
	gen   uint64             // commits logged so far
	first uint64             // the number of keys[0]'s commit
	keys  [][]binding.Digest // per logged commit, oldest first
	total int                // keys in keys
}

// The log's bounds: commits (a turn's accept is one) and keys in all.
const (
	stampsAddedCommits = 1024
	stampsAddedKeys    = 1 << 16
)

// logged records a commit's new stamps. It runs after the commit (a
// reader that finds a key absent before that has the commit in the log).
func (s *stampsAdded) logged(keys []binding.Digest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, keys)
	s.total += len(keys)
	s.gen++
	drop := 0
	for n := len(s.keys); n-drop > 0 && (n-drop > stampsAddedCommits || s.total > stampsAddedKeys); drop++ {
		s.total -= len(s.keys[drop])
	}
	if drop > 0 {
		clear(s.keys[:drop])
		s.keys = append(s.keys[:0], s.keys[drop:]...)
		s.first += uint64(drop)
	}
}

// StampsAddedSince is every key a commit recorded a stamp for since now
// was g (an earlier answer's now; 0 the first time), and now. ok false:
// g is older than the log remembers, and any key may have a stamp since.
// Load it before a read of stamps: a commit after the load is in the next
// answer, one before it is seen by the read.
func (d *DB) StampsAddedSince(g uint64) (keys []binding.Digest, now uint64, ok bool) {
	s := &d.added
	s.mu.Lock()
	defer s.mu.Unlock()
	if g > s.gen || g < s.first {
		return nil, s.gen, false
	}
	for _, ks := range s.keys[g-s.first:] {
		keys = append(keys, ks...)
	}
	return keys, s.gen, true
}

// StampsLogged is the log's position now: StampsAddedSince of it, later,
// answers the commits since.
func (d *DB) StampsLogged() uint64 {
	s := &d.added
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}
