package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
)

// eventPrinter writes `bindery tail` events, one line each: seq, time,
// type, and what the type says. A conversation's id is printed once, on a
// line of its own, when the feed moves to it, so event lines stay within
// 80 columns and the id can still be pasted whole.
type eventPrinter struct {
	conv  string
	short func(string) string // a session id as its unique prefix (nil: whole)
}

func (p *eventPrinter) print(w io.Writer, e api.Event, asJSON bool) error {
	if asJSON {
		_, err := fmt.Fprintf(w, "%s\n", e.Raw)
		return err
	}
	var b strings.Builder
	if e.Conversation != p.conv {
		p.conv = e.Conversation
		if p.conv != "" {
			name := p.conv
			if p.short != nil {
				name = p.short(name)
			}
			fmt.Fprintf(&b, "── %s\n", name)
		}
	}
	line := fmt.Sprintf("%6d %s %-8s", e.Seq, e.Time.Local().Format("15:04:05"), e.Type)
	// What must be said, then what is said while it fits (the rest is in
	// --json): the line never wraps.
	must, more := eventDetail(e)
	line += " " + must
	cols := width(w)
	for _, m := range more {
		if utf8.RuneCountInString(line)+1+utf8.RuneCountInString(m) <= cols {
			line += " " + m
		}
	}
	line = strings.TrimRight(line, " ")
	if utf8.RuneCountInString(line) > cols {
		// What must be said ran long (a reason's text): the line still
		// never wraps; --json has it whole.
		line = string([]rune(line)[:cols-1]) + "…"
	}
	b.WriteString(line)
	_, err := fmt.Fprintln(w, b.String())
	return err
}

// eventDetail is an event's fields in words (api/event.go lists them):
// what a line must say, and what it says when there is room.
func eventDetail(e api.Event) (string, []string) {
	var f struct {
		Branch           string          `json:"branch"`
		CompileID        string          `json:"compileId"`
		ThinkingStripped *int            `json:"thinkingStripped"`
		ThinkingKept     *int            `json:"thinkingKept"`
		DryRun           bool            `json:"dryRun"`
		Cache            api.CacheChange `json:"cache"`
		Path             string          `json:"path"`
		Reason           string          `json:"reason"`
		Tokens           int64           `json:"tokens"`
		Stamped          *int            `json:"stamped"`
		Released         *int            `json:"released"`
		Repeated         bool            `json:"repeated"`
		Linked           int             `json:"linked"`
		Source           string          `json:"source"`
		Entry            string          `json:"entry"`
		Change           string          `json:"change"`
		Entries          *int            `json:"entries"`
		File             string          `json:"file"`
		Line             int             `json:"line"`
		Signature        string          `json:"signature"`
		Transformation   string          `json:"transformation"`
	}
	json.Unmarshal(e.Fields, &f)
	n := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	switch e.Type {
	case api.EventCompile:
		s := f.CompileID
		if f.ThinkingKept != nil {
			s += fmt.Sprintf(" kept %d", n(f.ThinkingKept))
		}
		s += fmt.Sprintf(" stripped %d", n(f.ThinkingStripped))
		if f.DryRun {
			s += " (dry run)"
		}
		var more []string
		if f.Cache.Cause != "" && f.Cache.Cause != "none" {
			more = append(more, "cache:"+f.Cache.Cause)
		}
		if f.Branch != "" {
			more = append(more, "at "+f.Branch)
		}
		return s, more
	case api.EventStrip:
		return fmt.Sprintf("%s %s", f.Path, f.Reason), []string{"~" + plural(int(f.Tokens), "token", "tokens")}
	case api.EventAccept:
		s := fmt.Sprintf("%s stamped %d released %d", f.CompileID, n(f.Stamped), n(f.Released))
		if f.Repeated {
			s += " (repeated)"
		}
		return s, nil
	case api.EventEngage:
		return f.CompileID, []string{"at " + orDash(f.Branch)}
	case api.EventRelease:
		what := f.Path
		if what == "" {
			what = "by signature"
		}
		return fmt.Sprintf("%s released %d", what, n(f.Released)), []string{"(" + orDash(f.Source) + ")"}
	case api.EventStamp:
		if f.Linked > 0 {
			return fmt.Sprintf("entry %s: %s linked", f.Entry, plural(f.Linked, "stamp", "stamps")), nil
		}
		return fmt.Sprintf("entry %s: %s from the %s", f.Entry, plural(n(f.Stamped), "stamp", "stamps"), orDash(f.Source)), nil
	case api.EventSession:
		if f.Entries != nil {
			return fmt.Sprintf("%s, %s", f.Change, plural(*f.Entries, "entry", "entries")), nil
		}
		return f.Change, nil
	case api.EventIngestError:
		return fmt.Sprintf("%s %s", clipLeft(fmt.Sprintf("%s:%d", f.File, f.Line), 36), f.Reason), nil
	case api.EventTransform:
		return fmt.Sprintf("%s %s %s", f.Transformation, f.Path, f.Reason), nil
	}
	// Any other type: its fields as they came.
	return strings.TrimSpace(string(e.Fields)), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural is "1 block", "2 blocks".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
