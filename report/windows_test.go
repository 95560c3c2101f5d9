package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sparkpulse/sparkpulse/influx"
)

// A read whose answer passes what a reader holds is read again in halves,
// oldest first, until each answer fits; a shorter one is read once, and a
// range past maxWindow a window at a time.
func TestReadWindows(t *testing.T) {
	bounds := regexp.MustCompile(`time >= (\d+)ms AND time < (\d+)ms`)
	var asked []string
	fits := 90 * time.Minute // the longest range whose answer fits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := bounds.FindStringSubmatch(r.FormValue("q"))
		lo, _ := strconv.ParseInt(m[1], 10, 64)
		hi, _ := strconv.ParseInt(m[2], 10, 64)
		asked = append(asked, (time.Duration(hi-lo) * time.Millisecond).String())
		if time.Duration(hi-lo)*time.Millisecond > fits {
			w.Write(bytes.Repeat([]byte(" "), 17<<20))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"results": []any{map[string]any{"series": []influx.Series{
			{Name: "m", Columns: []string{"time", "lo"}, Values: [][]any{{lo, lo}}}}}}})
	}))
	defer srv.Close()
	r, err := influx.NewQuerier(influx.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stmt := func(lo, hi time.Time) string {
		return fmt.Sprintf(`SELECT * FROM m WHERE time >= %dms AND time < %dms`, lo.UnixMilli(), hi.UnixMilli())
	}
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	series, err := readWindows(context.Background(), r, "db", from, from.Add(4*time.Hour), stmt)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range series {
		got = append(got, fmt.Sprint(s.Values[0][1]))
	}
	want := []string{}
	for i := range 4 {
		want = append(want, fmt.Sprint(from.Add(time.Duration(i)*time.Hour).UnixMilli()))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("windows read from %v, want %v (asked %v)", got, want, asked)
	}
	if fmt.Sprint(asked) != "[4h0m0s 2h0m0s 1h0m0s 1h0m0s 2h0m0s 1h0m0s 1h0m0s]" {
		t.Errorf("asked %v", asked)
	}

	asked = nil
	if _, err := readWindows(context.Background(), r, "db", from, from.Add(time.Hour), stmt); err != nil || len(asked) != 1 {
		t.Errorf("an hour: %v, asked %v", err, asked)
	}

	// Three days and a half: three days, each split in two, then half a
	// day.
	asked, fits = nil, 12*time.Hour
	series, err = readWindows(context.Background(), r, "db", from, from.Add(3*maxWindow+maxWindow/2), stmt)
	if err != nil || len(series) != 7 || fmt.Sprint(series[len(series)-1].Values[0][1]) != fmt.Sprint(from.Add(3*maxWindow).UnixMilli()) {
		t.Errorf("3.5 days: %v, %d answers", err, len(series))
	}
	for _, a := range asked {
		if d, _ := time.ParseDuration(a); d > maxWindow {
			t.Errorf("asked for %s in one statement", a)
		}
	}
}
