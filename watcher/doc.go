// Package watcher follows pi's session files: it finds them, reads only
// the bytes appended since the last read, parses complete lines into
// entries, and notices files that were rewritten, truncated or removed.
//
// The watcher never writes a session file. It keeps no durable state of its
// own: the caller hands it the cursors it saved and receives each Batch
// through a sink; a cursor advances only when the sink has returned nil, so
// the rows and the cursor that produced them are committed together.
//
// # How a file is followed
//
// Events from fsnotify (one watch per directory; fsnotify is not recursive,
// so every directory under a recursive root is watched as it appears) only
// mark paths dirty; a periodic rescan lists every root and looks at every
// file, so a lost event (queue overflow, a full watch table, a filesystem
// without inotify) delays a change by at most Config.Rescan and loses
// nothing. Hitting the watch limit is logged once; the rescans carry on.
//
// Looking at a file: open, fstat. A new identity (dev, inode) at a known
// path is a Removed batch for the old file and a Found batch for the new.
// Otherwise the saved Cursor.Check is verified (check.go: two 4 KiB windows,
// not the whole file); if the bytes before the cursor changed, or the file
// shrank, the file is read again from the start as a Rewritten batch. Then
// complete lines are read from the cursor (pread, so no buffered reader to
// reset), at most Config.MaxBatchBytes per batch; an unfinished last line
// stays unread until its newline arrives, and inotify's coalesced events
// never matter because every look reads to EOF. A file whose stat has not
// changed since it was last read to EOF is not reopened by a rescan.
//
// Memory is bounded by one read chunk (256 KiB) plus the longest line kept
// (Config.MaxLineBytes) plus one batch's entries, whatever the archive's size
// (with a GroupSink, two groups' during a rescan: one read ahead while the
// sink commits the other, group.go).
//
// A first scan meets many new files that each fit one batch: with
// Config.GroupSink set, a rescan hands runs of them over in one call (one
// transaction for the sink), and anything unusual, or a group refused,
// takes the ordinary way one file at a time.
//
// Parsing (Parser, parse.go) is a pure function of the line bytes and a
// small ParseState; see V1ID for the ids of v1 entries, which have none.
package watcher
