package judgetest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// record is what a minted signature (or redacted data) carries. The judge
// encodes it, appends an HMAC under its secret, and can later read it back
// and detect any change.
type record struct {
	Kind      string // "thinking", "redacted_thinking" or "compaction"
	Model     string
	Account   string   // the account that minted it (Call.Account)
	Bound     bool     // carries a conversation record
	System    [32]byte // top-level system digest at mint
	Tools     [32]byte // non-deferred tools digest at mint
	Chain     chain    // message chain just before the block
	Pred      [32]byte // key of the thinking block read just before it
	HasPred   bool     // false: it was the first block the model read
	Text      [32]byte // digest of the thinking text
	TextEmpty bool     // the text was empty (omitted display)
	Reply     uint64   // which reply minted it
	Index     int      // position among the reply's thinking blocks
	Count     int      // how many thinking blocks the reply had
	Covers    chain    // compaction: the chain state it stands for
	Content   [32]byte // compaction: digest of its content
	Under     [32]byte // thinking: key of the compaction block in place when it was minted; compaction: the one its request began with (zero: none)
	LastRole  string   // compaction: role of the last message it stands for
	// compaction, with Under set: in its request, the first message after
	// the earlier block was merged into what that block stood for
	// (UnderMerged), or there was none (UnderOpen: the first message kept
	// after this block decides for both)
	UnderMerged, UnderOpen bool
}

var sigEncoding = base64.RawURLEncoding.Strict()

// encode lays a record out in a fixed binary form (compact signatures keep
// simulated request bodies small).
func (r record) encode() []byte {
	b := make([]byte, 0, 320)
	b = append(b, byte(len(r.Kind)))
	b = append(b, r.Kind...)
	b = append(b, byte(len(r.Model)))
	b = append(b, r.Model...)
	b = append(b, byte(len(r.LastRole)))
	b = append(b, r.LastRole...)
	b = append(b, byte(len(r.Account)))
	b = append(b, r.Account...)
	flags := byte(0)
	if r.Bound {
		flags |= 1
	}
	if r.HasPred {
		flags |= 2
	}
	if r.TextEmpty {
		flags |= 4
	}
	if r.UnderMerged {
		flags |= 8
	}
	if r.UnderOpen {
		flags |= 16
	}
	b = append(b, flags)
	for _, d := range [][32]byte{r.System, r.Tools, r.Chain, r.Pred, r.Text, r.Covers, r.Content, r.Under} {
		b = append(b, d[:]...)
	}
	b = binary.BigEndian.AppendUint64(b, r.Reply)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Index))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Count))
	return b
}

func decodeRecord(b []byte) (record, bool) {
	var r record
	str := func() (string, bool) {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return "", false
		}
		s := string(b[1 : 1+int(b[0])])
		b = b[1+int(b[0]):]
		return s, true
	}
	var ok bool
	if r.Kind, ok = str(); !ok {
		return r, false
	}
	if r.Model, ok = str(); !ok {
		return r, false
	}
	if r.LastRole, ok = str(); !ok {
		return r, false
	}
	if r.Account, ok = str(); !ok {
		return r, false
	}
	if len(b) != 1+8*32+8+4+4 {
		return r, false
	}
	r.Bound, r.HasPred, r.TextEmpty = b[0]&1 != 0, b[0]&2 != 0, b[0]&4 != 0
	r.UnderMerged, r.UnderOpen = b[0]&8 != 0, b[0]&16 != 0
	b = b[1:]
	for _, d := range []*[32]byte{&r.System, &r.Tools, (*[32]byte)(&r.Chain), &r.Pred, &r.Text, (*[32]byte)(&r.Covers), &r.Content, &r.Under} {
		copy(d[:], b[:32])
		b = b[32:]
	}
	r.Reply = binary.BigEndian.Uint64(b)
	r.Index = int(binary.BigEndian.Uint32(b[8:]))
	r.Count = int(binary.BigEndian.Uint32(b[12:]))
	return r, true
}

func (j *Judge) seal(r record) string {
	payload := r.encode()
	mac := hmac.New(sha256.New, j.secret)
	mac.Write(payload)
	return sigEncoding.EncodeToString(payload) + "." + sigEncoding.EncodeToString(mac.Sum(nil))
}

// open reads a signature back; ok is false for anything not minted by this
// judge exactly as given (one flipped character is enough).
func (j *Judge) open(sig string) (record, bool) {
	j.mu.Lock()
	r, ok := j.opened[sig]
	j.mu.Unlock()
	if ok {
		return r, true
	}
	r, ok = j.verify(sig)
	if ok {
		j.mu.Lock()
		if len(j.opened) >= maxCachedMessages {
			clear(j.opened)
		}
		j.opened[sig] = r
		j.mu.Unlock()
	}
	return r, ok
}

func (j *Judge) verify(sig string) (record, bool) {
	p, m, found := strings.Cut(sig, ".")
	if !found {
		return record{}, false
	}
	payload, err1 := sigEncoding.DecodeString(p)
	sum, err2 := sigEncoding.DecodeString(m)
	if err1 != nil || err2 != nil {
		return record{}, false
	}
	// Re-encoding must give back the exact text (no alternative spellings).
	if sigEncoding.EncodeToString(payload) != p || sigEncoding.EncodeToString(sum) != m {
		return record{}, false
	}
	mac := hmac.New(sha256.New, j.secret)
	mac.Write(payload)
	if !hmac.Equal(sum, mac.Sum(nil)) {
		return record{}, false
	}
	return decodeRecord(payload)
}

// keyOf identifies a thinking block for predecessor links: the digest of its
// signature (thinking) or data (redacted_thinking).
func keyOf(sig string) [32]byte { return sha256.Sum256([]byte(sig)) }

func textDigest(s string) [32]byte { return sha256.Sum256([]byte("judge/text\x00" + s)) }
