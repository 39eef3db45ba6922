package watcher

import "encoding/json"

// FileID is a file's identity on disk. A path whose FileID changes is a
// different file (deleted and recreated, or renamed into place).
type FileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// Cursor is everything needed to resume reading a file without re-reading
// what was ingested, and to notice that what was ingested has changed.
type Cursor struct {
	Path   string `json:"path"`
	ID     FileID `json:"id"`
	Offset int64  `json:"offset"` // end of the last complete line ingested
	Lines  int    `json:"lines"`  // complete lines ingested (the header is line 1)
	// Check is a digest that lets the watcher verify, cheaply, that the
	// bytes before Offset are still the ones ingested (a rewrite in place
	// keeps the inode and can make the file longer).
	Check []byte `json:"check"`
}

// BatchKind says what happened to a file.
type BatchKind string

const (
	Found     BatchKind = "found"     // first read of a file
	Grew      BatchKind = "grew"      // complete lines appended
	Rewritten BatchKind = "rewritten" // bytes before the cursor changed; Entries is the whole file again
	Removed   BatchKind = "removed"   // the file is gone
)

// Batch is one unit of ingest: what a single read of a single file found.
// A Rewritten batch replaces everything previously ingested from the file.
//
// A large file arrives as a Found (or Rewritten) batch followed by Grew
// batches, each at most Config.MaxBatchBytes of lines, each with its cursor.
type Batch struct {
	Kind BatchKind
	Path string // the file's path (also in Cursor.Path)
	// Cursor is the cursor after this batch. For Removed only Path and ID
	// are set: the identity of the file that is gone.
	Cursor  Cursor
	Header  *Header
	Entries []Entry
	Errors  []IngestError
	// Prepared is what Config.Prepare returned for a batch of a group
	// (group.go), nil otherwise: the sink's own.
	Prepared any
}

// Header is a session file's first line.
type Header struct {
	ID            string `json:"id"`
	Version       int    `json:"version"` // 1 when the field is missing
	Cwd           string `json:"cwd"`
	Timestamp     string `json:"timestamp"`
	ParentSession string `json:"parentSession,omitempty"` // also v1's branchedFrom

	// Legacy v1 headers also carry the model and thinking level.
	Provider      string `json:"provider,omitempty"`
	ModelID       string `json:"modelId,omitempty"`
	ThinkingLevel string `json:"thinkingLevel,omitempty"`
}

// Entry is one parsed non-header line. Only what bindery needs is decoded;
// the line itself stays in the file (Offset, Length) and is not copied.
type Entry struct {
	Line      int    `json:"line"`   // 1-based line number; the header is line 1
	Offset    int64  `json:"offset"` // byte offset of the line in the file
	Length    int    `json:"length"` // bytes, newline included
	Type      string `json:"type"`   // session entry type, kept verbatim when unknown
	ID        string `json:"id"`     // v1 lines get a synthesized id from pi's entry index (V1ID)
	ParentID  string `json:"parentId,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`

	// message entries
	Role       string          `json:"role,omitempty"`
	Model      string          `json:"model,omitempty"`
	Provider   string          `json:"provider,omitempty"`
	API        string          `json:"api,omitempty"`
	StopReason string          `json:"stopReason,omitempty"`
	Usage      *Usage          `json:"usage,omitempty"`
	Thinking   []ThinkingBlock `json:"thinking,omitempty"`
	ToolCalls  int             `json:"toolCalls,omitempty"`
	// UserText is true for a user message (or custom_message) holding any
	// content that is not a tool result: it closes a thinking cycle.
	// Precisely: content pi would send as a user turn after dropping blank
	// text (user and custom roles, custom_message entries), a bashExecution
	// message not excluded from context, and a branch_summary with a
	// non-blank summary (pi sends it as user text at its place in the path).
	// Compaction summaries are not marked: pi puts them first in the context,
	// not at the compaction entry's position.
	UserText bool `json:"userText,omitempty"`
	// ToolCallID is a toolResult message's toolCallId.
	ToolCallID string `json:"toolCallId,omitempty"`
	// MessageTimestamp is message.timestamp (epoch ms), which is how pi's
	// context event (which carries no entry ids) maps messages to entries.
	MessageTimestamp int64 `json:"messageTimestamp,omitempty"`
	// Reply is an assistant message holding signed thinking in the
	// provider's wire shape (reply.go), set only by ReadReply; nil for
	// every other entry and in every batch.
	Reply []byte `json:"-"`

	// compaction
	FirstKeptEntryID string `json:"firstKeptEntryId,omitempty"`

	// custom and custom_message
	CustomType string `json:"customType,omitempty"`
	// Data is kept only for custom entries bindery reads (pi-condense's
	// context-prune-frontier); it is the entry's data field, verbatim.
	Data json.RawMessage `json:"data,omitempty"`

	// model_change / thinking_level_change
	ModelID       string `json:"modelId,omitempty"`
	ThinkingLevel string `json:"thinkingLevel,omitempty"`

	// branch_summary: fromId (pi sets it to the new parent, or "root").
	FromID string `json:"fromId,omitempty"`
	// label and context_edit: targetId; label: the label ("" when the label
	// was cleared).
	TargetID string `json:"targetId,omitempty"`
	Label    string `json:"label,omitempty"`
	// session_info: the display name ("" clears it in later pi versions).
	Name string `json:"name,omitempty"`

	// usage (pi 1.6): model-attributed spend that is no part of the model's
	// context, such as a cache warm. UsageKind is its kind ("cache_warm");
	// Provider, Model and Usage are the entry's own fields.
	UsageKind string `json:"usageKind,omitempty"`
	// context_edit (pi 1.6): TargetID is the edited entry; EditOmit says the
	// replacement is null (the target's messages leave what the model sees
	// from this edit on). Otherwise the replacement's content replaces the
	// target's, and Thinking holds the thinking blocks of that content
	// (pi's format, as in an assistant message).
	EditOmit bool `json:"editOmit,omitempty"`
}

// ThinkingBlock is one thinking block of an assistant message.
type ThinkingBlock struct {
	Index     int    `json:"index"`     // position in the message's content array
	Redacted  bool   `json:"redacted"`  // redacted_thinking (pi: redacted:true, data in thinkingSignature)
	Signed    bool   `json:"signed"`    // a non-empty signature (an aborted stream leaves it empty)
	SigDigest []byte `json:"sigDigest"` // SHA-256 of the signature (or redacted data); nil when unsigned
	Chars     int    `json:"chars"`     // length of the thinking text, for token estimates
}

// Usage is an assistant message's usage as pi wrote it. Fields pi did not
// write are nil, so "missing" and "zero" stay different.
type Usage struct {
	Input       *int64 `json:"input,omitempty"`
	Output      *int64 `json:"output,omitempty"`
	CacheRead   *int64 `json:"cacheRead,omitempty"`
	CacheWrite  *int64 `json:"cacheWrite,omitempty"`
	TotalTokens *int64 `json:"totalTokens,omitempty"`
	Cost        *Cost  `json:"cost,omitempty"`
	// pi 1.6: CacheWrite1h is the part of CacheWrite written with the
	// 1-hour TTL; Reasoning the part of Output that was thinking.
	CacheWrite1h *int64 `json:"cacheWrite1h,omitempty"`
	Reasoning    *int64 `json:"reasoning,omitempty"`
}

// Cost is pi's usage.cost, in USD.
type Cost struct {
	Input      *float64 `json:"input,omitempty"`
	Output     *float64 `json:"output,omitempty"`
	CacheRead  *float64 `json:"cacheRead,omitempty"`
	CacheWrite *float64 `json:"cacheWrite,omitempty"`
	Total      *float64 `json:"total,omitempty"`
}

// IngestError is a line bindery could not use. The line is skipped; nothing
// else in the file is lost. Kept is set for the rare line that was usable
// but odd (say, a message entry whose message is not an object): its Entry
// is in the batch and the error only records the oddity.
type IngestError struct {
	Path   string `json:"path"`
	Line   int    `json:"line"`
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
	Kept   bool   `json:"kept,omitempty"`
}
