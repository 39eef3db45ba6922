// Package systemd carries bindery's user unit, so that `bindery service
// install` writes the very file this folder ships (and its tests check),
// not a second copy that could drift from it.
package systemd

import _ "embed"

// Unit is bindery.service as shipped: ExecStart names %h/.local/bin/bindery
// and no agent folder; the installer rewrites both for the user.
//
//go:embed bindery.service
var Unit string
