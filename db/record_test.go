package db

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/my-pi/bindery/binding"
)

func fullRecord() *binding.CompileRecord {
	return &binding.CompileRecord{
		ID: "c_1", Conversation: "conv", Branch: "leaf", Seq: 1 << 40, Model: "claude-fable-5-2", Account: "5f1a9c",
		Binds: true, Engaged: true, DryRun: true, Accepted: true, Refused: true,
		Seed: bdigest("s"), End: bdigest("e"), LastRead: bdigest("l"), LastRole: "user", Through: []binding.Digest{bdigest("t1"), bdigest("t0")},
		Kept: []binding.KeptBlock{{Key: bdigest("k"), Orig: binding.Pos{Message: 3, Block: 1}, Sent: binding.Pos{Message: 2, Block: 0}, Unreadable: true},
			{Key: bdigest("k2"), Orig: binding.Pos{Message: 5, Block: 0}, Sent: binding.Pos{Message: 4, Block: 0}}},
		Sent:   []binding.SentMessage{{Orig: 0, Frame: 1<<63 + 5}, {Orig: 1, Frame: 2, Blocks: []uint64{}}, {Orig: 3, Frame: 3, Blocks: []uint64{7, 1 << 60}}},
		Strips: []binding.Release{{Key: bdigest("x"), Reason: "gap", Compile: "c_1", Message: -1, Path: "messages.1.content.0", Seq: -7}},
	}
}

func TestRecordCodecRoundTrip(t *testing.T) {
	for _, rec := range []*binding.CompileRecord{fullRecord(), {}} {
		got, err := decodeRecord(encodeRecord(rec))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, rec)
		}
	}
	// every truncation is an error, never a panic or a wrong record
	b := encodeRecord(fullRecord())
	for i := 0; i < len(b); i++ {
		if _, err := decodeRecord(b[:i]); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
	if _, err := decodeRecord(append(b, 0)); err == nil {
		t.Fatal("trailing byte decoded")
	}
	if _, err := decodeRecord([]byte{9}); err == nil {
		t.Fatal("unknown format decoded")
	}
	// format 4 (before Account) still reads, with Account ""
	old := fullRecord()
	old.Account = ""
	v4 := encodeRecord(old)
	v4 = append([]byte{4}, v4[1:len(v4)-1]...)
	if got, err := decodeRecord(v4); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("format 4 record: %+v %v", got, err)
	}
	// format 2 (before Through) still reads, with Through nil
	old.Through = nil
	v2 := encodeRecord(old)
	v2 = append([]byte{2}, v2[1:len(v2)-2]...)
	if got, err := decodeRecord(v2); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("format 2 record: %+v %v", got, err)
	}
	// format 1 (before LastRole) still reads, with LastRole ""
	old.LastRole = ""
	v1 := encodeRecord(old)
	v1 = append([]byte{1}, v1[1:len(v1)-3]...)
	if got, err := decodeRecord(v1); err != nil || !reflect.DeepEqual(got, old) {
		t.Fatalf("format 1 record: %+v %v", got, err)
	}
	// older JSON records still read
	if got, err := decodeRecord([]byte(`{"ID":"old","Seq":3}`)); err != nil || got.ID != "old" || got.Seq != 3 {
		t.Fatalf("JSON record: %+v %v", got, err)
	}
}

// The codec names every field it carries; a field added to the record
// types must be added to the codec (and here), or compiles would lose it
// across a restart.
func TestRecordCodecCoversEveryField(t *testing.T) {
	want := map[reflect.Type][]string{
		reflect.TypeFor[binding.CompileRecord](): {"ID", "Conversation", "Branch", "Seq", "Model", "Account", "Binds", "Engaged", "DryRun", "Accepted", "Refused", "Seed", "End", "LastRole", "Through", "LastRead", "Kept", "Sent", "Strips"},
		reflect.TypeFor[binding.KeptBlock]():     {"Key", "Orig", "Sent", "Unreadable"},
		reflect.TypeFor[binding.Pos]():           {"Message", "Block"},
		reflect.TypeFor[binding.SentMessage]():   {"Orig", "Frame", "Blocks"},
		reflect.TypeFor[binding.Release]():       {"Key", "Reason", "Compile", "Message", "Path", "Seq"},
	}
	for typ, fields := range want {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%s has fields %v; the record codec carries %v: extend db/record.go", typ, got, fields)
		}
	}
}

func BenchmarkRecordCodec(b *testing.B) {
	rec := fullRecord()
	for i := 0; i < 500; i++ {
		rec.Sent = append(rec.Sent, binding.SentMessage{Orig: i, Frame: uint64(i), Blocks: []uint64{1, 2, 3}})
	}
	for i := 0; i < 250; i++ {
		rec.Kept = append(rec.Kept, binding.KeptBlock{Key: bdigest(string(rune(i)))})
	}
	b.Run("binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeRecord(encodeRecord(rec)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(encodeRecord(rec))), "bytes")
	})
	b.Run("json", func(b *testing.B) {
		var n int
		for b.Loop() {
			j, err := json.Marshal(rec)
			if err != nil {
				b.Fatal(err)
			}
			n = len(j)
			var back binding.CompileRecord
			if err := json.Unmarshal(j, &back); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "bytes")
	})
}
