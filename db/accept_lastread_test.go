package db

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// recordBlob is the stored record of compile id, byte for byte.
func recordBlob(t *testing.T, d *DB, id string) []byte {
	t.Helper()
	var b []byte
	if err := d.readers.QueryRowContext(t.Context(), `SELECT record FROM compiles WHERE id = ?`, id).Scan(&b); err != nil {
		t.Fatalf("record of %s: %v", id, err)
	}
	return b
}

func loadRecord(t *testing.T, d *DB, id string) *binding.CompileRecord {
	t.Helper()
	c, found, err := d.Compile(t.Context(), id)
	if err != nil || !found || c.Record == nil {
		t.Fatalf("compile %s: found %v, record %v, %v", id, found, c.Record != nil, err)
	}
	return c.Record
}

// TestAcceptWritesLastReadNotRecord: an accept stores what it changes of
// a record (Accepted, LastRead) beside it, and the record stays the bytes
// the compile wrote; a reader sees the accepted record whole. A record
// accepted before migration 008 (rewritten then, last_read NULL) reads as
// it was written; a last_read that cannot be one is an error naming its
// compile, never a wrong LastRead.
func TestAcceptWritesLastReadNotRecord(t *testing.T) {
	d := mustOpen(t)
	read := bdigest("read")
	for _, c := range []struct {
		id       string
		lastRead binding.Digest
	}{{"c1", read}, {"c2", binding.Digest{}}} {
		rec := insertCompile(t, d, c.id, "conv", "b")
		before := recordBlob(t, d, c.id)
		err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			return tx.MarkAccepted(ctx, c.id, c.lastRead, 5, 1, 0)
		})
		if err != nil {
			t.Fatal(err)
		}
		if after := recordBlob(t, d, c.id); !bytes.Equal(before, after) {
			t.Fatalf("%s: the accept rewrote the record", c.id)
		}
		want := *rec
		want.Accepted, want.LastRead = true, c.lastRead
		if got := loadRecord(t, d, c.id); !reflect.DeepEqual(got, &want) {
			t.Fatalf("%s: loaded %+v, want %+v", c.id, got, &want)
		}
	}
	// not accepted: the record as compiled
	rec := insertCompile(t, d, "c3", "conv", "b")
	if got := loadRecord(t, d, "c3"); !reflect.DeepEqual(got, rec) || got.Accepted {
		t.Fatalf("c3: loaded %+v, want %+v", got, rec)
	}
	// accepted as releases before 008 did: the record rewritten, last_read NULL
	old := insertCompile(t, d, "c4", "conv", "b")
	old.Accepted, old.LastRead = true, bdigest("old-read")
	if _, err := d.writer.ExecContext(t.Context(), `UPDATE compiles SET accepted_ms = 3, record = ? WHERE id = 'c4'`, encodeRecord(old)); err != nil {
		t.Fatal(err)
	}
	if got := loadRecord(t, d, "c4"); !reflect.DeepEqual(got, old) {
		t.Fatalf("c4: loaded %+v, want %+v", got, old)
	}
	for _, bad := range []struct {
		id, set, want string
	}{
		{"c1", `last_read = x'0102'`, "compile c1: last_read is 2 bytes, not 32"},
		{"c3", `last_read = zeroblob(32)`, "compile c3: last_read set on a compile not accepted"},
	} {
		if _, err := d.writer.ExecContext(t.Context(), `UPDATE compiles SET `+bad.set+` WHERE id = ?`, bad.id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := d.Compile(t.Context(), bad.id); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%s with %s: %v, want %q", bad.id, bad.set, err, bad.want)
		}
	}
}

// TestUpgradeFromVersion7KeepsAcceptedRecords: a version 7 database, with a
// compile accepted the old way (record rewritten) and one not accepted yet,
// opens at the latest version; both read as before, and the pending one
// is then accepted the new way.
func TestUpgradeFromVersion7KeepsAcceptedRecords(t *testing.T) {
	raw, path := databaseAt(t, "v7.db", 7)
	accepted := testRecord("acc", "conv", "b", 1)
	accepted.Accepted, accepted.LastRead = true, bdigest("acc-read")
	pending := testRecord("pend", "conv", "b", 2)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO compiles (seq, id, conversation, branch, created_ms, accepted_ms, stamped, released, record) VALUES (1, 'acc', 'conv', 'b', 1, 2, 1, 0, ?)`, []any{encodeRecord(accepted)}},
		{`INSERT INTO compiles (seq, id, conversation, branch, created_ms, record) VALUES (2, 'pend', 'conv', 'b', 3, ?)`, []any{encodeRecord(pending)}},
	} {
		if _, err := raw.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	raw.Close()

	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("open a version 7 database: %v", err)
	}
	defer d.Close()
	if v, err := d.SchemaVersion(t.Context()); err != nil || v != LatestSchemaVersion() || v < 8 {
		t.Fatalf("upgraded to version %d (%v), want %d", v, err, LatestSchemaVersion())
	}
	if got := loadRecord(t, d, "acc"); !reflect.DeepEqual(got, accepted) {
		t.Fatalf("accepted before the upgrade: loaded %+v, want %+v", got, accepted)
	}
	if got := loadRecord(t, d, "pend"); !reflect.DeepEqual(got, pending) {
		t.Fatalf("pending: loaded %+v, want %+v", got, pending)
	}
	if err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		return tx.MarkAccepted(ctx, "pend", bdigest("pend-read"), 4, 0, 0)
	}); err != nil {
		t.Fatal(err)
	}
	want := *pending
	want.Accepted, want.LastRead = true, bdigest("pend-read")
	if got := loadRecord(t, d, "pend"); !reflect.DeepEqual(got, &want) {
		t.Fatalf("accepted after the upgrade: loaded %+v, want %+v", got, &want)
	}
}
