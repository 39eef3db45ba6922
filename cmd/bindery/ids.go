package main

import (
	"context"

	"github.com/my-pi/bindery/api"
)

// resolveSession turns what the user typed into a session id: the id
// itself, or the one session id it is a unique prefix of (as the tables
// print them, api.ShortIDs). A prefix of several is an error naming them;
// one of none is returned as typed, since it may name a conversation that
// is not a pi session.
func resolveSession(ctx context.Context, c *api.Client, typed string) (string, error) {
	list, err := c.Sessions(ctx)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	found, amb := api.MatchID(ids, typed)
	if found != "" {
		return found, nil
	}
	if len(amb) > 1 {
		return "", &api.AmbiguousIDError{What: "session", Typed: typed, Matches: amb}
	}
	return typed, nil
}

// shortIDs prints session ids as the tables do (api.ShortIDs over every
// session the daemon knows), for commands that name one session or follow
// the feed. An id that is not a pi session (another host's conversation)
// prints whole. The session list is fetched again when an id it does not
// hold comes along (a session pi has just started).
type shortIDs struct {
	c     *api.Client
	short map[string]string
}

func (s *shortIDs) of(ctx context.Context, id string) string {
	if p, ok := s.short[id]; ok {
		return p
	}
	list, err := s.c.Sessions(ctx)
	if err != nil {
		return id
	}
	ids := make([]string, len(list))
	for i, x := range list {
		ids[i] = x.ID
	}
	s.short = api.ShortIDs(ids)
	if p, ok := s.short[id]; ok {
		return p
	}
	s.short[id] = id // not a session: whole, and not asked about again
	return id
}
