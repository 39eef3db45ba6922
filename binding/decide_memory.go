package binding

// DecideMemory is a decision's scratch arrays, kept by the caller between
// compiles (the daemon keeps one per conversation): a long conversation's
// decision sized a block table, a key set and an index map by its
// thousands of blocks every turn, and the runtime zeroed and collected
// them each time. A Compile given a DecideMemory builds its scratch in it;
// nothing it returns refers to it, so the next Compile may reuse it. One
// Compile at a time uses a DecideMemory; the zero value is ready.
type DecideMemory struct {
	tb       []tblock
	seen     keySet
	parent   []int
	depth    []int
	idx      map[Digest]int
	dropped  []bool
	stripped []int
	msgStart []Digest
	// a record's arrays before ShareTail (CompileInput.Share)
	sent   []SentMessage
	kept   []KeptBlock
	blocks []uint64
}

// decideMemoryKeys bounds the maps a DecideMemory keeps: past it a map is
// dropped after use (a clear costs its size, which one outsized request
// must not leave every later turn paying).
const decideMemoryKeys = 1 << 16

// keepMaps empties m's maps for a decision, or drops them.
func (m *DecideMemory) keepMaps() {
	if len(m.seen.tags) > 2*decideMemoryKeys {
		m.seen = keySet{}
	}
	if len(m.idx) > decideMemoryKeys {
		m.idx = nil
	}
	if len(m.idx) > 0 {
		clear(m.idx)
	}
}

// ints is s resized to n, zeroed.
func ints(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n, withRoom(n))
	}
	s = s[:n]
	clear(s)
	return s
}

// withRoom is the capacity scratch for n elements is made with: a long
// conversation's next decision needs a few more, and arrays made to the
// exact size were made again, zeroed, every turn.
func withRoom(n int) int { return n + max(n/8, 32) }
