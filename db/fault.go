package db

import (
	"errors"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Fault is what kind of storage failure an error is.
type Fault int

const (
	FaultNone Fault = iota
	// FaultFull: the filesystem (or quota) holding the database is full.
	// The failed transaction rolled back whole; writes succeed again once
	// space is freed.
	FaultFull
	// FaultIO: the database cannot be read or written (an I/O error, a
	// read-only filesystem, a file that cannot be opened).
	FaultIO
)

// FaultOf classifies err by SQLite's primary result code (the low byte of
// an extended code such as SQLITE_IOERR_WRITE) or the errno under it.
func FaultOf(err error) Fault {
	if err == nil {
		return FaultNone
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL:
			return FaultFull
		case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
			return FaultIO
		}
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return FaultFull
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS):
		return FaultIO
	}
	return FaultNone
}
