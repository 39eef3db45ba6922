package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/my-pi/bindery/binding"
)

// The compaction store (migrations/005_compactions.sql): on-demand
// compaction blocks bindery vouches for, written by the accept of the
// compaction request, read by the compiles that send the block.
// InsertCompactions records on-demand compaction blocks (an accept's
// AcceptOutcome.Compactions), first-wins: a block already recorded keeps its
// row. It returns how many it added.
func (t *Tx) InsertCompactions(ctx context.Context, conversation string, cs []binding.Compaction, createdMs int64) (int, error) {
	tx := t.tx
	n := 0
	for _, c := range cs {
		var through []byte // NULL: none
		for _, d := range c.Through {
			through = append(through, d[:]...)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO compactions (key, chain, seed, last_role, compile, conversation, created_ms, through)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
			c.Key[:], c.Chain[:], c.Seed[:], c.LastRole, c.Compile, conversation, createdMs, through)
		if err != nil {
			return n, fmt.Errorf("insert compaction: %w", err)
		}
		if d, _ := res.RowsAffected(); d == 1 {
			n++
		}
	}
	return n, nil
}

// Compactions returns the recorded compaction blocks among keys (a compile
// loads binding.CompactionKeys of its request); a missing key has no row.
func (d *DB) Compactions(ctx context.Context, keys []binding.Digest) (map[binding.Digest]binding.Compaction, error) {
	out := make(map[binding.Digest]binding.Compaction, len(keys))
	for _, k := range keys {
		var c binding.Compaction
		var key, chain, seed, through []byte
		err := d.readRow(ctx, `SELECT key, chain, seed, last_role, compile, through FROM compactions WHERE key = ?`, k[:]).
			Scan(&key, &chain, &seed, &c.LastRole, &c.Compile, &through)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read compaction: %w", err)
		}
		copy(c.Key[:], key)
		copy(c.Chain[:], chain)
		copy(c.Seed[:], seed)
		if len(through)%32 != 0 {
			return nil, fmt.Errorf("read compaction: through of %d bytes", len(through))
		}
		for ; len(through) > 0; through = through[32:] {
			c.Through = append(c.Through, binding.Digest(through[:32]))
		}
		out[c.Key] = c
	}
	return out, nil
}
