package db

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/my-pi/bindery/binding"
)

// The binding store: conversations, branches, compile records, stamps and
// releases (migrations/002_binding.sql). Writes take the caller's write
// transaction (DB.Write) so one call's records, and the events reporting
// them, commit together; reads use the reader pool.

// ConversationRow is a conversation's own row.
type ConversationRow struct {
	ID                 string
	EngagedCompile     string // "" while not engaged
	EngagedMs          int64
	ParentConversation string
	ParentBranch       string
	ParentRelease      int64 // releases.id high-water when forked: the parent's releases it inherits
	SessionFile        string
	CreatedMs          int64
}

// BranchRow is one branch of a conversation.
type BranchRow struct {
	Conversation       string
	Branch             string
	Owner              string // last accepted compile ("" none)
	ParentConversation string
	ParentBranch       string
	ParentRelease      int64
	CreatedMs          int64
}

// CompileRow is a compile's bookkeeping; Record is nil once forgotten.
type CompileRow struct {
	Seq          int64
	ID           string
	Conversation string
	Branch       string
	CreatedMs    int64
	AcceptedMs   int64 // 0: not accepted
	Stamped      int
	Released     int
	Record       *binding.CompileRecord
	Chunks       []ChunkHash // the chunks its stored record names (nil: stored whole)
}

// StampRow is a stamp with where it came from.
type StampRow struct {
	binding.Stamp
	Source       string // accept | prefix | file
	Conversation string
	Branch       string
	Compile      string
	Entry        string
	CreatedMs    int64
}

// ReleaseRow is a release with its scope.
type ReleaseRow struct {
	binding.Release
	ID           int64 // releases.id: monotonic, orders releases for forks named with parent
	Conversation string
	Branch       string
	CreatedMs    int64
}

// ConversationState is everything stored about one conversation except
// stamps (global, read by key).
type ConversationState struct {
	Conversation ConversationRow
	Found        bool
	Branches     []BranchRow
	Compiles     []CompileRow // in seq order; accepted ones without a record are included (Record nil)
	Releases     []ReleaseRow // in id order
}

// UpsertConversation creates the conversation's row, or fills the fields
// that were empty (a session file learned later). It never moves an
// engagement or a parent once set.
func (t *Tx) UpsertConversation(ctx context.Context, c ConversationRow) error {
	tx := t.tx
	_, err := txExec(ctx, tx, sqlUpsertConv,
		c.ID, nullString(c.EngagedCompile), nullInt(c.EngagedMs), nullString(c.ParentConversation), nullString(c.ParentBranch),
		c.ParentRelease, nullString(c.SessionFile), c.CreatedMs)
	if err != nil {
		return fmt.Errorf("upsert conversation %s: %w", c.ID, err)
	}
	return nil
}

// UpsertBranch creates the branch's row if missing and sets its owner when
// owner is not empty.
func (t *Tx) UpsertBranch(ctx context.Context, b BranchRow) error {
	tx := t.tx
	_, err := txExec(ctx, tx, sqlUpsertBranch,
		b.Conversation, b.Branch, nullString(b.Owner), nullString(b.ParentConversation), nullString(b.ParentBranch), b.ParentRelease, b.CreatedMs)
	if err != nil {
		return fmt.Errorf("upsert branch %s/%s: %w", b.Conversation, b.Branch, err)
	}
	return nil
}

// SetBranchOwner makes owner the owner of a branch whose row exists: an
// accept's one change to it, without UpsertBranch's insert attempt (an
// accept that makes its compile the owner does this every turn). A branch
// without a row is created (UpsertBranch), so a caller that is wrong about
// the row still records the owner.
func (t *Tx) SetBranchOwner(ctx context.Context, conversation, branch, owner string, createdMs int64) error {
	res, err := txExec(ctx, t.tx, sqlSetBranchOwner, owner, conversation, branch)
	if err != nil {
		return fmt.Errorf("set owner of branch %s/%s: %w", conversation, branch, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	return t.UpsertBranch(ctx, BranchRow{Conversation: conversation, Branch: branch, Owner: owner, CreatedMs: createdMs})
}

// InsertCompile stores a compile record (rec.Seq is the row's seq).
// Retention is the daemon's: it picks what to forget from its mirror of
// the conversation and calls ForgetCompiles in the same transaction.
//
// A long record is stored in chunks (record_chunks.go): src is what the
// record's base stored (its record and chunks; zero: nothing known), so
// the chunks the two share are named, not written again. It returns the
// chunks the stored record names (nil: stored whole), the next record's
// ChunkSource with rec.
func (t *Tx) InsertCompile(ctx context.Context, rec *binding.CompileRecord, createdMs int64, src ChunkSource) ([]ChunkHash, error) {
	tx := t.tx
	blob, chunks := encodeRecordChunked(rec, src)
	if err := storeChunks(ctx, tx, rec.Conversation, chunks); err != nil {
		return nil, fmt.Errorf("insert compile %s: %w", rec.ID, err)
	}
	if _, err := txExec(ctx, tx, sqlInsertCompile,
		rec.Seq, rec.ID, rec.Conversation, rec.Branch, createdMs, blob); err != nil {
		return nil, fmt.Errorf("insert compile %s: %w", rec.ID, err)
	}
	if chunks == nil {
		return nil, nil
	}
	hashes := make([]ChunkHash, len(chunks))
	for i, c := range chunks {
		hashes[i] = c.hash
	}
	return hashes, nil
}

// MarkAccepted records that compile id was accepted, the last block its
// model read (binding.Accept's record: an accept changes a record's
// Accepted and LastRead, nothing else), and what its accept recorded
// (answered again on a repeat). The record itself is not written again:
// it is as long as the conversation's history, and an accept that
// rewrote it cost a turn its history twice over (migration 008). A
// compile already accepted, or unknown, is ErrUnknownCompile.
func (t *Tx) MarkAccepted(ctx context.Context, id string, lastRead binding.Digest, acceptedMs int64, stamped, released int) error {
	tx := t.tx
	res, err := txExec(ctx, tx, sqlMarkAccepted, acceptedMs, stamped, released, lastRead[:], id)
	if err != nil {
		return fmt.Errorf("accept compile %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("accept compile %s: %w", id, binding.ErrUnknownCompile)
	}
	return nil
}

// ForgetCompiles drops the records of accepted compiles (nullRecords: the
// ids stay, so a repeated accept still answers 200) and forgets compiles
// entirely (forget: their accept is then 404). The daemon picks them from
// its mirror of the conversation (binding.Retention), so this costs the
// ids given, not the conversation's length.
func (t *Tx) ForgetCompiles(ctx context.Context, nullRecords, forget []string) error {
	tx := t.tx
	for _, id := range nullRecords {
		if _, err := txExec(ctx, tx, sqlNullRecord, id); err != nil {
			return fmt.Errorf("forget record of %s: %w", id, err)
		}
	}
	for _, id := range forget {
		if _, err := txExec(ctx, tx, sqlForgetCompile, id); err != nil {
			return fmt.Errorf("forget compile %s: %w", id, err)
		}
	}
	return nil
}

// Normalized is the retention as the store applies it.

// InsertStamps records stamps; a key already stamped keeps its first stamp.
// It returns the stamps actually inserted.
func (t *Tx) InsertStamps(ctx context.Context, stamps []StampRow) ([]StampRow, error) {
	tx := t.tx
	if len(stamps) == 0 {
		return nil, nil
	}
	stmt, err := txPrepare(ctx, tx, sqlInsertStamp)
	if err != nil {
		return nil, fmt.Errorf("insert stamps: %w", err)
	}
	defer stmt.Close()
	var added []StampRow
	for _, s := range stamps {
		var pred any
		if !s.Pred.IsZero() {
			pred = s.Pred[:]
		}
		res, err := stmt.ExecContext(ctx, s.Key[:], s.Seed[:], s.Chain[:], pred, s.Model, s.Source, s.Conversation, s.Branch,
			nullString(s.Compile), nullString(s.Entry), s.CreatedMs, nullString(s.Account))
		if err != nil {
			return nil, fmt.Errorf("insert stamp: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			added = append(added, s)
			t.stamped = append(t.stamped, s.Key)
			if t.outbox && s.Source != SourceShared {
				if err := t.queueStamp(ctx, s); err != nil {
					return nil, err
				}
			}
		}
	}
	return added, nil
}

// InsertReleases records releases on a branch (a block released twice
// keeps its first release). It returns the releases actually inserted.
func (t *Tx) InsertReleases(ctx context.Context, rels []ReleaseRow) ([]ReleaseRow, error) {
	tx := t.tx
	if len(rels) == 0 {
		return nil, nil
	}
	stmt, err := txPrepare(ctx, tx, sqlInsertRelease)
	if err != nil {
		return nil, fmt.Errorf("insert releases: %w", err)
	}
	defer stmt.Close()
	var added []ReleaseRow
	for _, r := range rels {
		res, err := stmt.ExecContext(ctx, r.Conversation, r.Branch, r.Key[:], r.Reason, nullString(r.Compile), r.Message,
			nullString(r.Path), r.Seq, r.CreatedMs)
		if err != nil {
			return nil, fmt.Errorf("insert release: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			r.ID, _ = res.LastInsertId()
			added = append(added, r)
		}
	}
	return added, nil
}

// IngestHighWater is the largest entries.seq: a release recorded now gets
// it as its seq, so "ingested after the release" is entries.seq > seq.
func (t *Tx) IngestHighWater(ctx context.Context) (int64, error) {
	tx := t.tx
	var n int64
	if err := txQueryRow(ctx, tx, sqlIngestHighWater).Scan(&n); err != nil {
		return 0, fmt.Errorf("ingest high water: %w", err)
	}
	return n, nil
}

// LoadConversation reads one conversation's stored state.
func (d *DB) LoadConversation(ctx context.Context, id string) (*ConversationState, error) {
	st := &ConversationState{}
	var engaged, parentConv, parentBranch, file sql.NullString
	var engagedMs sql.NullInt64
	err := d.readRow(ctx, `SELECT id, engaged_compile, engaged_ms, parent_conversation, parent_branch, parent_release, session_file, created_ms
		FROM conversations WHERE id = ?`, id).Scan(&st.Conversation.ID, &engaged, &engagedMs, &parentConv, &parentBranch, &st.Conversation.ParentRelease, &file, &st.Conversation.CreatedMs)
	switch {
	case err == sql.ErrNoRows:
		// Not compiled yet: a host may have released blocks in it already.
		st.Conversation.ID = id
		if st.Releases, err = d.releases(ctx, id); err != nil {
			return nil, err
		}
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("load conversation %s: %w", id, err)
	}
	st.Found = true
	st.Conversation.EngagedCompile, st.Conversation.EngagedMs = engaged.String, engagedMs.Int64
	st.Conversation.ParentConversation, st.Conversation.ParentBranch, st.Conversation.SessionFile = parentConv.String, parentBranch.String, file.String

	rows, err := d.readQuery(ctx, `SELECT branch, owner, parent_conversation, parent_branch, parent_release, created_ms FROM branches WHERE conversation = ? ORDER BY created_ms, branch`, id)
	if err != nil {
		return nil, fmt.Errorf("load branches of %s: %w", id, err)
	}
	for rows.Next() {
		b := BranchRow{Conversation: id}
		var owner, pc, pb sql.NullString
		if err := rows.Scan(&b.Branch, &owner, &pc, &pb, &b.ParentRelease, &b.CreatedMs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load branches of %s: %w", id, err)
		}
		b.Owner, b.ParentConversation, b.ParentBranch = owner.String, pc.String, pb.String
		st.Branches = append(st.Branches, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load branches of %s: %w", id, err)
	}

	if st.Compiles, err = d.compiles(ctx, `WHERE conversation = ? ORDER BY seq`, id); err != nil {
		return nil, fmt.Errorf("load compiles of %s: %w", id, err)
	}

	if st.Releases, err = d.releases(ctx, id); err != nil {
		return nil, err
	}
	return st, nil
}

// releases reads a conversation's releases in id order.
func (d *DB) releases(ctx context.Context, id string) ([]ReleaseRow, error) {
	rows, err := d.readQuery(ctx, `SELECT id, branch, key, reason, compile, message, path, seq, created_ms FROM releases WHERE conversation = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("load releases of %s: %w", id, err)
	}
	defer rows.Close()
	var out []ReleaseRow
	for rows.Next() {
		r := ReleaseRow{Conversation: id}
		var key []byte
		var compile, path sql.NullString
		if err := rows.Scan(&r.ID, &r.Branch, &key, &r.Reason, &compile, &r.Message, &path, &r.Seq, &r.CreatedMs); err != nil {
			return nil, fmt.Errorf("load releases of %s: %w", id, err)
		}
		copy(r.Key[:], key)
		r.Compile, r.Path = compile.String, path.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load releases of %s: %w", id, err)
	}
	return out, nil
}

// Compile reads one compile by id; found is false when it is unknown or
// was forgotten.
func (d *DB) Compile(ctx context.Context, id string) (c CompileRow, found bool, err error) {
	cs, err := d.compiles(ctx, `WHERE id = ?`, id)
	if err != nil || len(cs) == 0 {
		return CompileRow{}, false, err
	}
	return cs[0], true, nil
}

func (d *DB) compiles(ctx context.Context, where string, args ...any) ([]CompileRow, error) {
	// One read transaction: a record and the chunks it names are read as
	// one committed state (a sweep cannot come between them).
	tx, err := d.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, conversation, branch, created_ms, accepted_ms, stamped, released, record, last_read FROM compiles `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type stored struct {
		i          int
		blob, last []byte
		accepted   bool
	}
	var out []CompileRow
	var blobs []stored
	for rows.Next() {
		var c CompileRow
		var acc sql.NullInt64
		var blob, lastRead []byte
		if err := rows.Scan(&c.Seq, &c.ID, &c.Conversation, &c.Branch, &c.CreatedMs, &acc, &c.Stamped, &c.Released, &blob, &lastRead); err != nil {
			return nil, err
		}
		c.AcceptedMs = acc.Int64
		if blob != nil {
			blobs = append(blobs, stored{len(out), blob, lastRead, acc.Valid})
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	cr := &chunkReader{ctx: ctx, q: tx}
	for _, s := range blobs {
		c := &out[s.i]
		conv := c.Conversation
		rec, chunks, err := decodeRecordChunks(s.blob, func(h ChunkHash) (chunkParts, error) { return cr.chunk(conv, h) })
		if err != nil {
			return nil, fmt.Errorf("compile %s record: %w", c.ID, err)
		}
		c.Record, c.Chunks = rec, chunks
		if err := acceptedAs(c.Record, s.accepted, s.last); err != nil {
			return nil, fmt.Errorf("compile %s: %w", c.ID, err)
		}
	}
	return out, nil
}

// acceptedAs gives rec what its accept wrote apart from it (MarkAccepted):
// accepted and the last block read (all zero: none). lastRead NULL: the
// record says (not accepted, or accepted before migration 008, which
// rewrote the record).
func acceptedAs(rec *binding.CompileRecord, accepted bool, lastRead []byte) error {
	if lastRead == nil {
		return nil
	}
	if !accepted {
		return fmt.Errorf("last_read set on a compile not accepted")
	}
	if len(lastRead) != len(rec.LastRead) {
		return fmt.Errorf("last_read is %d bytes, not %d", len(lastRead), len(rec.LastRead))
	}
	rec.Accepted = true
	copy(rec.LastRead[:], lastRead)
	return nil
}

// Stamps reads the stamps of the given keys (missing keys are absent).
func (d *DB) Stamps(ctx context.Context, keys []binding.Digest) (map[binding.Digest]StampRow, error) {
	out := make(map[binding.Digest]StampRow, len(keys))
	for i := 0; i < len(keys); {
		q, n := stampsQuery(len(keys) - i)
		part := keys[i:min(i+n, len(keys))]
		i += len(part)
		args := make([]any, n)
		for j := range args {
			// a short part repeats its last key: IN ignores repeats
			args[j] = part[min(j, len(part)-1)][:]
		}
		rows, err := d.readQuery(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("read stamps: %w", err)
		}
		for rows.Next() {
			var s StampRow
			var key, seed, chain, pred []byte
			var compile, entry, account sql.NullString
			if err := rows.Scan(&key, &seed, &chain, &pred, &s.Model, &s.Source, &s.Conversation, &s.Branch, &compile, &entry, &s.CreatedMs, &account); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read stamps: %w", err)
			}
			copy(s.Key[:], key)
			copy(s.Seed[:], seed)
			copy(s.Chain[:], chain)
			copy(s.Pred[:], pred)
			s.Compile, s.Entry, s.Account = compile.String, entry.String, account.String
			out[s.Key] = s
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read stamps: %w", err)
		}
	}
	return out, nil
}

// stampsSizes are the IN lists Stamps reads by: a compile reads its few
// new blocks' stamps every turn, and a query whose text varied with their
// count was prepared again each time (as long as running it). Each size
// is one kept statement (readStmts); a shorter list is padded.
var stampsSizes = [...]int{1, 4, 16, 64, 200}

var stampsQueries = func() (qs [len(stampsSizes)]string) {
	for i, n := range stampsSizes {
		qs[i] = `SELECT key, seed, chain, pred, model, source, conversation, branch, compile, entry, created_ms, account FROM stamps WHERE key IN (?` +
			strings.Repeat(",?", n-1) + `)`
	}
	return qs
}()

// stampsQuery is the query for the next part of a list of n keys still to
// read, and how many parameters it takes: the smallest size that holds
// them, else the largest.
func stampsQuery(n int) (string, int) {
	for i, size := range stampsSizes {
		if n <= size || i == len(stampsSizes)-1 {
			return stampsQueries[i], size
		}
	}
	panic("unreachable")
}

// StampCounts returns how many stamps each branch of a conversation
// minted, the conversation's total, and how many of those are linked to
// the session entry holding their block.
func (d *DB) StampCounts(ctx context.Context, conversation string) (byBranch map[string]int, total, linked int, err error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT branch, count(*), count(entry) FROM stamps WHERE conversation = ? GROUP BY branch`, conversation)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("count stamps of %s: %w", conversation, err)
	}
	defer rows.Close()
	byBranch = map[string]int{}
	for rows.Next() {
		var b string
		var n, l int
		if err := rows.Scan(&b, &n, &l); err != nil {
			return nil, 0, 0, fmt.Errorf("count stamps of %s: %w", conversation, err)
		}
		byBranch[b] = n
		total += n
		linked += l
	}
	return byBranch, total, linked, rows.Err()
}

func nullInt(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: n != 0} }

// LastReleaseID is the largest releases.id (0 when none): a fork made now
// inherits its parent's releases up to it.
func (t *Tx) LastReleaseID(ctx context.Context) (int64, error) {
	tx := t.tx
	var n int64
	if err := txQueryRow(ctx, tx, sqlLastReleaseID).Scan(&n); err != nil {
		return 0, fmt.Errorf("last release: %w", err)
	}
	return n, nil
}

// PathEntry is one entry on a pi session's path, with its ingest seq.
type PathEntry struct {
	ID   string
	Seq  int64
	Type string // the entry's type (message, custom, ...)
	Role string // message entries: the role
}

// SessionPath returns the path from the root to entry in the live file of
// session (root first); found is false when the session or the entry is
// not ingested. It walks up the parent links by index only until it meets
// a path walked before (path_memo.go): a turn's compile reads the turn's
// few new entries, not the path's depth; a parentId cycle ends it at the
// cycle's earliest entry (walk.go).
func (d *DB) SessionPath(ctx context.Context, session, entry string) (path []PathEntry, found bool, err error) {
	nodes, kept, err := d.walkSession(ctx, session, entry)
	if err != nil {
		return nil, false, err
	}
	if kept != nil {
		nodes = kept.nodes()
	}
	path = make([]PathEntry, 0, len(nodes))
	for i := len(nodes) - 1; i >= 0; i-- {
		n := &nodes[i]
		path = append(path, PathEntry{ID: n.id, Seq: n.seq, Type: n.typ, Role: n.role})
	}
	return path, len(path) > 0, nil
}

// SessionPathHas reports which of ids are entries on SessionPath(session,
// entry), found as SessionPath's, without building the path: it walks as
// SessionPath does and answers from the kept path's index. A compile in a
// pi session asks it of the leaves its remembered compiles were made at,
// every turn; building the whole path and a set of its ids was a third of
// such a turn past a few thousand entries, growing with the session.
func (d *DB) SessionPathHas(ctx context.Context, session, entry string, ids []string) (on map[string]bool, found bool, err error) {
	nodes, kept, err := d.walkSession(ctx, session, entry)
	if err != nil {
		return nil, false, err
	}
	if len(nodes) == 0 && kept == nil {
		return nil, false, nil
	}
	var has func(id string) bool
	if kept != nil {
		has = func(id string) bool { _, ok := kept.index(id); return ok }
	} else {
		// A path cut at a cycle is not kept (path_memo.go): index it here.
		set := make(map[string]bool, len(nodes))
		for i := range nodes {
			set[nodes[i].id] = true
		}
		has = func(id string) bool { return set[id] }
	}
	on = make(map[string]bool, len(ids))
	for _, id := range ids {
		if has(id) {
			on[id] = true
		}
	}
	return on, true, nil
}

// walkSession is walkKept from entry in the live file of session (nothing
// when neither is ingested).
func (d *DB) walkSession(ctx context.Context, session, entry string) ([]walkNode, *pathMemo, error) {
	file, ok, err := d.sessionFile(ctx, session)
	var nodes []walkNode
	var kept *pathMemo
	if err == nil && ok {
		nodes, kept, err = d.walkKept(ctx, file, entry)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("session path %s/%s: %w", session, entry, err)
	}
	return nodes, kept, nil
}

// sessionFile is the live file of session: its newest file not removed
// (ok false: none is ingested).
func (d *DB) sessionFile(ctx context.Context, session string) (file int64, ok bool, err error) {
	err = d.readRow(ctx, `SELECT s.file FROM sessions s JOIN files f ON f.id = s.file
		WHERE s.id = ? AND s.removed = 0 ORDER BY f.updated_ms DESC LIMIT 1`, session).Scan(&file)
	if err == sql.ErrNoRows {
		return 0, false, nil
	}
	return file, err == nil, err
}

// Ancestors returns entry and at most n-1 of its ancestors, nearest first,
// in the live file of session (nil when the entry is not there). Unlike
// SessionPath it costs what it returns, not the depth of the tree: the
// ingest hook walks up only past a few custom entries per reply.
func (d *DB) Ancestors(ctx context.Context, session, entry string, n int) ([]PathEntry, error) {
	file, ok, err := d.sessionFile(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("ancestors %s/%s: %w", session, entry, err)
	}
	if !ok || n <= 0 {
		return nil, nil
	}
	nodes, err := d.walkFrom(ctx, file, entry, n)
	if err != nil {
		return nil, fmt.Errorf("ancestors %s/%s: %w", session, entry, err)
	}
	var out []PathEntry
	for _, w := range nodes {
		out = append(out, PathEntry{ID: w.id, Seq: w.seq, Type: w.typ, Role: w.role})
	}
	return out, nil
}

// BlockEntries returns, for the given thinking keys, the id of the session
// entry holding each (keys not found in the session are absent).
func (d *DB) BlockEntries(ctx context.Context, session string, keys []binding.Digest) (map[binding.Digest]string, error) {
	out := make(map[binding.Digest]string, len(keys))
	for _, k := range keys {
		var id string
		// Only the message that minted a block holds it: a context_edit
		// that carries a copy is branch-local and proves nothing of a
		// request's branch (its sibling branches show the same block).
		err := d.readRow(ctx, sqlBlockEntry, k[:], session).Scan(&id)
		if err == sql.ErrNoRows {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("block entries of %s: %w", session, err)
		}
		out[k] = id
	}
	return out, nil
}

// LastCompileSeq is the largest compile seq ever assigned (seqs are never
// reused, even for forgotten compiles).
func (d *DB) LastCompileSeq(ctx context.Context) (int64, error) {
	var n int64
	err := d.readers.QueryRowContext(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'compiles'), 0)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("last compile seq: %w", err)
	}
	return n, nil
}

// LinkStampsInSession links the given stamps to the entry of session that
// holds their block, when the watcher has already ingested it (the reply
// landed in the file before its accept arrived).
func (t *Tx) LinkStampsInSession(ctx context.Context, session string, keys []binding.Digest) (int, error) {
	tx := t.tx
	n := 0
	for _, k := range keys {
		res, err := txExec(ctx, tx, sqlLinkStampInSession, k[:], session)
		if err != nil {
			return n, fmt.Errorf("link stamps in %s: %w", session, err)
		}
		d, _ := res.RowsAffected()
		n += int(d)
	}
	return n, nil
}

// UpdateRecord rewrites a stored compile record (a refusal the host
// reported marks it refused, so attribution ignores it).
func (t *Tx) UpdateRecord(ctx context.Context, rec *binding.CompileRecord) error {
	tx := t.tx
	if _, err := txExec(ctx, tx, sqlUpdateRecord, encodeRecord(rec), rec.ID); err != nil {
		return fmt.Errorf("update compile %s: %w", rec.ID, err)
	}
	return nil
}

// SessionIDByPath returns the id of the session whose file is (or was) at
// path: pi's parentSession header names the parent's file, not its id.
func (d *DB) SessionIDByPath(ctx context.Context, path string) (string, bool, error) {
	var id string
	err := d.readRow(ctx, `SELECT s.id FROM sessions s JOIN files f ON f.id = s.file WHERE f.path = ?
		ORDER BY f.removed, f.updated_ms DESC LIMIT 1`, path).Scan(&id)
	if err == sql.ErrNoRows {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("session at %s: %w", path, err)
	}
	return id, true, nil
}
