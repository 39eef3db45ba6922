package watcher

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// archive is a generated ~100 MB archive of pi sessions (v3 and v1, 2 MB
// each), built once per test binary run.
var archive = sync.OnceValue(func() [][]byte {
	const total = 100 << 20
	var files [][]byte
	size := 0
	for i := 0; size < total; i++ {
		var b bytes.Buffer
		v := 3
		if i%5 == 4 {
			v = 1
		}
		pisessiontest.Write(&b, pisessiontest.Options{Seed: uint64(i), Version: v, TargetBytes: 2 << 20})
		files = append(files, b.Bytes())
		size += b.Len()
	}
	return files
})

func archiveBytes(files [][]byte) int64 {
	var n int64
	for _, f := range files {
		n += int64(len(f))
	}
	return n
}

// BenchmarkColdIngestParse parses every line of the archive into entries,
// as a cold ingest does (no SQLite): compare its MB/s with
// BenchmarkColdIngestJSONValid, the floor of any pass that reads every byte.
func BenchmarkColdIngestParse(b *testing.B) {
	files := archive()
	b.SetBytes(archiveBytes(files))
	b.ReportAllocs()
	entries := 0
	for b.Loop() {
		entries = 0
		for _, data := range files {
			p := NewParser("/bench.jsonl")
			off := 0
			for off < len(data) {
				nl := bytes.IndexByte(data[off:], '\n')
				line := data[off : off+nl+1]
				if res := p.Line(line, int64(off)); res.Entry != nil {
					entries++
				}
				off += nl + 1
			}
		}
	}
	b.ReportMetric(float64(entries), "entries")
}

// BenchmarkColdIngestJSONValid is json.Valid over the same lines.
func BenchmarkColdIngestJSONValid(b *testing.B) {
	files := archive()
	b.SetBytes(archiveBytes(files))
	b.ReportAllocs()
	for b.Loop() {
		for _, data := range files {
			off := 0
			for off < len(data) {
				nl := bytes.IndexByte(data[off:], '\n')
				if !json.Valid(data[off : off+nl]) {
					b.Fatal("invalid line")
				}
				off += nl + 1
			}
		}
	}
}

// BenchmarkColdIngestFiles reads the archive from files (page cache) through
// the watcher's reader, batches and cursor checks included, with a sink that
// does nothing: everything a cold ingest costs except the database.
func BenchmarkColdIngestFiles(b *testing.B) {
	files := archive()
	dir := b.TempDir()
	var paths []string
	for i, data := range files {
		p := filepath.Join(dir, "s"+itoa(i)+".jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	b.SetBytes(archiveBytes(files))
	b.ReportAllocs()
	for b.Loop() {
		rd := newReader(readChunk, 64<<20, 4<<20)
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			cur, chk := Cursor{Path: p}, fileCheck{}
			var tail []byte
			for {
				_, next, nextChk, eof, _, err := rd.readBatch(f, cur, chk, tail, nil)
				if err != nil {
					b.Fatal(err)
				}
				if next.Offset == cur.Offset {
					break
				}
				cur, chk, tail = next, nextChk, rd.tail.buf
				if eof {
					break
				}
			}
			f.Close()
			if cur.Offset != int64(len(files[0])) && cur.Offset == 0 {
				b.Fatal("nothing read")
			}
		}
	}
}

// BenchmarkColdIngestRatio alternates the parse pass and the json.Valid pass
// file by file (2 MB each) inside each iteration, so both see the same
// machine load (this VM is shared and noisy), and reports both speeds and
// their ratio (parse time / json.Valid time).
func BenchmarkColdIngestRatio(b *testing.B) {
	files := archive()
	total := float64(archiveBytes(files))
	var parseNs, validNs time.Duration
	for b.Loop() {
		for _, data := range files {
			t0 := time.Now()
			p := NewParser("/bench.jsonl")
			for off := 0; off < len(data); {
				nl := bytes.IndexByte(data[off:], '\n')
				p.Line(data[off:off+nl+1], int64(off))
				off += nl + 1
			}
			t1 := time.Now()
			for off := 0; off < len(data); {
				nl := bytes.IndexByte(data[off:], '\n')
				if !json.Valid(data[off : off+nl]) {
					b.Fatal("invalid line")
				}
				off += nl + 1
			}
			parseNs += t1.Sub(t0)
			validNs += time.Since(t1)
		}
	}
	b.ReportMetric(total/1e6/(parseNs.Seconds()/float64(b.N)), "parse-MB/s")
	b.ReportMetric(total/1e6/(validNs.Seconds()/float64(b.N)), "valid-MB/s")
	b.ReportMetric(parseNs.Seconds()/validNs.Seconds(), "parse/valid")
}

// BenchmarkAppendToBatch is the watcher's cost, without fsnotify or a
// database, of turning one appended ~1 KB line at the end of a 10 MB
// session into a batch: stat, cursor check (two 4 KiB preads and hashes,
// whatever the file's size), pread of the new bytes, parse.
func BenchmarkAppendToBatch(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	var buf bytes.Buffer
	pisessiontest.Write(&buf, pisessiontest.Options{Seed: 1, TargetBytes: 10 << 20})
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	w := New(Config{Roots: []Root{{Dir: dir}}}, nil)
	batches := 0
	sink := func(context.Context, Batch) error { batches++; return nil }
	ctx := b.Context()
	if err := w.follow(ctx, path, sink); err != nil {
		b.Fatal(err)
	}
	line := pisessiontest.UserLine("feed0001", "", strings.Repeat("appended text ", 70), time.Now())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	batches = 0
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := w.follow(ctx, path, sink); err != nil {
			b.Fatal(err)
		}
	}
	if batches != b.N {
		b.Fatalf("%d batches for %d appends", batches, b.N)
	}
}
