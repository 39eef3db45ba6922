package report

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func breakSamples() []PendingBreak {
	cost, excess, zero, neg := 0.0123, 0.0099, 0.0, -0.5
	return []PendingBreak{
		{},
		{Break: Break{Session: "0193e6c4-aaaa-7000-8000-000000000001", Request: 7, EntryID: "a1b2c3d4", Line: 42,
			Timestamp: "2026-11-29T10:00:00.000Z", Cycle: 2, Turn: 3, Model: "claude-opus-4-5", ReadBefore: 120000,
			ReadAfter: 0, Left: 130000, Reusable: 125000, Rewritten: 125000, Gap: 61.25, Cost: &cost, Excess: &excess,
			Cause: "unknown"}, Parent: "p1"},
		{Break: Break{EntryID: `quote " and \ backslash`, Model: "é, 日本, \u2028, \x01", Gap: 1e-7, Cost: &zero, Cause: "idle"}},
		{Break: Break{Request: -1, Line: 1 << 40, ReadBefore: -1 << 62, Rewritten: 1<<63 - 1, Gap: -3, Cost: &neg}},
	}
}

// TestDecodeBreakShape: every break Encode writes is decoded in place
// (the fast path is taken, not json.Unmarshal), to the break encoded.
func TestDecodeBreakShape(t *testing.T) {
	for i, want := range breakSamples() {
		b, err := json.Marshal(&want)
		if err != nil {
			t.Fatal(err)
		}
		var got PendingBreak
		if !decodeBreakShape(b, &got) {
			t.Fatalf("break %d: %s is Encode's shape, but was not decoded in place", i, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("break %d: decoded %+v, want %+v", i, got, want)
		}
	}
}

// TestDecodeBreakKnowsEveryField: a break with every field set, whatever
// fields Break gains, is still decoded in place: a field decodeBreak does
// not know would send every stored break to json.Unmarshal, unseen.
func TestDecodeBreakKnowsEveryField(t *testing.T) {
	var want PendingBreak
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Struct:
				fill(f)
			case reflect.String:
				f.SetString("v" + v.Type().Field(i).Name)
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(i + 1))
			case reflect.Float64:
				f.SetFloat(float64(i) + 0.5)
			case reflect.Pointer:
				x := float64(i) + 0.25
				f.Set(reflect.ValueOf(&x))
			default:
				t.Fatalf("field %s is a %s: teach decodeBreak and this test its kind", v.Type().Field(i).Name, f.Kind())
			}
		}
	}
	fill(reflect.ValueOf(&want).Elem())
	b, err := json.Marshal(&want)
	if err != nil {
		t.Fatal(err)
	}
	var got PendingBreak
	if !decodeBreakShape(b, &got) {
		t.Fatalf("%s: a break with every field set was not decoded in place (a field breakKey does not know?)", b)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// TestDecodeBreakOtherText: text not in Encode's shape is json.Unmarshal's
// to decode, with its errors.
func TestDecodeBreakOtherText(t *testing.T) {
	for _, c := range []struct {
		text string
		fast bool // decoded in place
		err  bool
	}{
		{`{"session":"s","cost":null}`, true, false},
		{` {"line": 3 } `, true, false},
		{`{"Session":"s"}`, false, false},               // json.Unmarshal matches keys without case
		{`{"session":"a","session":"b"}`, false, false}, // the last wins
		{`{"session":"s","extra":[1,{"x":2}]}`, false, false},
		{`{"line":1.5}`, false, true},
		{`{"line":1e2}`, false, true},
		{`{"line":"3"}`, false, true},
		{`{"line":99999999999999999999}`, false, true},
		{`{"gap":1e400}`, false, true},
		{`{"session":null,"line":null}`, false, false},
		{`{"cost":"1"}`, false, true},
		{`{"session":"\u00e9\ud800"}`, true, false},
		{`{"session":"s"`, false, true},
		{`[]`, false, true},
		{`null`, false, false},
		{``, false, true},
	} {
		var fast PendingBreak
		if got := decodeBreakShape([]byte(c.text), &fast); got != c.fast {
			t.Errorf("%q: decoded in place %v, want %v", c.text, got, c.fast)
		}
		var got, want PendingBreak
		gerr := decodeBreak([]byte(c.text), &got)
		werr := json.Unmarshal([]byte(c.text), &want)
		if (gerr != nil) != c.err || (werr != nil) != c.err {
			t.Errorf("%q: error %v (json.Unmarshal: %v), want an error %v", c.text, gerr, werr, c.err)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%q: decoded %+v, json.Unmarshal %+v", c.text, got, want)
		}
	}
}

// FuzzDecodeBreak: whatever the text, decodeBreak decodes what
// json.Unmarshal decodes, and fails where it fails.
func FuzzDecodeBreak(f *testing.F) {
	for _, pb := range breakSamples() {
		b, _ := json.Marshal(&pb)
		f.Add(b)
	}
	f.Add([]byte(`{"Line":1,"line":2}`))
	f.Add([]byte(`{"cost":-0,"excess":1E5,"gap":-0.0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want PendingBreak
		gerr := decodeBreak(b, &got)
		werr := json.Unmarshal(b, &want)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", b, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", b, got, want)
		}
	})
}

// BenchmarkDecodeBreak: a stored break decoded in place, against the
// simplest baseline, json.Unmarshal of the same bytes, alternated in the
// same loop (-benchtime sets how many of each).
func BenchmarkDecodeBreak(b *testing.B) {
	text, err := json.Marshal(&breakSamples()[1])
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	var fast, base time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range batch {
			var pb PendingBreak
			if err := json.Unmarshal(text, &pb); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for range batch {
			var pb PendingBreak
			if err := decodeBreak(text, &pb); err != nil {
				b.Fatal(err)
			}
		}
		base += t1.Sub(t0)
		fast += time.Since(t1)
	}
	n := float64(b.N * batch)
	b.ReportMetric(float64(base.Nanoseconds())/n, "unmarshal-ns/break")
	b.ReportMetric(float64(fast.Nanoseconds())/n, "ns/break")
	b.ReportMetric(fast.Seconds()/base.Seconds(), "ratio")
}
