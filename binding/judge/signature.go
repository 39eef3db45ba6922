package judge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// record is what a minted signature (or redacted data) carries. The judge
// encodes it, appends an HMAC under its secret, and can later read it back
// and detect any change.
type record struct {
	Kind      string   `json:"k"` // "thinking", "redacted_thinking" or "compaction"
	Model     string   `json:"m"`
	Bound     bool     `json:"b"`            // carries a conversation record
	System    [32]byte `json:"s"`            // top-level system digest at mint
	Tools     [32]byte `json:"t"`            // non-deferred tools digest at mint
	Chain     chain    `json:"c"`            // message chain just before the block
	Pred      [32]byte `json:"p"`            // key of the thinking block read just before it
	HasPred   bool     `json:"hp"`           // false: it was the first block the model read
	Text      [32]byte `json:"x,omitempty"`  // digest of the thinking text
	TextEmpty bool     `json:"xe,omitempty"` // the text was empty (omitted display)
	Reply     uint64   `json:"r"`            // which reply minted it
	Index     int      `json:"i"`            // position among the reply's thinking blocks
	Count     int      `json:"n"`            // how many thinking blocks the reply had
	Covers    chain    `json:"cv"`           // compaction: the chain state it stands for
	Content   [32]byte `json:"cc"`           // compaction: digest of its content
}

var sigEncoding = base64.RawURLEncoding.Strict()

func (j *Judge) seal(r record) string {
	payload, err := json.Marshal(r)
	if err != nil {
		panic(err) // a record of fixed-size fields always marshals
	}
	mac := hmac.New(sha256.New, j.secret)
	mac.Write(payload)
	return sigEncoding.EncodeToString(payload) + "." + sigEncoding.EncodeToString(mac.Sum(nil))
}

// open reads a signature back; ok is false for anything not minted by this
// judge exactly as given (one flipped character is enough).
func (j *Judge) open(sig string) (record, bool) {
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
	var r record
	if err := json.Unmarshal(payload, &r); err != nil {
		return record{}, false
	}
	return r, true
}

// keyOf identifies a thinking block for predecessor links: the digest of its
// signature (thinking) or data (redacted_thinking).
func keyOf(sig string) [32]byte { return sha256.Sum256([]byte(sig)) }

func textDigest(s string) [32]byte { return sha256.Sum256([]byte("judge/text\x00" + s)) }
