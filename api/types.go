package api

import (
	"encoding/json"
	"time"
)

// VersionHeader carries the daemon's version on every answer.
const VersionHeader = "Bindery-Version"

// Health is GET /v1/health.
type Health struct {
	Version       string         `json:"version"`
	PID           int            `json:"pid"`
	StartedAt     time.Time      `json:"startedAt"`
	UptimeSeconds float64        `json:"uptimeSeconds"`
	Socket        string         `json:"socket"`
	Database      DatabaseHealth `json:"database"`
	Watcher       WatcherHealth  `json:"watcher"`
	// Shared is the shared tier this machine joined (bindery serve
	// --shared); nil: this machine alone.
	Shared *SharedHealth `json:"shared,omitempty"`
}

// SharedHealth is the shared tier as this machine sees it.
type SharedHealth struct {
	Name    string `json:"name"`    // the DSN without its password
	Machine string `json:"machine"` // this machine's name in it
	Outbox  int    `json:"outbox"`  // stamps waiting to be shipped
	// OutboxLagMs is how long the oldest of them has waited (0: none).
	OutboxLagMs int64 `json:"outboxLagMs"`
	// TeamOutbox is the team report's facts waiting to be shipped.
	TeamOutbox int `json:"teamOutbox"`
	// ReadThroughs counts compiles that asked the tier for stamps this
	// machine lacked since the daemon started; ReadThroughMisses those it
	// did not answer within --shared-wait (their blocks were stripped);
	// ReadThroughFound the stamps found; ReadThroughWaitMs the time waited.
	ReadThroughs      int64 `json:"readThroughs"`
	ReadThroughMisses int64 `json:"readThroughMisses"`
	ReadThroughFound  int64 `json:"readThroughFound"`
	ReadThroughWaitMs int64 `json:"readThroughWaitMs"`
}

// DatabaseHealth describes the SQLite file.
type DatabaseHealth struct {
	Path          string `json:"path"`
	SchemaVersion int    `json:"schemaVersion"`
	SizeBytes     int64  `json:"sizeBytes"` // database plus WAL
	Entries       int64  `json:"entries"`
	Thinking      int64  `json:"thinkingBlocks"`
	IngestErrors  int64  `json:"ingestErrors"`
	LastEvent     int64  `json:"lastEvent"` // newest event seq
}

// WatcherHealth says how far ingest has got.
type WatcherHealth struct {
	Directories     []string `json:"directories"`
	Sessions        int      `json:"sessions"`
	RemovedSessions int      `json:"removedSessions"`
	Files           int      `json:"files"`
	IngestedBytes   int64    `json:"ingestedBytes"`
	// LagBytes is what the session files hold beyond what is ingested
	// (sizes now minus saved offsets; a torn last line counts).
	LagBytes int64 `json:"lagBytes"`
	// InitialScan is true once every file found at start-up was read.
	InitialScan bool      `json:"initialScan"`
	LastIngest  time.Time `json:"lastIngest,omitzero"`
	Running     bool      `json:"running"`
	Error       string    `json:"error,omitempty"`
	// LastRescan is when the watcher last finished listing every session
	// folder (every --rescan).
	LastRescan time.Time `json:"lastRescan,omitzero"`
	// Degraded is true when something is not being followed: the watcher
	// stopped, fsnotify is unavailable or at its limit, or Problems holds
	// something other than folder-missing. `bindery status` then exits 4.
	// A folder-missing problem alone is a folder pi has not created yet
	// (before pi's first session): listed, watched for, not degraded.
	Degraded bool `json:"degraded"`
	// Problems are what the watcher cannot follow now, by path: each lasts
	// until its cause goes away.
	Problems []WatcherProblem `json:"problems,omitempty"`
	// IngestErrors are the newest lines bindery skipped in live files,
	// newest first (at most 20; Database.IngestErrors counts them all).
	// They are history, not a degraded state: the rest of each file is
	// ingested.
	IngestErrors []IngestError `json:"ingestErrors,omitempty"`
}

// WatcherProblem is something the watcher cannot follow now.
type WatcherProblem struct {
	Path string `json:"path"`
	// Kind: folder-missing, folder-unreadable, unreadable (retried with
	// backoff), not-regular (a FIFO, socket or device named *.jsonl:
	// refused unread) or long-line (a line over --max-line-bytes without
	// its newline: the file is read no further until it ends).
	Kind   string    `json:"kind"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// IngestError is a line of a session file bindery skipped (or kept with
// an oddity), as recorded.
type IngestError struct {
	File    string    `json:"file"`
	Session string    `json:"session,omitempty"`
	Line    int       `json:"line"`
	Offset  int64     `json:"offset"`
	Reason  string    `json:"reason"`
	Time    time.Time `json:"time"`
}

// Session is one pi session in GET /v1/sessions.
type Session struct {
	ID             string `json:"id"`
	File           string `json:"file"`
	Cwd            string `json:"cwd"`
	Version        int    `json:"version"`
	ParentSession  string `json:"parentSession,omitempty"`
	Entries        int    `json:"entries"`
	Leaf           string `json:"leaf"` // pi's current leaf: the last entry in file order
	LastActivity   string `json:"lastActivity"`
	ThinkingBlocks int    `json:"thinkingBlocks"`
	// Engaged: the conversation named by the session id is engaged: bindery
	// accepted a reply in it (the first accept engages it, or a fork's
	// first compile when its parent is engaged), so from then on a thinking
	// block without a stamp is stripped (no-stamp). Read from the same row
	// as GET /v1/conversations/{id}'s engaged.
	Engaged bool `json:"engaged"`
	Removed bool `json:"removed,omitempty"`
}

// SessionList is GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// SessionDetail is GET /v1/sessions/{id}.
type SessionDetail struct {
	Session
	// Branches are the tree's leaves in file order; the current one has
	// Current set.
	Branches []Branch `json:"branches"`
	// Frontier has one element per branch, in the order of Branches.
	Frontier []Frontier `json:"frontier"`
	Stamps   int        `json:"stamps"`
	Releases int        `json:"releases"`
	// SameID lists, when more than one file's header carries this session
	// id (a copied file), every such file, the one shown first: the live
	// one with the latest last activity, a tie going to the file bindery
	// ingested last. Empty when the id is in one file.
	SameID []SessionFile `json:"sameId,omitempty"`
	// Problem is what keeps the watcher from following the session's
	// file now, if anything (the file is then read no further).
	Problem *WatcherProblem `json:"problem,omitempty"`
	// IngestErrors are the lines of the file bindery skipped, in file
	// order (at most 100).
	IngestErrors []IngestError `json:"ingestErrors,omitempty"`
}

// SessionFile is one of the files carrying a session id.
type SessionFile struct {
	File         string `json:"file"`
	Removed      bool   `json:"removed,omitempty"`
	LastActivity string `json:"lastActivity,omitempty"`
}

// Branch is one leaf and its path's length.
type Branch struct {
	Leaf         string `json:"leaf"`
	Current      bool   `json:"current"`
	Entries      int    `json:"entries"` // entries on the path root..leaf
	LastActivity string `json:"lastActivity"`
}

// Frontier is what is known of a branch's frontiers.
type Frontier struct {
	Branch string `json:"branch"` // leaf id
	// Owner is bindery's owner compile of the branch: the last accepted
	// compile made at an entry on its path ("" when none).
	Owner string `json:"owner,omitempty"`
	// Condense is pi-condense's last context-prune-frontier entry on the
	// branch, or null.
	Condense *CondenseFrontier `json:"condense"`
}

// CondenseFrontier is one context-prune-frontier entry.
type CondenseFrontier struct {
	Entry     string          `json:"entry"`
	Timestamp string          `json:"timestamp,omitempty"`
	Data      json.RawMessage `json:"data"` // pi-condense's PruneFrontier, verbatim
}
