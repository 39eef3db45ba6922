package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// BenchmarkDaemonMemory runs the real daemon over 1,000 sessions at two
// archive sizes and reports its resident memory once the first ingest is
// done (VmRSS) and at its peak (VmHWM), with the database's size. The
// memory must stay flat as the archive grows: bindery keeps offsets and
// digests, not the sessions. Each size runs once (-benchtime=1x).
func BenchmarkDaemonMemory(b *testing.B) {
	for _, per := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("sessions=1000/per=%dKiB", per>>10), func(b *testing.B) {
			e := newE2EB(b)
			start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			var total int64
			for i := range 1000 {
				s := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(i + 1), TargetBytes: per})
				if err := s.WriteFile(filepath.Join(e.sessions, pisessiontest.FileName(start.Add(time.Duration(i)*time.Minute), s.ID))); err != nil {
					b.Fatal(err)
				}
				total += int64(len(s.Data))
			}
			b.SetBytes(total)
			for b.Loop() {
				os.RemoveAll(e.state)
				p := e.serveB(b)
				c := api.NewClient(e.sock)
				t0 := time.Now()
				for {
					h, err := c.Health(context.Background())
					if err == nil && h.Watcher.IngestedBytes == total && h.Watcher.InitialScan {
						break
					}
					if time.Since(t0) > 10*time.Minute {
						b.Fatalf("not ingested after 10 minutes: %+v %v", h.Watcher, err)
					}
					time.Sleep(50 * time.Millisecond)
				}
				elapsed := time.Since(t0)
				t1 := time.Now()
				list, err := c.Sessions(context.Background())
				listTime := time.Since(t1)
				if err != nil || len(list) != 1000 {
					b.Fatalf("sessions: %d %v", len(list), err)
				}
				h, _ := c.Health(context.Background())
				rss, hwm := procMem(p.cmd.Process.Pid)
				b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
				b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MB")
				b.ReportMetric(float64(h.Database.SizeBytes)/(1<<20), "db-MB")
				b.ReportMetric(float64(total)/(1<<20), "archive-MB")
				b.ReportMetric(float64(total)/1e6/elapsed.Seconds(), "ingest-MB/s")
				b.ReportMetric(float64(listTime.Microseconds()), "list-1000-µs")
				c.Close()
				p.cmd.Process.Signal(os.Interrupt)
				<-p.done
			}
		})
	}
}

// newE2EB and serveB adapt the end-to-end helpers to a benchmark.
func newE2EB(b *testing.B) *e2e {
	root, err := os.MkdirTemp("", "bd")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	bin, err := buildBinary()
	if err != nil {
		b.Fatal(err)
	}
	e := &e2e{bin: bin, root: root,
		agent: filepath.Join(root, "agent"), state: filepath.Join(root, "state"), sock: filepath.Join(root, "run", "b.sock")}
	e.sessions = filepath.Join(e.agent, "sessions", pisessiontest.ProjectDir("/home/dev/src/app"))
	if err := os.MkdirAll(e.sessions, 0o755); err != nil {
		b.Fatal(err)
	}
	e.env = []string{"HOME=" + root, "PATH=" + os.Getenv("PATH"), "PI_CODING_AGENT_DIR=" + e.agent,
		"BINDERY_STATE_DIR=" + e.state, "BINDERY_SOCKET=" + e.sock}
	return e
}

func (e *e2e) serveB(b *testing.B) *daemonProc {
	p, err := e.start()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func procMem(pid int) (rss, hwm int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var kb int64
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			fmt.Sscan(string(rest), &kb)
			rss = kb << 10
		}
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			fmt.Sscan(string(rest), &kb)
			hwm = kb << 10
		}
	}
	return rss, hwm
}
