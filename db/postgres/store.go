// Package postgres is bindery's shared tier: the facts every machine of a
// team merges without conflict (stamps by signature digest, compiles,
// accepts), kept in PostgreSQL through pgx v5 with a pool of its own. SQLite
// (package db) stays each machine's store and the only one for a machine
// alone; this package is the team's copy the machines ship to and read
// stamps through from.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// MaxConns bounds the pool: a machine ships from one goroutine and reads
// stamps through from compiles, a few at a time; the team's server has
// every machine's connections to hold.
const MaxConns = 4

// Store is a connection pool to the team's database, migrated to this
// build's schema.
type Store struct {
	pool *pgxpool.Pool
	dsn  string // redacted, for messages
}

// Open connects to the database dsn names (a libpq keyword/value string or
// a postgres:// URL; TLS as its sslmode asks) and brings its schema up to
// date. Its errors never carry the DSN's password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("shared DSN %s: %w", Redact(dsn), errParse(err))
	}
	cfg.MaxConns = MaxConns
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = dialTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("shared database %s: %w", Redact(dsn), err)
	}
	s := &Store{pool: pool, dsn: Redact(dsn)}
	if err := migrate(ctx, pool, steps); err != nil {
		pool.Close()
		return nil, fmt.Errorf("shared database %s: %w", s.dsn, err)
	}
	return s, nil
}

// errParse keeps what a parse error says without the connection string
// pgx quotes in it (its redaction is best effort, by its own account).
func errParse(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("cannot be parsed (want key=value pairs or a postgres:// URL)")
	}
	return errors.New("cannot be parsed")
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// String is the store's DSN without its password.
func (s *Store) String() string { return s.dsn }

// Ping checks the server answers within ctx.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("shared database %s: %w", s.dsn, err)
	}
	return nil
}

// Compile is a compile's fact: which conversation and branch it served.
type Compile struct {
	ID           string
	Conversation string
	Branch       string
	CreatedMs    int64
}

// Accept is a compile's accept.
type Accept struct {
	Compile    string
	AcceptedMs int64
	Stamped    int
	Released   int
}

// Batch is what one machine ships at once.
type Batch struct {
	Machine  string
	Stamps   []db.StampRow
	Compiles []Compile
	Accepts  []Accept
}

// Added counts the rows a batch inserted: a batch shipped again adds none.
type Added struct{ Stamps, Compiles, Accepts int64 }

// Ship writes a batch in one transaction: all of it or none. A row the
// server already holds (by stamp key, compile id, accepted compile) is
// left as it is, so a batch sent twice, or a stamp two machines minted
// views of, changes nothing the second time.
func (s *Store) Ship(ctx context.Context, b Batch) (Added, error) {
	var a Added
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if a.Stamps, err = shipStamps(ctx, tx, b.Machine, b.Stamps); err != nil {
			return err
		}
		if a.Compiles, err = shipCompiles(ctx, tx, b.Machine, b.Compiles); err != nil {
			return err
		}
		a.Accepts, err = shipAccepts(ctx, tx, b.Machine, b.Accepts)
		return err
	})
	if err != nil {
		return Added{}, fmt.Errorf("ship %d stamps, %d compiles, %d accepts to %s: %w",
			len(b.Stamps), len(b.Compiles), len(b.Accepts), s.dsn, err)
	}
	return a, nil
}

// The inserts take one array per column (unnest): one statement per table
// and batch, whatever its length. Empty text and bytea stand for NULL.
const (
	sqlShipStamps = `INSERT INTO stamps (key, seed, chain, pred, model, source, conversation, branch, compile, entry, created_ms, machine)
SELECT k, s, c, NULLIF(p, ''::bytea), m, src, conv, br, NULLIF(comp, ''), NULLIF(ent, ''), ms, $12
FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[])
  AS t(k, s, c, p, m, src, conv, br, comp, ent, ms)
ON CONFLICT (key) DO NOTHING`
	sqlShipCompiles = `INSERT INTO compiles (id, conversation, branch, created_ms, machine)
SELECT * , $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])
ON CONFLICT (id) DO NOTHING`
	sqlShipAccepts = `INSERT INTO accepts (compile, accepted_ms, stamped, released, machine)
SELECT *, $5 FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[])
ON CONFLICT (compile) DO NOTHING`
)

func shipStamps(ctx context.Context, tx pgx.Tx, machine string, rows []db.StampRow) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	n := len(rows)
	key, seed, chain, pred := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	model, source, conv, branch, compile, entry := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ms := make([]int64, n)
	for i, r := range rows {
		key[i], seed[i], chain[i] = r.Key[:], r.Seed[:], r.Chain[:]
		pred[i] = []byte{}
		if !r.Pred.IsZero() {
			pred[i] = r.Pred[:]
		}
		model[i], source[i], conv[i], branch[i], compile[i], entry[i] = r.Model, r.Source, r.Conversation, r.Branch, r.Compile, r.Entry
		ms[i] = r.CreatedMs
	}
	tag, err := tx.Exec(ctx, sqlShipStamps, key, seed, chain, pred, model, source, conv, branch, compile, entry, ms, machine)
	if err != nil {
		return 0, fmt.Errorf("stamps: %w", err)
	}
	return tag.RowsAffected(), nil
}

func shipCompiles(ctx context.Context, tx pgx.Tx, machine string, rows []Compile) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	n := len(rows)
	id, conv, branch, ms := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, r := range rows {
		id[i], conv[i], branch[i], ms[i] = r.ID, r.Conversation, r.Branch, r.CreatedMs
	}
	tag, err := tx.Exec(ctx, sqlShipCompiles, id, conv, branch, ms, machine)
	if err != nil {
		return 0, fmt.Errorf("compiles: %w", err)
	}
	return tag.RowsAffected(), nil
}

func shipAccepts(ctx context.Context, tx pgx.Tx, machine string, rows []Accept) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	n := len(rows)
	id, ms, stamped, released := make([]string, n), make([]int64, n), make([]int32, n), make([]int32, n)
	for i, r := range rows {
		id[i], ms[i], stamped[i], released[i] = r.Compile, r.AcceptedMs, int32(r.Stamped), int32(r.Released)
	}
	tag, err := tx.Exec(ctx, sqlShipAccepts, id, ms, stamped, released, machine)
	if err != nil {
		return 0, fmt.Errorf("accepts: %w", err)
	}
	return tag.RowsAffected(), nil
}

// MaxStampKeys bounds one read-through: a compile meets at most a few
// hundred unknown blocks; more are read in several calls.
const MaxStampKeys = 1000

// Stamps reads the stamps of keys the team holds (missing keys are
// absent), as db.DB.Stamps does locally, so a compile on this machine can
// vouch for a block another machine stamped.
func (s *Store) Stamps(ctx context.Context, keys []binding.Digest) (map[binding.Digest]db.StampRow, error) {
	if len(keys) > MaxStampKeys {
		return nil, fmt.Errorf("read %d stamps from %s: at most %d at once", len(keys), s.dsn, MaxStampKeys)
	}
	out := make(map[binding.Digest]db.StampRow, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	arg := make([][]byte, len(keys))
	for i := range keys {
		arg[i] = keys[i][:]
	}
	rows, err := s.pool.Query(ctx, `SELECT key, seed, chain, coalesce(pred, ''::bytea), model, source, conversation, branch,
  coalesce(compile, ''), coalesce(entry, ''), created_ms FROM stamps WHERE key = ANY($1::bytea[])`, arg)
	if err != nil {
		return nil, fmt.Errorf("read %d stamps from %s: %w", len(keys), s.dsn, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r db.StampRow
		var key, seed, chain, pred []byte
		if err := rows.Scan(&key, &seed, &chain, &pred, &r.Model, &r.Source, &r.Conversation, &r.Branch, &r.Compile, &r.Entry, &r.CreatedMs); err != nil {
			return nil, fmt.Errorf("read stamps from %s: %w", s.dsn, err)
		}
		copy(r.Key[:], key)
		copy(r.Seed[:], seed)
		copy(r.Chain[:], chain)
		copy(r.Pred[:], pred)
		out[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stamps from %s: %w", s.dsn, err)
	}
	return out, nil
}

// dialTimeout bounds connecting when the DSN sets no connect_timeout: an
// unreachable server must cost a shipper's attempt seconds, not minutes.
const dialTimeout = 5 * time.Second
