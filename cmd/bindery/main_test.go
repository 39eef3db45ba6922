package main

import (
	"testing"

	"github.com/my-pi/bindery/db/pgtest"
)

// TestMain stops the PostgreSQL cluster the shared tier's tests started
// (db/pgtest), if any.
func TestMain(m *testing.M) { pgtest.Main(m) }
