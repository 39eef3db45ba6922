package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// The team chart parses, draws one bar per day with a rect per machine
// (the nine costliest named, the rest as "other machines"), hatches the
// avoidable part of each day that has one, and the table keeps every line
// within 80 columns whatever the names.
func TestTeamChartAndText(t *testing.T) {
	r := api.TeamReport{Version: api.TeamReportFormat, Unit: "micro-USD", Shared: "postgres://bindery@db.example:5432/team"}
	for m := range 12 {
		name := fmt.Sprintf("machine-%02d-with-a-rather-long-host-name.example", m)
		r.Machines = append(r.Machines, api.TeamLine{Name: name, TeamFigures: api.TeamFigures{Requests: 10, Spend: api.TeamSpend{Total: int64(12-m) * 1_000_000}}})
		for d := range 3 {
			c := api.TeamCell{Day: fmt.Sprintf("2026-12-0%d", d+1), Machine: name}
			c.Spend.Total = int64(12-m) * 333_333
			if d == 1 {
				c.Breaks.Avoidable = 50_000
			}
			r.DayMachines = append(r.DayMachines, c)
			r.Total.Spend.Total += c.Spend.Total
		}
	}
	for d := range 3 {
		r.Days = append(r.Days, api.TeamLine{Name: fmt.Sprintf("2026-12-0%d", d+1)})
	}
	svg := teamSVG(r)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	rects, hatched, groups, depth, inSeries := 0, 0, 0, 0, false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart does not parse: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			for _, a := range el.Attr {
				if a.Name.Local == "id" && a.Value == SeriesTeamDays {
					inSeries = true
					depth = 0
				}
				if a.Name.Local == "class" && a.Value == MarksAvoidable {
					hatched++
				}
			}
			if inSeries && el.Name.Local == "g" && depth == 1 {
				groups++
			}
			if inSeries && el.Name.Local == "rect" {
				rects++
			}
		case xml.EndElement:
			depth--
			if inSeries && depth < 0 {
				inSeries = false
			}
		}
	}
	if groups != 3 || hatched != 1 || rects != 3*10+1 {
		t.Errorf("%d day groups, %d rects, %d hatched: want 3, 31, 1", groups, rects, hatched)
	}
	if !bytes.Contains(svg, []byte("other machines")) {
		t.Error("the machines past the ninth are not drawn as other machines")
	}
	text := teamText(r)
	for _, l := range strings.Split(text, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	if !strings.Contains(text, "$78.00 over 0 requests") {
		t.Errorf("the total: %s", text)
	}
}
