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

// ProxyUnit is bindery-proxy.service as shipped: ExecStart names
// %h/.local/bin/bindery proxy; `bindery service install --proxy` rewrites
// the binary's path and adds the listen address and upstream it is given.
//
//go:embed bindery-proxy.service
var ProxyUnit string
