package reporter

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/my-pi/bindery/watcher"
)

// pi16Missing: a pi 1.6 usage or context_edit entry ingested before schema
// version 6, which the index holds with none of what the report reads of
// it (kind, model and usage; target and replacement).
func pi16Missing(e watcher.Entry) bool {
	switch e.Type {
	case "usage":
		return e.UsageKind == "" && e.Usage == nil
	case "context_edit":
		return e.TargetID == ""
	}
	return false
}

// Pi16FromFile is the fallback for those rows: it reads each one's line
// back from the session file at its recorded offset (read only) and takes
// what the watcher parses from it now. A line that no longer parses as the
// same entry (the file was rewritten since) is left as it was, and so is
// every entry when the file cannot be opened, which is then the error.
func Pi16FromFile(path string, version int, entries []watcher.Entry) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var buf []byte
	for i := range entries {
		e := &entries[i]
		if !pi16Missing(*e) || e.Length <= 0 || e.Length > maxCostLine {
			continue
		}
		if cap(buf) < e.Length {
			buf = make([]byte, e.Length)
		}
		n, err := f.ReadAt(buf[:e.Length], e.Offset)
		if n != e.Length {
			if err == nil || errors.Is(err, io.EOF) {
				return nil // the file is shorter now: rewritten
			}
			return fmt.Errorf("read %s at %d: %w", path, e.Offset, err)
		}
		p := watcher.Parser{Path: path, State: watcher.ParseState{Version: version, Values: 1}}
		got := p.Line(buf[:n], e.Offset).Entry
		if got == nil || got.Type != e.Type || got.ID != e.ID {
			continue
		}
		e.UsageKind, e.Usage, e.Model, e.Provider = got.UsageKind, got.Usage, got.Model, got.Provider
		e.TargetID, e.EditOmit, e.Thinking = got.TargetID, got.EditOmit, got.Thinking
	}
	return nil
}
