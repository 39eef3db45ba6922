package watcher

import (
	"slices"
	"strings"
	"time"
)

// ProblemKind names what the watcher cannot do now.
type ProblemKind string

const (
	FolderMissing    ProblemKind = "folder-missing"    // a session folder does not exist (watched for)
	FolderUnreadable ProblemKind = "folder-unreadable" // a session folder cannot be listed
	Unreadable       ProblemKind = "unreadable"        // a session file cannot be opened or read (retried with backoff)
	NotRegular       ProblemKind = "not-regular"       // a *.jsonl that is a FIFO, socket or device: refused unread
	LongLine         ProblemKind = "long-line"         // an overlong line without its newline: the file is read no further until it ends
)

// Problem is a condition that keeps the watcher from following something,
// for as long as it lasts: each is cleared when the folder appears, the file
// becomes readable, the special file goes away, the long line ends. Lines
// bindery skipped are not problems but IngestErrors, recorded with their
// batch.
type Problem struct {
	Path   string      `json:"path"`
	Kind   ProblemKind `json:"kind"`
	Reason string      `json:"reason"`
	Since  time.Time   `json:"since"`
}

// setProblem records that path has problem kind, logging it the first
// time (a retried failure is logged by its retries).
func (w *Watcher) setProblem(path string, kind ProblemKind, reason string) {
	w.mu.Lock()
	old, had := w.problems[path]
	if had && old.Kind == kind && old.Reason == reason {
		w.mu.Unlock()
		return
	}
	p := Problem{Path: path, Kind: kind, Reason: reason, Since: time.Now()}
	if had && old.Kind == kind {
		p.Since = old.Since
	}
	w.problems[path] = p
	w.mu.Unlock()
	if !had || old.Kind != kind {
		w.log.Warn("cannot follow", "path", path, "problem", string(kind), "reason", reason)
	}
}

// clearProblem forgets path's problem, if it had one of the given kinds
// (any kind when none is given).
func (w *Watcher) clearProblem(path string, kinds ...ProblemKind) {
	w.mu.Lock()
	old, had := w.problems[path]
	if had && (len(kinds) == 0 || slices.Contains(kinds, old.Kind)) {
		delete(w.problems, path)
	} else {
		had = false
	}
	w.mu.Unlock()
	if had {
		w.log.Info("problem cleared", "path", path, "problem", string(old.Kind))
	}
}

func (w *Watcher) problemPaths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.problems))
	for p := range w.problems {
		out = append(out, p)
	}
	return out
}

// problemList is the problems sorted by path; the caller holds w.mu.
func (w *Watcher) problemList() []Problem {
	out := make([]Problem, 0, len(w.problems))
	for _, p := range w.problems {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return out
}
