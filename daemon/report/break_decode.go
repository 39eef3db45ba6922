package report

import (
	"encoding/json"
	"strconv"

	"github.com/my-pi/bindery/api/jsonscan"
)

// A cold report decodes every session's breaks, one stored row each
// (Encode). encoding/json's reflection over them was two thirds of
// DecodeAggregate, and a third of a cold report of a 1 GB archive.
// decodeBreak reads in place the shape Encode writes (json.Marshal of a
// PendingBreak: its own keys, each once; strings, integers, numbers, null
// for a missing cost) and hands any other text to json.Unmarshal, so what
// it decodes, and every error, is json.Unmarshal's (FuzzDecodeBreak).
func decodeBreak(b []byte, pb *PendingBreak) error {
	if decodeBreakShape(b, pb) {
		return nil
	}
	*pb = PendingBreak{}
	return json.Unmarshal(b, pb)
}

// breakKey is key's index among PendingBreak's JSON keys, in the order
// json.Marshal writes them (decodeBreakShape's bit for it), -1 for any
// other key.
func breakKey(key []byte) int {
	switch string(key) {
	case "session":
		return 0
	case "request":
		return 1
	case "entryId":
		return 2
	case "line":
		return 3
	case "timestamp":
		return 4
	case "cycle":
		return 5
	case "turn":
		return 6
	case "model":
		return 7
	case "readBefore":
		return 8
	case "readAfter":
		return 9
	case "left":
		return 10
	case "reusable":
		return 11
	case "rewritten":
		return 12
	case "gap":
		return 13
	case "cost":
		return 14
	case "excess":
		return 15
	case "cause":
		return 16
	case "parent":
		return 17
	}
	return -1
}

// decodeBreakShape decodes b into pb when b is in Encode's shape, and
// reports whether it was; pb is left alone when not.
func decodeBreakShape(b []byte, pb *PendingBreak) bool {
	if !jsonscan.Valid(b) {
		return false
	}
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	var out PendingBreak
	var seen uint32
	costs := new([2]float64)
	for {
		key, v, ok := jsonscan.NextMember(b, &i)
		if !ok {
			break
		}
		end, ok := jsonscan.SkipValue(b, v)
		if !ok {
			return false
		}
		f := breakKey(key)
		if f < 0 || seen&(1<<f) != 0 {
			return false // a key of another case, an unknown or a repeated one: json.Unmarshal's rules
		}
		seen |= 1 << f
		val := b[v:end]
		if !breakField(&out, f, val, costs) {
			return false
		}
		i = end
	}
	*pb = out
	return true
}

// breakField sets field f (breakKey) of pb from its raw value, when it is
// of the field's kind as Encode writes it. costs is where a cost's value
// goes (one allocation for both of a break's).
func breakField(pb *PendingBreak, f int, val []byte, costs *[2]float64) bool {
	str := func(dst *string) bool {
		if len(val) < 2 || val[0] != '"' {
			return false
		}
		s, err := jsonscan.Unescape(val[1 : len(val)-1])
		*dst = s
		return err == nil
	}
	asInt := func(dst *int) bool {
		n, ok := decimal(val)
		*dst = int(n)
		return ok && int64(int(n)) == n
	}
	number := func(dst *float64) bool {
		if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
			return false
		}
		x, err := strconv.ParseFloat(string(val), 64)
		*dst = x
		return err == nil
	}
	optional := func(dst **float64, x *float64) bool {
		if string(val) == "null" {
			*dst = nil
			return true
		}
		*dst = x
		return number(x)
	}
	b := &pb.Break
	var ok bool
	switch f {
	case 0:
		return str(&b.Session)
	case 1:
		return asInt(&b.Request)
	case 2:
		return str(&b.EntryID)
	case 3:
		return asInt(&b.Line)
	case 4:
		return str(&b.Timestamp)
	case 5:
		return asInt(&b.Cycle)
	case 6:
		return asInt(&b.Turn)
	case 7:
		return str(&b.Model)
	case 8:
		b.ReadBefore, ok = decimal(val)
	case 9:
		b.ReadAfter, ok = decimal(val)
	case 10:
		b.Left, ok = decimal(val)
	case 11:
		b.Reusable, ok = decimal(val)
	case 12:
		b.Rewritten, ok = decimal(val)
	case 13:
		return number(&b.Gap)
	case 14:
		return optional(&b.Cost, &costs[0])
	case 15:
		return optional(&b.Excess, &costs[1])
	case 16:
		if !str(&b.Cause) {
			return false
		}
		for _, c := range causes {
			if b.Cause == c {
				b.Cause = c // the constant: a cause is one of a few
			}
		}
		return true
	case 17:
		return str(&pb.Parent)
	}
	return ok
}

// causes are the values a break's cause is stored with.
var causes = [...]string{CauseCompaction, CauseModel, CauseIdle, CauseUnknown}

// decimal is the integer a JSON number of digits (and a leading minus)
// writes, as strconv.ParseInt(val, 10, 64) reads it; ok false for any
// other number (a fraction or exponent: json.Unmarshal refuses those for
// an integer field) and out of int64's range.
func decimal(val []byte) (int64, bool) {
	neg := len(val) > 0 && val[0] == '-'
	digits := val
	if neg {
		digits = val[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // 19 digits fit in a uint64
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), true
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}
