package db

import (
	"testing"
)

// An error at the line the cursor stops at (an overlong line not ended
// yet) is recorded once, however often it is reported: again while it has
// not ended, and once more when it ends after a restart. Other errors are
// listed with their file and line.
func TestIngestErrorAtCursorOnce(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	path := "/s/long.jsonl"
	long := IngestError{Line: 2, Offset: 40, Reason: "line longer than 262144 bytes skipped"}
	at := Cursor{Path: path, Ino: 7, Offset: 40, Lines: 1}
	batches := []Batch{
		{Kind: Found, Path: path, Cursor: at, Header: &Header{ID: "s1", Version: 3, Cwd: "/"}, Errors: []IngestError{long}},
		{Kind: Grew, Path: path, Cursor: at, Errors: []IngestError{long}},
		{Kind: Grew, Path: path, Cursor: Cursor{Path: path, Ino: 7, Offset: 900000, Lines: 3},
			Entries: []Entry{{Line: 3, Offset: 899000, Length: 1000, Type: "message", ID: "e1"}},
			Errors:  []IngestError{long, {Line: 3, Offset: 899500, Reason: "not JSON"}}},
	}
	var events int
	for _, b := range batches {
		res, err := d.Ingest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Events {
			if e.Type == EventIngestError {
				events++
			}
		}
	}
	errs, err := d.IngestErrors(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || errs[1].Offset != 40 || errs[1].Line != 2 || errs[1].Path != path || errs[1].Session != "s1" ||
		errs[0].Line != 3 || errs[0].Reason != "not JSON" {
		t.Errorf("errors %+v", errs)
	}
	if events != 2 {
		t.Errorf("%d ingest-error events, want 2", events)
	}
	if fe, err := d.FileIngestErrors(ctx, path, 10); err != nil || len(fe) != 2 || fe[0].Line != 2 {
		t.Errorf("file errors %+v, %v", fe, err)
	}
	if se, err := d.IngestErrors(ctx, "other", 10); err != nil || len(se) != 0 {
		t.Errorf("errors of another session %+v, %v", se, err)
	}
}
