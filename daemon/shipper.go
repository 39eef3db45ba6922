package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/sharedtier"
)

// The shipper sends the outbox to the shared tier (issue 29): stamps this
// machine recorded, in order, in batches of shipBatch, each batch in one
// PostgreSQL transaction whose inserts change nothing for a stamp already
// there, then deletes what it sent. A batch whose delete is lost (a crash
// between the two) is sent again and changes nothing. While the server is
// unreachable it backs off (shipBackoff doubling to shipMaxBackoff) and the
// machine works alone; its outbox waits. At shutdown (step 5) it ships what
// is left within ShipAtExit.
const (
	shipBatch      = 500
	shipEvery      = 200 * time.Millisecond
	shipBackoff    = 500 * time.Millisecond
	shipMaxBackoff = 30 * time.Second
	// ShipAtExit bounds the last shipping at shutdown.
	ShipAtExit = 5 * time.Second
	// shipAttempt bounds one attempt: a server that takes the connection
	// and then stalls would otherwise hold the shipper.
	shipAttempt = 30 * time.Second
)

type shipper struct {
	// wake, when an accept recorded stamps, ships at once instead of at
	// the next tick: the next machine to continue the session finds them
	// sooner.
	wake   chan struct{}
	store  *db.DB
	shared *sharedtier.Store
	log    *slog.Logger
	ready  bool // the shared schema is migrated
	// learn records aliases other machines learned; aliasAfter is the
	// tier's last alias id pulled (account_team.go)
	learn      func(context.Context, []sharedtier.Alias) error
	aliasAfter int64
	failed     bool // the last attempt failed (said once until one works)
	// team, when set, queues and ships the team report's facts (team.go).
	team *teamFacts
}

// run ships until ctx ends, then returns; drain ships what is left.
func (s *shipper) run(ctx context.Context) error {
	wait := shipEvery
	for {
		next := time.Now().Add(wait)
	sleep:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(next)):
				break sleep
			case <-s.wake:
				if !s.failed {
					break sleep
				}
				// While the server is away, an accept does not cut the
				// backoff short: attempts stay spaced out.
			}
		}
		actx, cancel := context.WithTimeout(ctx, shipAttempt)
		err := s.shipAll(actx)
		if err == nil {
			err = s.pullAliases(actx) // account_team.go
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !s.failed {
				s.log.Warn("shared tier unreachable; this machine works alone and ships its outbox when it is back", "shared", s.shared.Name(), "err", err)
				s.failed = true
			}
			wait = min(max(2*wait, shipBackoff), shipMaxBackoff)
			continue
		}
		if s.failed {
			s.log.Info("shared tier reachable again; outbox shipped", "shared", s.shared.Name())
			s.failed = false
		}
		wait = shipEvery
	}
}

// shipAll ships batches until the outbox is empty.
func (s *shipper) shipAll(ctx context.Context) error {
	if !s.ready {
		if err := s.shared.Migrate(ctx); err != nil {
			return err
		}
		s.ready = true
	}
	for {
		items, err := s.store.Outbox(ctx, shipBatch)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			// then compiles, releases and accepts (shipper_facts.go):
			// after the stamps, so a compile's accept never arrives before
			// the stamps it recorded; the team report's facts last
			// (team.go): nothing waits on them
			if err := s.shipFacts(ctx); err != nil {
				return err
			}
			return s.shipTeam(ctx)
		}
		rows := make([]db.StampRow, len(items))
		for i, it := range items {
			rows[i] = it.Stamp
		}
		if _, err := s.shared.PutStamps(ctx, rows); err != nil {
			return err
		}
		if err := s.store.OutboxShipped(ctx, items[len(items)-1].ID); err != nil {
			return err
		}
	}
}

// poke wakes the shipper (never blocks; nil-safe).
func (s *shipper) poke() {
	if s == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// drain is shutdown's last shipping, bounded by ShipAtExit.
func (s *shipper) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), ShipAtExit)
	defer cancel()
	if s.team != nil {
		s.team.next = time.Time{} // the last requests' facts go too
	}
	if err := s.shipAll(ctx); err != nil {
		n, _ := s.store.OutboxLen(context.Background())
		f, _ := s.store.OutboxFactsLen(context.Background())
		s.log.Warn("outbox not shipped whole at exit; the next start ships it", "shared", s.shared.Name(), "left", n, "facts", f, "err", err)
	}
}
