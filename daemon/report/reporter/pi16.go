package reporter

import "github.com/my-pi/bindery/watcher"

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
	return readBack(path, version, entries, pi16Missing, func(e, got *watcher.Entry) {
		if got.Type != e.Type || got.ID != e.ID {
			return
		}
		e.UsageKind, e.Usage, e.Model, e.Provider = got.UsageKind, got.Usage, got.Model, got.Provider
		e.TargetID, e.EditOmit, e.Thinking = got.TargetID, got.EditOmit, got.Thinking
	})
}
