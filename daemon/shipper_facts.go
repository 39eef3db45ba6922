package daemon

import (
	"context"
	"fmt"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/sharedtier"
)

// shipFacts ships the outbox of facts (db/outbox_facts.go) until it is
// empty: per batch, the compile records first, then the releases, then the
// accepts (an accept decides its branch's owner from its compile's place
// in the tier, so the compile must be there first; the outbox's order
// already puts a compile before its accept). Each Put changes nothing for
// a fact already there, so a batch whose delete is lost is sent again
// harmlessly. A fact forgotten here before it shipped ships nothing.
func (s *shipper) shipFacts(ctx context.Context) error {
	for {
		facts, err := s.store.OutboxFacts(ctx, shipBatch)
		if err != nil || len(facts) == 0 {
			return err
		}
		var compiles []sharedtier.Compile
		var releases []db.ReleaseRow
		var accepts []sharedtier.Accept
		for _, f := range facts {
			if f.Gone {
				continue
			}
			switch f.Kind {
			case db.FactCompile:
				c := f.Compile
				compiles = append(compiles, sharedtier.Compile{ID: c.ID, Conversation: c.Conversation, Branch: c.Branch,
					Record: db.EncodeRecord(c.Record), CreatedMs: c.CreatedMs})
			case db.FactRelease:
				releases = append(releases, f.Release)
			case db.FactAccept:
				c := f.Compile
				accepts = append(accepts, sharedtier.Accept{Compile: c.ID, Conversation: c.Conversation, Branch: c.Branch,
					Stamped: c.Stamped, Released: c.Released, AcceptedMs: c.AcceptedMs})
			}
		}
		if _, err := s.shared.PutCompiles(ctx, compiles); err != nil {
			return fmt.Errorf("ship compiles: %w", err)
		}
		if _, err := s.shared.PutReleases(ctx, releases); err != nil {
			return fmt.Errorf("ship releases: %w", err)
		}
		if _, err := s.shared.PutAccepts(ctx, accepts); err != nil {
			return fmt.Errorf("ship accepts: %w", err)
		}
		if err := s.store.OutboxFactsShipped(ctx, facts[len(facts)-1].ID); err != nil {
			return err
		}
	}
}
