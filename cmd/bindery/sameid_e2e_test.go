package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// TestSameSessionIDInTwoFiles: a copied session file carries its
// original's id. show, GET /v1/sessions/{id} and report --session all
// pick the same file (the live one with the latest last activity, a tie
// going to the file ingested last) and say that two files carry the id,
// listing them in that order.
func TestSameSessionIDInTwoFiles(t *testing.T) {
	e := newE2E(t)
	e.serve()
	start := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 11, Turns: 3, Plain: true, Start: start})
	orig := filepath.Join(e.sessions, pisessiontest.FileName(start, s.ID))
	dup := filepath.Join(e.sessions, pisessiontest.FileName(start.Add(time.Hour), s.ID))
	entries := len(s.Lines) - 1

	showJSON := func() (api.SessionDetail, error) {
		out, serr, code := e.run("show", "--json", s.ID)
		var d api.SessionDetail
		if code != 0 {
			return d, fmt.Errorf("show --json: exit %d %s", code, serr)
		}
		return d, json.Unmarshal([]byte(out), &d)
	}
	// check waits until show lists want (path, removed) in order, then
	// checks that show, report and the API agree on it.
	type file struct {
		path    string
		removed bool
	}
	check := func(what string, want ...file) {
		t.Helper()
		var d api.SessionDetail
		waitFor(t, what, func() (bool, string) {
			var err error
			d, err = showJSON()
			if err != nil {
				return false, err.Error()
			}
			if len(d.SameID) != len(want) {
				return false, fmt.Sprintf("sameId %+v", d.SameID)
			}
			for i, w := range want {
				if d.SameID[i].File != w.path || d.SameID[i].Removed != w.removed {
					return false, fmt.Sprintf("sameId %+v", d.SameID)
				}
			}
			return true, ""
		})
		if d.File != want[0].path || d.Removed != want[0].removed {
			t.Errorf("%s: show picked %s (removed %v), want %s", what, d.File, d.Removed, want[0].path)
		}
		out, serr, code := e.run("show", s.ID)
		if code != 0 || !strings.Contains(out, "2 files carry this session id") || !strings.Contains(out, want[1].path) {
			t.Errorf("%s: show: exit %d\n%s%s", what, code, out, serr)
		}
		rep := reportJSON(t, e, "--session", s.ID)
		if len(rep.SameID) != len(want) {
			t.Fatalf("%s: report sameId %+v", what, rep.SameID)
		}
		for i, w := range want {
			if got := rep.SameID[i]; got != (report.SessionFile{File: w.path, Removed: w.removed, LastActivity: d.SameID[i].LastActivity}) {
				t.Errorf("%s: report sameId[%d] %+v, want %+v", what, i, got, w)
			}
		}
		out, serr, code = e.run("report", "--session", s.ID)
		if code != 0 || !strings.Contains(out, "2 files carry this session id") || !strings.Contains(out, want[0].path) || !strings.Contains(out, want[1].path) {
			t.Errorf("%s: report: exit %d\n%s%s", what, code, out, serr)
		}
	}

	if err := s.WriteFile(orig); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the original ingested", func() (bool, string) {
		d, err := showJSON()
		return err == nil && d.Entries == entries, fmt.Sprint(d.Entries, err)
	})
	if d, _ := showJSON(); len(d.SameID) != 0 {
		t.Errorf("one file: sameId %+v, want none", d.SameID)
	}
	// The copy: the same last activity, ingested after the original.
	if err := s.WriteFile(dup); err != nil {
		t.Fatal(err)
	}
	check("the copy wins the tie", file{dup, false}, file{orig, false})

	// pi goes on writing the original: it is now the most recently active.
	last := s.Lines[len(s.Lines)-1].ID
	if err := pisessiontest.AppendLine(orig, pisessiontest.UserLine("ff000001", last, "later", start.Add(48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	check("the original, active later", file{orig, false}, file{dup, false})

	// The original is deleted: the live copy is shown, the removed file listed.
	if err := os.Remove(orig); err != nil {
		t.Fatal(err)
	}
	check("the live copy", file{dup, false}, file{orig, true})
}
