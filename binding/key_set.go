package binding

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// keySet is the set of signed thinking keys one decision has met so far,
// for its repeat check (collect): a long conversation's decision asks it
// once for every block of the request, each turn. A Go map of the
// digests was a quarter of collect past a few thousand blocks (two probes
// a block, over slots a digest wide). Here a slot is the first 8 bytes of
// the key (a tag) and where the key is in the decision's table, so a probe
// reads one narrow slot; a key whose tag matches is compared whole, so a
// tag match of two keys (8 bytes of two SHA-256 digests) costs a compare,
// never a wrong answer.
//
// The slot is chosen from the tag mixed with a salt drawn once per set
// (maphash): a key's bytes are the digest of what the host sent, so a host
// could make many share their low bits, and a fixed choice would let it
// pile them onto one run of slots. The salt changes where keys go, never
// what the set answers.
type keySet struct {
	tags []uint64 // 0: empty
	at   []int32  // the key's index in the decision's table
	mask uint64
	salt uint64
}

// reset empties s for a decision of up to n keys, keeping its memory when
// it is large enough.
func (s *keySet) reset(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if s.salt == 0 {
		s.salt = maphash.String(maphash.MakeSeed(), "keySet") | 1
	}
	if cap(s.tags) >= size {
		s.tags, s.at = s.tags[:size], s.at[:size]
		clear(s.tags)
	} else {
		s.tags, s.at = make([]uint64, size), make([]int32, size)
	}
	s.mask = uint64(size - 1)
}

// add puts key, at index i of tb, in s, and reports whether s held it
// already (then it keeps the first). tb is the table the indices are
// into. reset must have been called for at least as many keys.
func (s *keySet) add(key *Digest, i int, tb []tblock) bool {
	tag := binary.LittleEndian.Uint64(key[:8]) | 1 // never 0, the empty slot
	hi, _ := bits.Mul64(tag^s.salt, 0x9E3779B97F4A7C15)
	for j := hi & s.mask; ; j = (j + 1) & s.mask {
		switch s.tags[j] {
		case 0:
			s.tags[j], s.at[j] = tag, int32(i)
			return false
		case tag:
			if tb[s.at[j]].key == *key {
				return true
			}
		}
	}
}
