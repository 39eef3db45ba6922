package daemon

import (
	"bytes"
	"encoding/json"
	"math"

	"github.com/my-pi/bindery/db"
)

// maxTokens bounds a usage count: a reply's input is at most a few
// million tokens; a count past 10^12 is not a count, and summed over a
// year of replies it could overflow the sums the report makes.
const maxTokens = 1e12

// replyUsage is the usage an accept carries: the call's usage, else the
// usage of a whole response given as the reply (bindery proxy's JSON
// answers). ok is false when neither names any; a usage that is there
// but unreadable, or a count that is not a whole number in [0, 10^12],
// leaves those counts unknown (nil), and the accept goes on.
func replyUsage(usage, reply json.RawMessage) (u db.AcceptUsage, ok bool) {
	raw := bytes.TrimSpace(usage)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		var whole struct {
			Usage json.RawMessage `json:"usage"`
		}
		if len(reply) == 0 || json.Unmarshal(reply, &whole) != nil || len(whole.Usage) == 0 {
			return u, false
		}
		raw = whole.Usage
	}
	var fields struct {
		Input         json.RawMessage `json:"input_tokens"`
		Output        json.RawMessage `json:"output_tokens"`
		CacheRead     json.RawMessage `json:"cache_read_input_tokens"`
		CacheCreation json.RawMessage `json:"cache_creation_input_tokens"`
		Breakdown     struct {
			Write5m json.RawMessage `json:"ephemeral_5m_input_tokens"`
			Write1h json.RawMessage `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
	}
	if json.Unmarshal(raw, &fields) != nil {
		// Not an object of that shape: given, but nothing in it is known.
		return u, true
	}
	u.Input, u.Output, u.CacheRead = count(fields.Input), count(fields.Output), count(fields.CacheRead)
	u.CacheWrite = count(fields.CacheCreation)
	w5, w1 := count(fields.Breakdown.Write5m), count(fields.Breakdown.Write1h)
	u.CacheWrite1h = w1
	if u.CacheWrite == nil && w5 != nil && w1 != nil {
		v := *w5 + *w1
		u.CacheWrite = &v
	}
	return u, true
}

// count reads one token count: a JSON whole number in [0, maxTokens].
func count(raw json.RawMessage) *int64 {
	if len(raw) == 0 {
		return nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < 0 || f > maxTokens || f != math.Trunc(f) {
		return nil
	}
	v := int64(f)
	return &v
}
