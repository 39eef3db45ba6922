// Package db is bindery's SQLite store (modernc.org/sqlite, no cgo).
//
// One database file in WAL mode, reached through two pools: a writer with a
// single connection (every write is serialized through it, in IMMEDIATE
// transactions, synchronous=FULL so a commit is on disk before it returns)
// and a reader pool (query_only) for the API. Readers never block the writer
// and see only committed transactions.
//
// The schema is bindery.Schema (schema.sql) for a new database; an older one
// is brought up by the forward-only steps in migrations/, tracked in
// PRAGMA user_version. A database whose application_id is not bindery's is
// refused rather than touched.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/my-pi/bindery/binding"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/my-pi/bindery"
)

// ApplicationID marks a bindery database (PRAGMA application_id): "bind".
const ApplicationID = 0x62696e64

// busyTimeout bounds how long a connection waits for a lock held by another
// connection (a checkpoint, or a second process reading the file) before
// failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// DB is an open bindery database.
type DB struct {
	path    string
	writer  *sql.DB // one connection: the only one that writes
	readers *sql.DB // query_only pool
	stmts   writerStmts
	hot     hotStmts  // stmts.go
	raw     rawStmts  // rawstmts.go: only the writer's holder uses them
	reads   readStmts // readstmts.go
	cycles  cycleLog  // walk.go
	// writerSync is the writer connection's synchronous setting as last
	// set ("FULL" or "NORMAL"); only the holder of the writer sets it.
	writerSync string
	noSync     bool
	// rowsPerInsert bounds the rows of one INSERT at ingest (0: the
	// default, ingest_rows.go); tests set 1 to ingest row by row.
	rowsPerInsert int
	// probeEveryBlock: ingest probes a stamp for every signed block even
	// when no stamp exists (ingest_rows.go); tests set it as the reference.
	probeEveryBlock bool
	// aggregator keeps report aggregates current at ingest (aggregate.go).
	aggregator atomic.Pointer[ReportAggregator]
	// added logs the stamps commits recorded (stamps_added.go).
	added stampsAdded
	// paths keeps the session paths walked last (path_memo.go).
	paths pathMemos
	// outbox: stamps recorded get an outbox row (outbox.go)
	outbox atomic.Bool
}

// Options tunes Open. The zero value is what the daemon uses.
type Options struct {
	// Readers is the size of the reader pool (default 4).
	Readers int
	// NoSync sets synchronous=NORMAL on the writer: a commit is not fsynced
	// (WAL stays consistent, but a power loss can undo the last commits).
	// Only for benchmarks that separate the disk's fsync from the rest.
	NoSync bool
}

// Open opens (creating if needed) the database at path and brings its
// schema up to the current version.
func Open(ctx context.Context, path string, opt Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		// The driver reads everything after '?' as connection parameters.
		return nil, fmt.Errorf("open database %s: the path may not contain '?' or '#'", path)
	}
	if opt.Readers <= 0 {
		opt.Readers = 4
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	ms := busyTimeout.Milliseconds()
	sync := "synchronous(FULL)"
	if opt.NoSync {
		sync = "synchronous(NORMAL)"
	}
	writerDSN := path + "?" + url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", ms),
			"journal_mode(WAL)",
			sync,
			"foreign_keys(ON)",
		},
		"_txlock": {"immediate"},
	}.Encode()
	readerDSN := path + "?" + url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", ms),
			"foreign_keys(ON)",
			"query_only(1)",
		},
	}.Encode()

	w, err := sql.Open("sqlite", writerDSN)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	d := &DB{path: path, writer: w, writerSync: "FULL", noSync: opt.NoSync}
	if opt.NoSync {
		d.writerSync = "NORMAL"
	}
	if err := migrate(ctx, w, bindery.Schema, steps); err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := d.prepare(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := d.prepareHot(ctx); err != nil {
		d.stmts.close()
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", readerDSN)
	if err != nil {
		d.stmts.close()
		d.hot.close()
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(opt.Readers)
	r.SetMaxIdleConns(opt.Readers)
	d.readers = r
	if err := r.PingContext(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("open database %s readers: %w", path, err)
	}
	return d, nil
}

// Path is the database file's path.
func (d *DB) Path() string { return d.path }

// Close runs PRAGMA optimize, then closes the readers and last the writer,
// which checkpoints the WAL. Call it after every writer has stopped.
func (d *DB) Close() error {
	var errs []error
	d.cycles.wg.Wait()
	if _, err := d.writer.Exec("PRAGMA optimize"); err != nil {
		errs = append(errs, fmt.Errorf("optimize: %w", err))
	}
	if d.readers != nil {
		d.reads.close()
		errs = append(errs, d.readers.Close())
	}
	errs = append(errs, d.closeRaw(context.Background()))
	d.stmts.close()
	d.hot.close()
	errs = append(errs, d.writer.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close database %s: %w", d.path, err)
	}
	return nil
}

// Tx is a write transaction. Every durable change bindery makes is a
// method of it, so no package above db handles SQL.
type Tx struct {
	tx     *sql.Tx
	outbox bool // the DB's outbox is on (outbox.go)
	// stamped are the keys InsertStamps recorded: logged once the
	// transaction ends (stamps_added.go).
	stamped []binding.Digest
}

// Write runs fn in one IMMEDIATE transaction on the writer connection and
// commits it (synchronous=FULL: on disk when Write returns nil). It is the
// one way anything writes: callers are serialized by the single writer
// connection. fn must use only tx; calling back into d from inside fn would
// wait for the connection fn holds. A non-nil error from fn rolls back.
//
// The transaction runs to its end even if ctx is cancelled once it began
// (fn receives a context without ctx's cancellation), so a shutdown never
// leaves a batch half-applied; ctx still bounds the wait for the writer.
func (d *DB) Write(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	return d.WriteAs(ctx, Synced, fn)
}

// Durability says when a write's commit reaches the disk.
type Durability int

const (
	// Synced: the commit is fsynced before the write returns
	// (synchronous=FULL).
	Synced Durability = iota
	// Deferred: the commit is not fsynced. It reaches the disk with the
	// next Synced commit (the WAL is one file, synced whole and in order)
	// or at a checkpoint. A crash of the process loses none of it (the
	// kernel holds it); a power loss or a crash of the machine before the
	// next Synced commit can.
	Deferred
)

// WriteAs is Write with the commit's durability chosen.
func (d *DB) WriteAs(ctx context.Context, dur Durability, fn func(ctx context.Context, tx *Tx) error) error {
	t := &Tx{outbox: d.outbox.Load()}
	err := d.writeAs(ctx, dur, func(ctx context.Context, tx *sql.Tx) error { t.tx = tx; return fn(ctx, t) })
	if len(t.stamped) > 0 {
		// Logged whatever the outcome: a commit whose error hides that it
		// landed must not leave a key cached as absent. (A rolled-back
		// key logged costs its reader one more read.)
		d.added.logged(t.stamped)
	}
	return err
}

func (d *DB) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return d.writeAs(ctx, Synced, fn)
}

// Savepoint runs fn inside a savepoint of t: what fn wrote is undone when
// it returns an error (fnErr), and the transaction goes on either way. err
// is the savepoint's own failure, after which t must be rolled back.
func (t *Tx) Savepoint(ctx context.Context, fn func() error) (fnErr, err error) {
	if _, err := txExec(ctx, t.tx, sqlSavepoint); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if fnErr = fn(); fnErr != nil {
		if _, err := txExec(ctx, t.tx, sqlRollbackTo); err != nil {
			return fnErr, fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	if _, err := txExec(ctx, t.tx, sqlReleaseSavepoint); err != nil {
		return fnErr, fmt.Errorf("release savepoint: %w", err)
	}
	return fnErr, nil
}

func (d *DB) writeAs(ctx context.Context, dur Durability, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	conn, err := d.writer.Conn(ctx)
	if err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	defer conn.Close()
	// synchronous is the connection's, set between transactions. A writer
	// connection the pool reopened starts at FULL again: at worst one more
	// fsync than asked, never one fewer.
	want := "FULL"
	if dur == Deferred || d.noSync {
		want = "NORMAL"
	}
	if want != d.writerSync {
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous="+want); err != nil {
			return fmt.Errorf("writer: synchronous=%s: %w", want, err)
		}
		d.writerSync = want
	}
	txctx := context.WithValue(context.WithValue(context.WithoutCancel(ctx), hotStmtsKey{}, d.hot), writerConnKey{}, conn)
	tx, err := conn.BeginTx(txctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// A panic in fn: roll back before conn.Close (deferred above),
		// which would otherwise wait for the open transaction forever.
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(txctx, tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Ping runs a query on the read pool: the database answers (the
// watchdog's probe).
func (d *DB) Ping(ctx context.Context) error {
	var n int
	if err := d.readers.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return fmt.Errorf("database %s: %w", d.path, err)
	}
	return nil
}

// SchemaVersion is the database's PRAGMA user_version.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := d.readers.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

func nowMS() int64 { return time.Now().UnixMilli() }
