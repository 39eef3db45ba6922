// Package bindery holds what the whole module shares and a go:embed cannot
// reach from a subfolder: the SQLite schema.
package bindery

import _ "embed"

// Schema is the complete schema of a new database (schema.sql). Databases
// made by an earlier release are brought up to it by the forward-only
// migrations in db/.
//
//go:embed schema.sql
var Schema string
