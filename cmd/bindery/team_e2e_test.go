package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db/pgtest"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// writeSessions writes generated pi sessions into a daemon's agent folder.
func writeSessions(t *testing.T, agent string, seeds ...uint64) []*pisessiontest.Session {
	t.Helper()
	dir := filepath.Join(agent, "sessions", pisessiontest.ProjectDir("/home/dev/src/app"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []*pisessiontest.Session
	for _, seed := range seeds {
		start := time.Date(2026, 11, 28+int(seed%3), 9, 0, 0, 0, time.UTC)
		s := pisessiontest.Generate(pisessiontest.Options{Seed: seed, Turns: 4 + int(seed%4), Start: start})
		if err := s.WriteFile(filepath.Join(dir, pisessiontest.FileName(start, s.ID))); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestTeamReport: two machines (their own daemons and SQLite, one
// PostgreSQL) ship their requests' facts; `bindery report --shared` on
// either shows the team: the per-machine lines (and the per-person,
// client, model and day lines) add up to the total exactly, in integer
// micro-USD; a session synced to both machines counts once; each machine's
// line agrees with its own local report (to the rounding of each request
// to a micro-dollar); the JSON's shape is the documented one and shows no
// password; the chart is written. A restart ships nothing twice.
func TestTeamReport(t *testing.T) {
	dsn := pgtest.Database(t) + " password=" + sharedPassword
	laptop := newDaemon(t, "--shared", dsn, "--machine", "laptop", "--person", "ann", "--team-scan", "200ms")
	devbox := newDaemon(t, "--shared", dsn, "--machine", "devbox", "--person", "bob", "--team-scan", "200ms")
	writeSessions(t, laptop.agent, 101, 102)
	writeSessions(t, devbox.agent, 103)
	synced := writeSessions(t, laptop.agent, 104)[0]
	writeSessions(t, devbox.agent, 104) // the same file, synced

	ctx := ctxT(t)
	local := func(d *bindDaemon, sessions int) api.Report {
		var rep api.Report
		waitFor(t, "the local report", func() (bool, string) {
			var err error
			rep, err = d.client.Report(ctx, "")
			return err == nil && rep.Figures.Sessions == sessions, fmt.Sprint(rep.Figures.Sessions, err)
		})
		return rep
	}
	la, dv := local(laptop, 3), local(devbox, 2)
	var syncedReqs int
	var syncedSpend float64
	for _, s := range la.Sessions {
		if s.Session == synced.ID {
			syncedReqs, syncedSpend = s.Requests, s.Spend
		}
	}
	reqs := func(r api.Report) int64 { return int64(r.Figures.Requests.Total) }
	want := reqs(la) + reqs(dv) - int64(syncedReqs)
	if syncedReqs == 0 || want == 0 {
		t.Fatalf("no requests to report (synced %d)", syncedReqs)
	}

	var rep api.TeamReport
	waitFor(t, "the team report", func() (bool, string) {
		var err error
		rep, err = laptop.client.TeamReport(ctx, api.TeamQuery{})
		// what each machine still holds to ship, for a failure's message
		var held []string
		for _, d := range []*bindDaemon{laptop, devbox} {
			if h, herr := d.client.Health(ctx); herr == nil && h.Shared != nil {
				held = append(held, fmt.Sprintf("%s: %d stamps, %d team facts to ship (oldest %d ms)", h.Shared.Machine, h.Shared.Outbox, h.Shared.TeamOutbox, h.Shared.OutboxLagMs))
			}
		}
		return err == nil && rep.Total.Requests == want, fmt.Sprintf("%d requests of %d, %v; %v", rep.Total.Requests, want, err, held)
	})
	t.Logf("team: %d requests, %d micro-USD, %d breaks, %d avoidable; laptop local %d req $%.6f, devbox %d req $%.6f, synced %d", rep.Total.Requests, rep.Total.Spend.Total, rep.Total.Breaks.Count, rep.Total.Breaks.Avoidable, reqs(la), la.Figures.Total, reqs(dv), dv.Figures.Total, syncedReqs)
	// exactly: every grouping sums to the total
	for name, ls := range map[string][]api.TeamLine{"machines": rep.Machines, "people": rep.People, "clients": rep.Clients, "models": rep.Models, "days": rep.Days} {
		var spend, avoid, req, read int64
		for _, l := range ls {
			spend += l.Spend.Total
			avoid += l.Breaks.Avoidable
			req += l.Requests
			read += l.CacheRead
		}
		if spend != rep.Total.Spend.Total || avoid != rep.Total.Breaks.Avoidable || req != rep.Total.Requests || read != rep.Total.CacheRead {
			t.Errorf("%s sum to %d micro-USD, %d avoidable, %d requests, %d read; the total is %+v", name, spend, avoid, req, read, rep.Total)
		}
	}
	var cells int64
	for _, c := range rep.DayMachines {
		cells += c.Spend.Total
	}
	if cells != rep.Total.Spend.Total {
		t.Errorf("day and machine cells sum to %d, the total is %d", cells, rep.Total.Spend.Total)
	}
	if k := rep.Total.Spend; k.Input+k.Output+k.CacheRead+k.CacheWrite+k.Other != k.Total || k.Total == 0 {
		t.Errorf("spend by kind %+v", k)
	}
	if len(rep.Machines) != 2 || len(rep.People) != 2 || len(rep.Clients) != 1 || rep.Clients[0].Name != "pi" {
		t.Fatalf("machines %v people %v clients %v", rep.Machines, rep.People, rep.Clients)
	}
	// each machine's line is its own report, the synced session on the
	// machine that shipped it first
	by := map[string]api.TeamLine{}
	for _, m := range rep.Machines {
		by[m.Name] = m
	}
	both := by["laptop"].Requests + by["devbox"].Requests
	if both != want || (by["laptop"].Requests != reqs(la) && by["devbox"].Requests != reqs(dv)) {
		t.Errorf("laptop %d, devbox %d requests; local %d and %d, synced %d", by["laptop"].Requests, by["devbox"].Requests, reqs(la), reqs(dv), syncedReqs)
	}
	// the local reports' spend, the synced session once, to the rounding
	// of each request's parts to a micro-dollar
	localSpend := la.Figures.Total + dv.Figures.Total - syncedSpend
	if d := math.Abs(float64(rep.Total.Spend.Total)/1e6 - localSpend); d > float64(5*want)*0.5e-6 {
		t.Errorf("team spend $%.6f, the local reports' $%.6f", float64(rep.Total.Spend.Total)/1e6, localSpend)
	}

	// the CLI: --json's shape, no password, the table, the chart
	out, serr, code := laptop.runCLI(ctx, "report", "--shared", "--json")
	if code != 0 {
		t.Fatalf("report --shared --json: %d %s", code, serr)
	}
	if strings.Contains(out+serr, sharedPassword) {
		t.Fatal("the password is in the report")
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var shape map[string]any
	if err := dec.Decode(&shape); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "unit", "shared", "total", "machines", "people", "clients", "models", "days", "dayMachines"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("--json has no %q", k)
		}
	}
	if shape["unit"] != "micro-USD" {
		t.Errorf("unit %v", shape["unit"])
	}
	total := shape["total"].(map[string]any)
	spend := total["spend"].(map[string]any)
	if n, ok := spend["total"].(json.Number); !ok || strings.ContainsAny(n.String(), ".eE") || n.String() != fmt.Sprint(rep.Total.Spend.Total) {
		t.Errorf("total.spend.total %v: want the integer %d", spend["total"], rep.Total.Spend.Total)
	}
	for _, k := range []string{"requests", "errored", "input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "hitRatio", "spend", "unpriced", "breaks"} {
		if _, ok := total[k]; !ok {
			t.Errorf("total has no %q", k)
		}
	}
	m0 := shape["machines"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "requests", "spend", "breaks"} {
		if _, ok := m0[k]; !ok {
			t.Errorf("a machine line has no %q", k)
		}
	}
	text, serr, code := devbox.runCLI(ctx, "report", "--shared")
	if code != 0 || !strings.Contains(text, "MACHINE") || !strings.Contains(text, "laptop") || !strings.Contains(text, "bob") {
		t.Fatalf("report --shared: %d %s\n%s", code, serr, text)
	}
	for _, l := range strings.Split(text, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	chart := filepath.Join(t.TempDir(), "team.html")
	if _, serr, code := laptop.runCLI(ctx, "report", "--shared", "--chart", chart); code != 0 {
		t.Fatalf("--chart: %s", serr)
	}
	page, err := os.ReadFile(chart)
	if err != nil || !bytes.Contains(page, []byte(SeriesTeamDays)) || !bytes.Contains(page, []byte("laptop")) {
		t.Fatalf("chart: %v", err)
	}
	if out := os.Getenv("BINDERY_TEAM_CHART"); out != "" { // to look at it
		os.WriteFile(out, page, 0o644)
	}
	if _, serr, code := laptop.runCLI(ctx, "report", "--shared", "--since", "tomorrow"); code == 0 || !strings.Contains(serr, "YYYY-MM-DD") {
		t.Errorf("a bad --since: %d %s", code, serr)
	}
	days, _ := laptop.client.TeamReport(ctx, api.TeamQuery{Since: rep.Days[len(rep.Days)-1].Name})
	if days.Total.Requests != rep.Days[len(rep.Days)-1].Requests {
		t.Errorf("--since the last day: %d requests, that day has %d", days.Total.Requests, rep.Days[len(rep.Days)-1].Requests)
	}

	// the team outbox is empty once shipped (status's figure)
	waitFor(t, "the team outbox shipped", func() (bool, string) {
		h, err := laptop.client.Health(ctx)
		if err != nil || h.Shared == nil {
			return false, fmt.Sprint(err)
		}
		return h.Shared.TeamOutbox == 0, fmt.Sprint(h.Shared.TeamOutbox, " facts to ship")
	})
	// a restart queues and ships nothing twice
	laptop.restart(1)
	time.Sleep(time.Second)
	again, err := devbox.client.TeamReport(ctx, api.TeamQuery{})
	if err != nil || again.Total != rep.Total {
		t.Errorf("after a restart: %+v %v, was %+v", again.Total, err, rep.Total)
	}
	if strings.Contains(laptop.log(), sharedPassword) {
		t.Error("the password is in the log")
	}

	// a daemon joined to no tier says so
	alone := newDaemon(t)
	if _, serr, code := alone.runCLI(ctx, "report", "--shared"); code == 0 || !strings.Contains(serr, "--shared DSN") {
		t.Errorf("alone: %d %s", code, serr)
	}
}

// TestTeamReportHosts: the replies bindery proxy accepted for a host
// (Claude Code here) reach the team's report under their client, priced
// as the local report prices them, an unpriced model counted as such.
func TestTeamReportHosts(t *testing.T) {
	dsn := pgtest.Database(t)
	pe := newProxyE2EWith(t, func(e *e2e) {
		e.env = append(e.env, "BINDERY_SHARED="+dsn, "BINDERY_MACHINE=gateway", "BINDERY_PERSON=ci", "BINDERY_TEAM_SCAN=200ms")
		// the built-in table prices no Opus 5.5: a price file does
		price := `{"claude-opus-5-5": {"input": 15, "output": 75, "cacheWrite": 18.75, "cacheRead": 1.5, "source": "test"}}`
		if err := os.MkdirAll(e.state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.state, "prices.json"), []byte(price), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	pe.up.SetReply(toolLoop(1))
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.header.Set("X-Claude-Code-Session-Id", "0b1d2e3f-4a5b-4c6d-8e7f-teamreport001")
	h.cycle("fix the parser")
	o := newAPIHost(t, pe.addr, "claude-haiku-4-5")
	o.header.Set("X-Claude-Code-Session-Id", "unpriced-session")
	o.user("hello")
	o.turn()
	var local api.Report
	waitFor(t, "the local report's hosts", func() (bool, string) {
		out, _, _ := pe.run("report", "--json")
		local = api.Report{}
		json.Unmarshal([]byte(out), &local)
		return local.Hosts != nil && len(local.Hosts.Conversations) == 2, fmt.Sprint(local.Hosts)
	})
	replies := int64(local.Hosts.Usage.Entries)
	var rep api.TeamReport
	waitFor(t, "the team report", func() (bool, string) {
		out, serr, _ := pe.run("report", "--shared", "--json")
		rep = api.TeamReport{}
		json.Unmarshal([]byte(out), &rep)
		return rep.Total.Requests == replies, fmt.Sprintf("%d of %d requests %s", rep.Total.Requests, replies, serr)
	})
	if len(rep.Clients) != 1 || rep.Clients[0].Name != "claude-code" || len(rep.Machines) != 1 || rep.Machines[0].Name != "gateway" || rep.People[0].Name != "ci" {
		t.Fatalf("clients %+v machines %+v people %+v", rep.Clients, rep.Machines, rep.People)
	}
	if rep.Total.Unpriced != 1 || rep.Total.Input != local.Hosts.Usage.Input || rep.Total.CacheRead != local.Hosts.Usage.Read {
		t.Errorf("team %+v; local hosts %+v", rep.Total, local.Hosts.Usage)
	}
	if d := math.Abs(float64(rep.Total.Spend.Total)/1e6 - local.Hosts.Total); d > float64(4*replies)*0.5e-6 || rep.Total.Spend.Total == 0 {
		t.Errorf("team spend %d micro-USD, local hosts $%.6f", rep.Total.Spend.Total, local.Hosts.Total)
	}
}
