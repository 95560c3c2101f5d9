package live

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/sizing"
)

// Bounds of a frame: it fits a 100 × 30 terminal.
const (
	MaxLines     = 30
	DefaultWidth = 100
	maxApps      = 8 // rows of applications; the rest are counted
	maxVerdicts  = 3 // ended applications shown, two lines each
)

// Dashboards is the frame's last line, unless Config.Notes replace it:
// where the graphs are.
const Dashboards = "dashboards: `docker compose up -d` (see docker-compose.yml), then Grafana at http://localhost:3000"

// Render draws s as at most MaxLines lines, each at most width columns
// (DefaultWidth when width ≤ 0).
func Render(s Snapshot, width int) []string {
	if width <= 0 {
		width = DefaultWidth
	}
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }

	add("sparkpulse watch · %s · database %s, data since %s (%s) · every %s · Ctrl-C stops",
		clock(s.At), s.Database, clock(s.Since), ago(s.At.Sub(s.Since)), s.Interval)
	out = append(out, selfLines(s)...)
	out = append(out, "")

	tail := []string{""}
	tail = append(tail, verdictLines(s)...)
	tail = append(tail, "",
		"cores: busy with tasks (task run time ÷ wall time, last minute) / held by live executors",
		"heap peak: the executor nearest its limit (JVMHeapMemory against heap.max) · lines/s: last minute")
	if len(s.Notes) > 0 {
		tail = append(tail, s.Notes...)
	} else {
		tail = append(tail, Dashboards)
	}
	switch {
	case s.QueryErr != "":
		add("InfluxDB not read: %s", s.QueryErr)
	case len(s.Apps) == 0:
		add("no Spark application yet: they appear once sparkpulse has seen them on the Spark REST API")
	default:
		// The table takes the room the rest leaves: the header, the
		// rows, and a line counting those left out.
		rows := min(maxApps, MaxLines-len(out)-len(tail)-2)
		out = append(out, appLines(s.Apps, max(rows, 1))...)
	}
	out = append(out, tail...)

	if len(out) > MaxLines {
		out = out[:MaxLines]
	}
	for i, l := range out {
		out[i] = fit(l, width)
	}
	return out
}

// selfLines are sparkpulse's own figures.
func selfLines(s Snapshot) []string {
	const indent = "            "
	if s.Self == nil {
		if s.SelfErr != "" {
			return []string{"sparkpulse  admin endpoint not read: " + s.SelfErr}
		}
		return nil
	}
	m := s.Self
	rate := "… lines/s"
	if m.LinesPerSec >= 0 {
		rate = perSecond(m.LinesPerSec) + " lines/s"
	}
	out := []string{
		fmt.Sprintf("sparkpulse  up %s · %s · %s in · %s written to InfluxDB", ago(m.Up), rate, count(m.Lines, "line"), count(m.Written, "point")),
		fmt.Sprintf("%squeue %s in memory, %s on disk · failed writes: %s", indent, size(m.QueueBytes), size(m.DiskBytes), number(m.WriteErrors)),
		fmt.Sprintf("%sdropped: %s · refused by InfluxDB: %s", indent, byReason(m.Dropped, "line"), byReason(m.Rejected, "point")),
	}
	for _, reason := range slices.Sorted(maps.Keys(m.Dropped)) {
		if why := graphite.Origin(reason); why != "" && m.Dropped[reason] > 0 {
			out = append(out, fmt.Sprintf("%s%s: %s", indent, reason, why))
		}
	}
	if line := sourceLine(m); line != "" {
		out = append(out, indent+line)
	}
	if m.NoDelta > 0 {
		out = append(out, fmt.Sprintf("%sno delta for %s: first seen within the grace after sparkpulse started",
			indent, count(m.NoDelta, "counter sample")))
	}
	return out
}

// sourceLine is the Spark REST sources' health: how many, those that
// failed in the last minute, and the applications waiting for a source.
func sourceLine(m *Self) string {
	if m.Sources == 0 && len(m.SourceErrors) == 0 {
		return "" // no [annotate]
	}
	line := "REST sources: " + number(m.Sources)
	switch {
	case m.SourceFailing == nil:
	case len(m.SourceFailing) == 0:
		line += ", all answering"
	default:
		var failing []string
		for _, src := range slices.Sorted(maps.Keys(m.SourceFailing)) {
			host := strings.TrimPrefix(strings.TrimPrefix(src, "http://"), "https://")
			failing = append(failing, fmt.Sprintf("%s (%s in the last minute)", host, number(m.SourceFailing[src])))
		}
		line += " · failing: " + strings.Join(failing, ", ")
	}
	if m.LostApps > 0 {
		line += fmt.Sprintf(" · %s lost", count(m.LostApps, "application"))
	}
	return line
}

// appFormat lays out a row of the applications' table in 100 columns.
const appFormat = "%-34s %-7s %4s  %-9s  %-13s  %s"

// appLines is the table of applications, newest first: at most rows of
// them, and a line counting the rest.
func appLines(apps []App, rows int) []string {
	out := []string{fmt.Sprintf(appFormat, "application", "status", "exec", "cores", "heap peak", "latest job")}
	for i, a := range apps {
		if i == rows {
			out = append(out, fmt.Sprintf("+%d more", len(apps)-rows))
			break
		}
		name := a.ID
		if a.Name != "" && a.Name != a.ID {
			name = fit(a.Name, max(34-len(a.ID)-1, 8)) + " " + a.ID
		}
		execs, cores := "?", "?"
		if a.Executors >= 0 {
			execs = strconv.Itoa(a.Executors)
		}
		busy := "?"
		if a.Busy >= 0 {
			busy = strconv.FormatFloat(a.Busy, 'f', 1, 64)
		}
		switch {
		case a.Status != StatusRunning:
			cores = "-"
		case a.Cores >= 0:
			cores = busy + " / " + strconv.Itoa(a.Cores)
		case a.Busy >= 0:
			cores = busy + " / ?"
		}
		heap := "?"
		if a.HeapPeak > 0 {
			heap = size(a.HeapPeak)
			if a.HeapMax > 0 {
				heap += fmt.Sprintf(", %.0f %%", 100*a.HeapPeak/a.HeapMax)
			}
		}
		job := "none yet"
		if a.Job != nil {
			job = fmt.Sprintf("#%d %s", a.Job.ID, strings.ToLower(a.Job.Status))
		}
		if a.FailedJobs > 0 {
			job += fmt.Sprintf(" (%s failed)", count(float64(a.FailedJobs), "job"))
		}
		out = append(out, fmt.Sprintf(appFormat, fit(name, 34), a.Status, execs, cores, heap, job))
	}
	return out
}

// verdictLines are the ended applications' accounting and reconciliation.
func verdictLines(s Snapshot) []string {
	ended := 0
	for _, a := range s.Apps {
		if a.Status != StatusRunning {
			ended++
		}
	}
	if len(s.Verdicts) == 0 {
		if ended > 0 {
			return []string{"accounting: an application's is written about a minute after its end, once its last reports are in"}
		}
		return []string{"accounting: each application's is written about a minute after it ends (what it held and used)"}
	}
	out := []string{"ended applications, newest first (sparkpulse report --fleet has the advice):"}
	for i, v := range s.Verdicts {
		if i == maxVerdicts {
			break
		}
		name := v.App
		if v.Name != "" && v.Name != v.App {
			name = v.Name + " " + v.App
		}
		out = append(out, fmt.Sprintf("  %s %s · reconciled: %s", clock(v.Ended), name, verdictWords(v.Verdict, v.Detail)))
		used := fmt.Sprintf("           held %s core-hours, %s GiB-hours by %s", human.Hours(v.CoreHours), human.Hours(v.GiBHours), count(float64(v.Executors), "executor"))
		if v.CPUUsed >= 0 {
			used += fmt.Sprintf(" · cores %.0f %% used", 100*v.CPUUsed)
		}
		if v.MemoryPeak >= 0 {
			used += fmt.Sprintf(" · memory peak %.0f %%", 100*v.MemoryPeak)
		}
		out = append(out, used)
	}
	return out
}

// verdictWords says a spark_reconcile verdict in words.
func verdictWords(verdict, detail string) string {
	with := func(s string) string {
		if detail == "" {
			return s
		}
		return s + ": " + detail
	}
	switch verdict {
	case "":
		return "not yet"
	case "exact":
		return "every total matches"
	case "no_delta":
		return "partial: it ran within sparkpulse's start grace"
	case "short":
		return with("short")
	case "failed_tasks":
		return "differs by failed tasks' metrics, as expected"
	case "above_spark":
		return with("above Spark's totals, set aside")
	case "no_stream":
		return with("not compared")
	}
	return with(verdict)
}

// fit cuts s to width columns (runes), marking the cut with "…".
func fit(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

func clock(t time.Time) string { return t.Format("15:04:05") }

// ago writes a duration to the second, or to the minute past an hour.
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d >= time.Hour {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// number writes a count with thousands separated by commas.
func number(n float64) string {
	s := strconv.FormatInt(int64(math.Round(n)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// count writes n things, with the plural when n is not 1.
func count(n float64, thing string) string {
	if math.Round(n) == 1 {
		return "1 " + thing
	}
	return number(n) + " " + thing + "s"
}

// perSecond writes a rate: one decimal below 10, whole above.
func perSecond(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return number(r)
}

func size(n float64) string { return sizing.Bytes(int64(n)) }

// byReason writes counts by reason, largest first: "none", or
// "12 lines (10 unmapped, 2 too_long)".
func byReason(m map[string]float64, thing string) string {
	total := 0.0
	for _, v := range m {
		total += v
	}
	if total == 0 {
		return "none"
	}
	reasons := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, r := range reasons {
		parts = append(parts, number(m[r])+" "+r)
	}
	return count(total, thing) + " (" + strings.Join(parts, ", ") + ")"
}
