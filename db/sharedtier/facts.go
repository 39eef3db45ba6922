package sharedtier

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/db"
)

// Version 2 (migrations/002_releases_compiles.sql): releases, compile
// records, accepts and branch owners, what needs one order across machines.

// Bounds of one call: a batch the shipper sends, a read at compile.
const (
	MaxBatch    = 5000    // rows in one Put call
	MaxRecord   = 1 << 26 // bytes of one compile record (64 MiB, as a request body bound would allow)
	MaxReleases = 10000   // releases one ReleasesAfter returns
	maxText     = 4096    // bytes of an id, branch, reason or path
)

// lockConversation is the advisory lock that orders a conversation's
// releases: the two-int form, a key space apart from Migrate's one-bigint
// lock. Writers take it exclusive, readers shared (see ReleasesAfter).
const lockConversation = `SELECT pg_advisory_xact_lock(29, hashtext($1))`

// Release is a release as the shared tier holds it: the row, the machine
// that decided it, and its place in the team's order.
type Release struct {
	Ord     int64
	Machine string
	db.ReleaseRow
}

// Compile is a compile record as shipped.
type Compile struct {
	ID, Conversation, Branch, Machine string
	Record                            []byte // db.EncodeRecord's
	CreatedMs                         int64
}

// Accept is a compile accepted on some machine.
type Accept struct {
	Compile, Conversation, Branch, Machine string
	Stamped, Released                      int
	AcceptedMs                             int64
}

func checkText(what string, ss ...string) error {
	for _, s := range ss {
		if len(s) > maxText {
			return fmt.Errorf("shared tier: a %s of %d bytes, over its bound of %d", what, len(s), maxText)
		}
	}
	return nil
}

func checkBatch(what string, n int) error {
	if n > MaxBatch {
		return fmt.Errorf("shared tier: %d %s in one batch, over its bound of %d", n, what, MaxBatch)
	}
	return nil
}

// PutReleases records releases this machine decided, in the team's one
// order: per conversation (in a fixed order, so two writers cannot
// deadlock) it takes the conversation's advisory lock for the rest of the
// transaction, so the ords it takes commit before any later writer's. A
// release already there (the same conversation, branch and key) is kept:
// a batch sent twice changes nothing. It returns how many were new.
func (s *Store) PutReleases(ctx context.Context, rows []db.ReleaseRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	if err := checkBatch("releases", len(rows)); err != nil {
		return 0, err
	}
	for _, r := range rows {
		if err := checkText("release field", r.Conversation, r.Branch, r.Reason, r.Compile, r.Path); err != nil {
			return 0, fmt.Errorf("release in conversation %q: %w", r.Conversation, err)
		}
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b db.ReleaseRow) int {
		switch {
		case a.Conversation < b.Conversation:
			return -1
		case a.Conversation > b.Conversation:
			return 1
		}
		return 0
	})
	added := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		added = 0
		locked := ""
		for i, r := range sorted {
			if i == 0 || r.Conversation != locked {
				if _, err := tx.Exec(ctx, lockConversation, r.Conversation); err != nil {
					return err
				}
				locked = r.Conversation
			}
			tag, err := tx.Exec(ctx, `INSERT INTO releases (conversation, branch, key, reason, compile, message, path, machine, created_ms)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (conversation, branch, key) DO NOTHING`,
				r.Conversation, r.Branch, r.Key[:], r.Reason, nullText(r.Compile), r.Message, nullText(r.Path), s.machine, r.CreatedMs)
			if err != nil {
				return err
			}
			added += int(tag.RowsAffected())
		}
		if s.beforeReleaseCommit != nil {
			s.beforeReleaseCommit()
		}
		return nil
	})
	return added, err
}

// ReleasesAfter reads a conversation's releases past ord after, in order,
// up to limit (at most MaxReleases). It takes the conversation's lock
// shared: a release being written when the read starts is waited for
// (within ctx), so a compile that starts after another machine began
// recording a release either sees it or fails its read (and is then safe,
// the caller's business), never reads past it.
func (s *Store) ReleasesAfter(ctx context.Context, conversation string, after int64, limit int) ([]Release, error) {
	if err := checkText("conversation id", conversation); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxReleases {
		limit = MaxReleases
	}
	// One round trip (every compile joined to a tier makes this read):
	// the lock and the read go as one batch, which the server runs as one
	// implicit transaction, each statement with its own snapshot, so the
	// read's is taken once the lock is held and sees a writer that held it
	// first. As BEGIN, the lock, the read and COMMIT, it was four.
	var out []Release
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared(29, hashtext($1))`, conversation)
	b.Queue(`SELECT ord, branch, key, reason, compile, message, path, machine, created_ms
		FROM releases WHERE conversation = $1 AND ord > $2 ORDER BY ord LIMIT $3`, conversation, after, limit)
	err := s.batch(ctx, b, func(res pgx.BatchResults) error {
		if _, err := res.Exec(); err != nil {
			return err
		}
		rows, err := res.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r := Release{ReleaseRow: db.ReleaseRow{Conversation: conversation}}
			var key []byte
			var compile, path *string
			if err := rows.Scan(&r.Ord, &r.Branch, &key, &r.Reason, &compile, &r.Message, &path, &r.Machine, &r.CreatedMs); err != nil {
				return err
			}
			if len(key) != 32 {
				return fmt.Errorf("a release in the shared tier is malformed (ord %d)", r.Ord)
			}
			copy(r.Key[:], key)
			if compile != nil {
				r.Compile = *compile
			}
			if path != nil {
				r.Path = *path
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("releases of conversation %q: %w", conversation, err)
	}
	return out, nil
}

// PutCompiles ships compile records; one already there is kept (a record
// never changes once made). It returns how many were new.
func (s *Store) PutCompiles(ctx context.Context, cs []Compile) (int, error) {
	if len(cs) == 0 {
		return 0, nil
	}
	if err := checkBatch("compiles", len(cs)); err != nil {
		return 0, err
	}
	for _, c := range cs {
		if err := checkText("compile field", c.ID, c.Conversation, c.Branch); err != nil {
			return 0, fmt.Errorf("compile %s: %w", c.ID, err)
		}
		if len(c.Record) > MaxRecord {
			return 0, fmt.Errorf("compile %s of conversation %q: a record of %d bytes, over its bound of %d", c.ID, c.Conversation, len(c.Record), MaxRecord)
		}
	}
	b := &pgx.Batch{}
	for _, c := range cs {
		b.Queue(`INSERT INTO compiles (id, conversation, branch, machine, record, created_ms) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id) DO NOTHING`, c.ID, c.Conversation, c.Branch, s.machine, c.Record, c.CreatedMs)
	}
	return s.insertBatch(ctx, b)
}

// Compile reads a shipped compile record.
func (s *Store) Compile(ctx context.Context, id string) (Compile, bool, error) {
	if err := checkText("compile id", id); err != nil {
		return Compile{}, false, err
	}
	c := Compile{ID: id}
	var found bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT conversation, branch, machine, record, created_ms FROM compiles WHERE id = $1`, id).
			Scan(&c.Conversation, &c.Branch, &c.Machine, &c.Record, &c.CreatedMs)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return Compile{}, false, fmt.Errorf("compile %s: %w", id, err)
	}
	return c, found, nil
}

// PutAccepts ships accepts (the first accept of a compile wins) and
// decides the branch owners they name: an accepted compile becomes its
// branch's owner unless the owner's compile was shipped after it
// (compiles.ord), the same rule a machine applies with its own sequence,
// in one order for all. An accept whose compile record is not in the tier
// (shipped in the same batch or before, by the outbox's order) names no
// owner. It returns how many accepts were new.
func (s *Store) PutAccepts(ctx context.Context, as []Accept) (int, error) {
	if len(as) == 0 {
		return 0, nil
	}
	if err := checkBatch("accepts", len(as)); err != nil {
		return 0, err
	}
	for _, a := range as {
		if err := checkText("accept field", a.Compile, a.Conversation, a.Branch); err != nil {
			return 0, fmt.Errorf("accept of compile %s: %w", a.Compile, err)
		}
	}
	added := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		added = 0
		for _, a := range as {
			tag, err := tx.Exec(ctx, `INSERT INTO accepts (compile, conversation, branch, machine, stamped, released, accepted_ms)
				VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (compile) DO NOTHING`,
				a.Compile, a.Conversation, a.Branch, s.machine, a.Stamped, a.Released, a.AcceptedMs)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			added++
			if _, err := tx.Exec(ctx, `INSERT INTO branch_owners (conversation, branch, owner, owner_ord)
				SELECT conversation, branch, id, ord FROM compiles WHERE id = $1
				ON CONFLICT (conversation, branch) DO UPDATE SET owner = excluded.owner, owner_ord = excluded.owner_ord
				WHERE branch_owners.owner_ord < excluded.owner_ord`, a.Compile); err != nil {
				return err
			}
		}
		return nil
	})
	return added, err
}

// Accepted reads the accept of a compile, if any machine shipped one.
func (s *Store) Accepted(ctx context.Context, id string) (Accept, bool, error) {
	if err := checkText("compile id", id); err != nil {
		return Accept{}, false, err
	}
	a := Accept{Compile: id}
	var found bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT conversation, branch, machine, stamped, released, accepted_ms FROM accepts WHERE compile = $1`, id).
			Scan(&a.Conversation, &a.Branch, &a.Machine, &a.Stamped, &a.Released, &a.AcceptedMs)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return Accept{}, false, fmt.Errorf("accept of compile %s: %w", id, err)
	}
	return a, found, nil
}

// Owner reads a branch's owner as the tier decided it ("" when none).
func (s *Store) Owner(ctx context.Context, conversation, branch string) (string, error) {
	if err := checkText("branch", conversation, branch); err != nil {
		return "", err
	}
	var owner string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT owner FROM branch_owners WHERE conversation = $1 AND branch = $2`, conversation, branch).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("owner of branch %q of conversation %q: %w", branch, conversation, err)
	}
	return owner, nil
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
