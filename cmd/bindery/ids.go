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
