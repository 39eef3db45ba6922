package daemon

import (
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// absentStamps caches the keys a conversation's compiles read and found
// without a stamp. A stamp, once recorded, never changes and is never
// deleted, so such a key stays without one until a commit records it; the
// store logs every such commit (db.StampsAddedSince), and settle drops the
// keys they stamped before each read. The cache is exact: a key in it has
// no stamp in the store as of settle.
type absentStamps struct {
	keys map[binding.Digest]struct{}
	at   uint64 // the log position the keys are current to
}

// absentCached bounds the keys kept; past it the cache starts again.
const absentCached = 1 << 16

// settle brings the cache current with the store's log of added stamps:
// call it before reading stamps, so what the read finds absent is current
// as of this log position or later.
func (a *absentStamps) settle(d *db.DB) {
	if a.keys == nil {
		a.at = d.StampsLogged()
		return
	}
	added, now, ok := d.StampsAddedSince(a.at)
	if !ok {
		a.keys = nil // older than the log: anything may be stamped since
	}
	for _, k := range added {
		delete(a.keys, k)
	}
	a.at = now
}

func (a *absentStamps) has(k binding.Digest) bool {
	_, ok := a.keys[k]
	return ok
}

// add records k as found without a stamp by a read made after settle.
func (a *absentStamps) add(k binding.Digest) {
	if a.keys == nil || len(a.keys) >= absentCached {
		a.keys = map[binding.Digest]struct{}{}
	}
	a.keys[k] = struct{}{}
}
