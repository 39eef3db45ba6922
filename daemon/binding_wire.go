package daemon

import (
	"context"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// wireBinding adds the binding endpoints and the event feed to the API:
// the hub, the journal every evented write goes through (session ingest
// included, so the feed sees events in seq order), and the Binder. The
// feeds close in shutdown step 3.
func (d *daemon) wireBinding(s *api.Server) *Journal {
	hub := api.NewHub(d.cfg.FeedBuffer, d.log.With("component", "events"))
	j := &Journal{DB: d.store, Hub: hub, Logger: d.log.With("component", "events"),
		Retention: db.EventRetention{MaxCount: d.cfg.EventsMax, MaxAge: d.cfg.EventsMaxAge}}
	b := NewBinder(j, BinderConfig{
		Models:      d.cfg.ModelTable,
		MaxMessages: d.cfg.MaxMessages,
		MaxBody:     d.cfg.MaxBody,
		Compiles:    binding.Retention{Tombstones: d.cfg.AcceptedWindow},
		Logger:      d.log.With("component", "binding"),
		Machine:     d.cfg.Machine,
		Follow:      func(_ context.Context, path string) error { return d.watch.Follow(path) },
	})
	b.trees = &d.trees // GET /v1/sessions/{id} and the conversation's branches read the same trees
	if d.shared != nil {
		b.readThrough = &readThrough{store: d.shared, wait: d.cfg.SharedWait, log: d.log.With("component", "shared")}
		b.stamped = d.ship.poke
		b.shared = &sharedFacts{store: d.shared, wait: d.cfg.SharedWait, log: d.log.With("component", "shared"), poke: d.ship.poke}
		d.ship.learn = b.learnAliases
	}
	d.binder = b
	d.ingest.journal = j
	blog := d.log.With("component", "binding")
	d.ingest.attribute = func(ctx context.Context, batch db.Batch, ing db.Ingested) error {
		err := b.Ingested(ctx, batch, ing)
		if err != nil && ctx.Err() == nil {
			blog.Warn("reply attribution", "file", batch.Path, "err", err)
		}
		return err
	}
	s.Binder = b
	s.Events = &api.EventFeed{Hub: hub, Log: EventLog{DB: d.store}, WriteTimeout: d.cfg.FeedStall, MaxID: d.cfg.MaxID,
		Logger: d.log.With("component", "events")}
	d.onShutdown = append(d.onShutdown, hub.Close)
	return j
}
