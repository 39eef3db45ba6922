package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/daemon/report/reporter"
)

// PricesFileName is the price-table override read from the state
// directory when $BINDERY_PRICES does not name another file
// (daemon/report.ParsePrices documents the format).
const PricesFileName = "prices.json"

// wireReport adds GET /v1/report and has ingest keep the report's
// aggregates (it runs before the watcher starts). A price file that cannot be read or
// parsed is logged and the built-in table used: reports are not worth
// refusing to start over.
func (d *daemon) wireReport(s *api.Server) {
	prices, err := loadPrices(d.cfg)
	if err != nil {
		d.log.Error("report: ignoring the price file; using the built-in table", "err", err)
		prices = report.DefaultPrices()
	}
	// Before the watcher starts: every batch keeps its session's report
	// aggregate current in its own transaction, priced as the report is.
	d.store.SetReportAggregator(reporter.Aggregator{Prices: prices})
	rep := reporter.New(d.store, prices, nil, d.log.With("component", "report"))
	s.Reports = rep
	d.wireTeam(s, rep) // team.go: GET /v1/report/team, the team facts shipped
}

// loadPrices reads $BINDERY_PRICES, else <state dir>/prices.json when it
// exists, over the built-in table.
func loadPrices(cfg Config) (*report.Prices, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	path, explicit := getenv("BINDERY_PRICES"), true
	if path == "" {
		path, explicit = filepath.Join(cfg.StateDir, PricesFileName), false
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return report.DefaultPrices(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("price file %s: %w", path, err)
	}
	p, err := report.ParsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("price file %s: %w", path, err)
	}
	return p, nil
}
