// Package sharedtier is bindery's shared tier: one PostgreSQL database a
// team's machines (and gateway replicas) share, behind the same narrow
// seam as the SQLite store, with pgx v5's pool. SQLite stays each
// machine's own store and the only one for a machine alone; this holds
// what machines exchange. Version 1: stamps (shipped from each machine's
// outbox, read through by a compile that meets a block its machine has no
// stamp for).
package sharedtier

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MaxKeys bounds one read-through: a request's signed blocks, a few
// thousand at most.
const MaxKeys = 10000

// ConnectTimeout bounds connecting when the DSN sets no connect_timeout.
const ConnectTimeout = 5 * time.Second

// Store is the shared tier.
type Store struct {
	pool    *pgxpool.Pool
	machine string
	dsn     string // redacted, for messages
	secret  string // the DSN's password, cut out of every error
	ready   atomic.Bool
	saltID  atomic.Pointer[string] // SetSaltID (accounts.go)

	// beforeReleaseCommit, when set (tests, SetBeforeReleaseCommit), runs
	// inside PutReleases' transaction after its inserts, before the commit:
	// a test holds a release in flight there.
	beforeReleaseCommit func()
}

// SetBeforeReleaseCommit sets a function PutReleases runs inside its
// transaction, its rows inserted and its locks held, just before it
// commits. For tests that must order a release against a read; nil clears.
func (s *Store) SetBeforeReleaseCommit(fn func()) { s.beforeReleaseCommit = fn }

// Open makes the store's pool; it connects lazily, so a server that is
// down at start is not an error (the machine works alone until it is
// back). The DSN's password is never in an error or a log line: errors
// name the redacted DSN.
func Open(dsn, machine string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse error may quote the DSN, password and all.
		return nil, errors.New("the shared tier's DSN does not parse (libpq keyword=value or postgres:// URL)")
	}
	cfg.MaxConns = 8
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// libpq's default is to wait for the OS: a server whose packets
		// are dropped would hold a shipper's attempt (and its backoff) for
		// minutes of TCP retries.
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("shared tier %s: %s", Redact(dsn), redactErr(err, cfg.ConnConfig.Password))
	}
	return &Store{pool: pool, machine: machine, dsn: Redact(dsn), secret: cfg.ConnConfig.Password}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Name is the redacted DSN: what logs and status show.
func (s *Store) Name() string { return s.dsn }

// Machine is the name this machine ships under.
func (s *Store) Machine() string { return s.machine }

// Migrate brings the database to this build's schema, forward only, each
// step in its own transaction under an advisory lock (two machines
// starting at once migrate once).
func (s *Store) Migrate(ctx context.Context) error {
	steps, err := loadSteps()
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7306351827)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS bindery_schema (version int NOT NULL)`); err != nil {
			return err
		}
		var v int
		err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM bindery_schema`).Scan(&v)
		if err != nil {
			return err
		}
		if v > len(steps) {
			return fmt.Errorf("the shared tier is at schema version %d, newer than this bindery's %d: upgrade bindery", v, len(steps))
		}
		for _, st := range steps[v:] {
			if _, err := tx.Exec(ctx, st.sql); err != nil {
				return fmt.Errorf("migration %s: %w", st.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO bindery_schema (version) VALUES ($1)`, st.version); err != nil {
				return err
			}
		}
		return nil
	})
}

// Ready brings the schema to this build's once per Store (a success is
// remembered): each path that reads or writes the tier calls it first, so
// the first compile or accept after joining never meets a table that is
// not there yet (the shipper's first attempt may come later).
func (s *Store) Ready(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

type step struct {
	version int
	name    string
	sql     string
}

func loadSteps() ([]step, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []step
	for i, n := range names {
		num, _, _ := strings.Cut(path.Base(n), "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("shared migration %s: want %03d_*.sql", n, i+1)
		}
		b, err := fs.ReadFile(migrationFiles, n)
		if err != nil {
			return nil, err
		}
		out = append(out, step{v, path.Base(n), string(b)})
	}
	return out, nil
}

func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.wrap(pgx.BeginFunc(ctx, s.pool, fn))
}

// batch sends b in one round trip, as one implicit transaction, and lets
// fn read its results in order.
func (s *Store) batch(ctx context.Context, b *pgx.Batch, fn func(pgx.BatchResults) error) error {
	res := s.pool.SendBatch(ctx, b)
	err := fn(res)
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	return s.wrap(err)
}

// wrap names the tier in err, its password taken out.
func (s *Store) wrap(err error) error {
	if err != nil {
		return fmt.Errorf("shared tier %s: %s", s.dsn, redactErr(err, s.secret))
	}
	return nil
}

// PutStamps ships stamps: each is inserted unless its key is there (the
// first stamp of a key wins, as on every machine). It returns how many
// were new. One transaction: a batch is shipped whole or not at all.
func (s *Store) PutStamps(ctx context.Context, rows []db.StampRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	b := &pgx.Batch{}
	for _, r := range rows {
		var pred, account, compile any
		if !r.Pred.IsZero() {
			pred = r.Pred[:]
		}
		if r.Account != "" {
			account = r.Account
		}
		if r.Compile != "" {
			compile = r.Compile
		}
		var saltID any
		if account != nil && s.salt() != "" {
			saltID = s.salt()
		}
		b.Queue(`INSERT INTO stamps (key, seed, chain, pred, model, account, source, conversation, branch, compile, machine, created_ms, salt_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (key) DO NOTHING`,
			r.Key[:], r.Seed[:], r.Chain[:], pred, r.Model, account, r.Source, r.Conversation, r.Branch, compile, s.machine, r.CreatedMs, saltID)
	}
	return s.insertBatch(ctx, b)
}

// insertBatch sends a batch of inserts in one round trip, which the
// server runs as one implicit transaction (whole or not at all), and
// returns the rows they added (an insert ON CONFLICT DO NOTHING adds
// none). Inside an explicit transaction it was three round trips (BEGIN,
// the batch, COMMIT), and an accept joined to a tier waits for one.
func (s *Store) insertBatch(ctx context.Context, b *pgx.Batch) (int, error) {
	added := 0
	err := s.batch(ctx, b, func(res pgx.BatchResults) error {
		for range b.Len() {
			tag, err := res.Exec()
			if err != nil {
				return err
			}
			added += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return added, nil
}

// Stamps reads the stamps of keys the shared tier holds. A stamp comes
// with its account only when it was shipped under this machine's salt
// (SetSaltID: the team's, once adopted): a fingerprint under another salt
// could only be compared wrongly; without one the block is not compared
// (the provider itself drops a block of another account).
func (s *Store) Stamps(ctx context.Context, keys []binding.Digest) (map[binding.Digest]db.StampRow, error) {
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("shared tier: %d keys in one read, over its bound of %d", len(keys), MaxKeys)
	}
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	out := map[binding.Digest]db.StampRow{}
	// One statement, one round trip: a transaction around it (BEGIN,
	// the read, COMMIT) was three, on every compile that reads through.
	b := &pgx.Batch{}
	b.Queue(`SELECT key, seed, chain, pred, model, CASE WHEN salt_id = $2 THEN account END, source, conversation, branch, compile, created_ms
			FROM stamps WHERE key = ANY($1)`, raw, s.salt())
	err := s.batch(ctx, b, func(res pgx.BatchResults) error {
		rows, err := res.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key, seed, chain, pred []byte
			var account, compile *string
			var r db.StampRow
			if err := rows.Scan(&key, &seed, &chain, &pred, &r.Model, &account, &r.Source, &r.Conversation, &r.Branch, &compile, &r.CreatedMs); err != nil {
				return err
			}
			if len(key) != 32 || len(seed) != 32 || len(chain) != 32 || (pred != nil && len(pred) != 32) {
				return fmt.Errorf("a stamp in the shared tier is malformed (key %x)", key)
			}
			copy(r.Key[:], key)
			copy(r.Seed[:], seed)
			copy(r.Chain[:], chain)
			copy(r.Pred[:], pred)
			if account != nil {
				r.Account = *account
			}
			if compile != nil {
				r.Compile = *compile
			}
			out[r.Key] = r
		}
		return rows.Err()
	})
	return out, err
}

// Redact is dsn with no password in it: what may be logged or shown.
func Redact(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, hostOf(cfg), cfg.Database)
}

func hostOf(cfg *pgconn.Config) string {
	if strings.HasPrefix(cfg.Host, "/") {
		return "[" + cfg.Host + "]"
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

// redactErr is err's text with the password, if any, cut out (pgx's
// connect errors name the host and user, not the password; this makes
// sure of it).
func redactErr(err error, password string) string {
	msg := err.Error()
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "****")
	}
	return msg
}
