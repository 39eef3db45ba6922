package watcher

import "os"

// fileID is unknown on Windows (os.FileInfo carries no file index there):
// a file is known by its path alone, so a rename is read as a new file.
// bindery serve does not run on Windows (cmd/bindery says so at start);
// this keeps the client commands and the packages building.
func fileID(os.FileInfo) FileID { return FileID{} }

// openFlags: Windows has no FIFOs to block on.
const openFlags = 0
