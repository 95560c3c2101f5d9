package report

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/schema"
)

// The newest run's last word: the attempt started last, its end over its
// start; a stream fact only where it began after that attempt ended, as a
// source's word on a run wins over the stream's.
func TestLatestRun(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	// fact is a spark_app fact of an attempt started at min minutes, phase
	// digit sub, ending at end minutes (none if negative).
	fact := func(kind string, min, sub, end int) map[string]any {
		f := map[string]any{schema.FieldFact: kind, schema.FieldText: kind + "@" + strconv.Itoa(min),
			"time": t0.Add(time.Duration(min)*time.Minute + time.Duration(sub)).Format(time.RFC3339Nano)}
		if end >= 0 {
			f[schema.FieldEndMs] = json.Number(strconv.FormatInt(t0.Add(time.Duration(end)*time.Minute).UnixMilli(), 10))
		}
		return f
	}
	for _, c := range []struct {
		name  string
		facts []map[string]any
		want  string
	}{
		{"an end over its start", []map[string]any{fact("end", 0, 1, 5), fact("start", 0, 0, -1)}, "end@0"},
		{"the newer attempt's start over an older end", []map[string]any{fact("end", 0, 1, 5), fact("start", 10, 0, -1)}, "start@10"},
		{"lost over start", []map[string]any{fact("start", 0, 0, -1), fact("lost", 0, 2, 7)}, "lost@0"},
		{"a source's end over the stream's fact of the same run", []map[string]any{fact("stream", 1, 3, 4), fact("end", 0, 1, 5)}, "end@0"},
		{"a later run the stream alone saw", []map[string]any{fact("end", 0, 1, 5), fact("stream", 60, 3, 61)}, "stream@60"},
		{"a stream fact after a start fact, no end known", []map[string]any{fact("start", 0, 0, -1), fact("stream", 60, 3, 61)}, "stream@60"},
		{"a running attempt's start over an earlier stream fact", []map[string]any{fact("stream", 0, 3, 1), fact("start", 10, 0, -1)}, "start@10"},
		{"the newer of two stream facts", []map[string]any{fact("stream", 60, 3, 61), fact("stream", 0, 3, 1)}, "stream@60"},
	} {
		if got := str(latestRun(c.facts), schema.FieldText); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
