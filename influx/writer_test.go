package influx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sparkpulse/sparkpulse/queue"
)

// newTestWriter starts a writer on an httptest server running f.
func newTestWriter(t *testing.T, f *fakeInflux, cfg Config) *Writer {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.URL = srv.URL
	w, err := NewWriter(cfg, Target{Bucket: "db/rp"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// newBubbleWriter starts a writer inside a synctest bubble, its requests
// served in memory by f.
func newBubbleWriter(t *testing.T, f *fakeInflux, cfg Config) *Writer {
	t.Helper()
	f.t = t
	cfg.URL = "http://influx.test:8086"
	cfg.transport = handlerTransport{f}
	if cfg.Gzip == GzipAuto {
		cfg.Gzip = GzipOff // no name lookup inside a bubble
	}
	w, err := NewWriter(cfg, Target{Bucket: "db"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// heldWriter is a writer in a bubble that sends batches of one line, one
// at a time, and queues 25 bytes in memory (two lines of 10 bytes fill it
// past three quarters), to f, a server that answers each write only once
// release is sent to or closed.
func heldWriter(t *testing.T) (w *Writer, f *fakeInflux, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	f = &fakeInflux{respond: func(*request, int) (int, http.Header, string) {
		<-release
		return http.StatusNoContent, nil, ""
	}}
	return newBubbleWriter(t, f, Config{BatchSize: 1, MaxInFlight: 1, Queue: queue.Config{MaxBytes: 25}}), f, release
}

func closeOK(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestBatchesBySize(t *testing.T) {
	f := &fakeInflux{}
	w := newTestWriter(t, f, Config{Token: "user:pw", Gzip: GzipOn, BatchSize: 100, BatchTimeout: time.Hour})
	all := lines(0, 250)
	for rest := queue.Scan(all); rest.Len() > 0; { // blocks of 30 lines cross batch boundaries
		var block queue.Lines
		block, rest = rest.Cut(min(30, rest.Len()))
		w.AppendLines(block, true)
	}
	closeOK(t, w)

	var sizes []int
	for _, r := range f.requests() {
		sizes = append(sizes, len(r.lines))
		if !r.gzip || r.auth != "Token user:pw" || r.bucket != "db/rp" {
			t.Errorf("request gzip=%v auth=%q bucket=%q, want gzip, the token, db/rp", r.gzip, r.auth, r.bucket)
		}
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{50, 100, 100}) {
		t.Errorf("batch sizes %v, want [50 100 100]", sizes)
	}
	got, want := f.storedLines(), strings.Split(strings.TrimSuffix(string(all), "\n"), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("stored %d lines, want the %d appended, each once", len(got), len(want))
	}
	st := w.Stats()
	if st.PointsWritten != 250 || st.BatchesWritten != 3 || st.QueuedBatches != 0 || st.QueuedBytes != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestBatchesByTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeInflux{}
		w := newBubbleWriter(t, f, Config{BatchSize: 1000, BatchTimeout: time.Second})
		start := time.Now()
		w.Append(lines(0, 3), true)
		advance(500 * time.Millisecond)
		w.Append(lines(3, 2), true) // joins the batch; does not restart its clock
		advance(499 * time.Millisecond)
		synctest.Wait()
		if n := len(f.requests()); n != 0 {
			t.Fatalf("%d requests before the batch timeout", n)
		}
		if st := w.Stats(); st.QueuedBatches != 1 || st.OldestQueuedAge != 999*time.Millisecond {
			t.Errorf("queued %d batches, oldest %s; want 1, 999ms", st.QueuedBatches, st.OldestQueuedAge)
		}
		advance(time.Millisecond)
		synctest.Wait()
		reqs := f.requests()
		if len(reqs) != 1 || len(reqs[0].lines) != 5 || reqs[0].at.Sub(start) != time.Second {
			t.Fatalf("want one request of 5 lines at 1s, got %d requests", len(reqs))
		}

		advance(500 * time.Millisecond)
		w.Append(lines(5, 1), true)
		advance(time.Second)
		synctest.Wait()
		reqs = f.requests()
		if len(reqs) != 2 || reqs[1].at.Sub(start) != 2500*time.Millisecond {
			t.Fatalf("second batch: %d requests, want 2 with the second at 2.5s", len(reqs))
		}
		closeOK(t, w)
		if n := len(f.requests()); n != 2 {
			t.Errorf("Close sent %d more requests with nothing queued", n-2)
		}
	})
}

func TestRetryAfterHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			switch n {
			case 1:
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"7"}}, ""
			case 2:
				when := time.Now().Add(12 * time.Second).UTC().Format(http.TimeFormat)
				return http.StatusServiceUnavailable, http.Header{"Retry-After": {when}}, ""
			}
			return http.StatusNoContent, nil, ""
		}}
		w := newBubbleWriter(t, f, Config{BatchSize: 2})
		w.Append(lines(0, 2), true)
		closeOK(t, w)

		reqs := f.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d requests, want 3", len(reqs))
		}
		if d := reqs[1].at.Sub(reqs[0].at); d != 7*time.Second {
			t.Errorf("retry after a 429 with Retry-After: 7 came after %s", d)
		}
		if d := reqs[2].at.Sub(reqs[1].at); d != 12*time.Second {
			t.Errorf("retry after a 503 with a Retry-After date 12s ahead came after %s", d)
		}
		st := w.Stats()
		if st.WriteErrors["429"] != 1 || st.WriteErrors["5xx"] != 1 || st.Retries != 2 || st.PointsWritten != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestServerErrorsRetriedAndDeliveredOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			if n <= 3 {
				h, b := v1Error("timeout")
				return http.StatusInternalServerError, h, b
			}
			return http.StatusNoContent, nil, ""
		}}
		w := newBubbleWriter(t, f, Config{BatchSize: 10, MaxRetryBackoff: 3 * time.Second})
		w.Append(lines(0, 10), true)
		closeOK(t, w)

		reqs := f.requests()
		if len(reqs) != 4 {
			t.Fatalf("%d requests, want 4", len(reqs))
		}
		// 1s, 2s, then 4s capped at 3s, each minus up to a quarter of jitter.
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
			d := reqs[i+1].at.Sub(reqs[i].at)
			if d > want || d < want*3/4 {
				t.Errorf("wait before retry %d: %s, want between %s and %s", i+1, d, want*3/4, want)
			}
		}
		if got := f.storedLines(); len(got) != 10 {
			t.Errorf("stored %d lines, want 10 (once)", len(got))
		}
		st := w.Stats()
		if st.PointsWritten != 10 || st.BatchesWritten != 1 || st.WriteErrors["5xx"] != 3 || st.Retries != 3 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestNetworkErrorsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeInflux{t: t}
		fails := 2
		var calls []time.Time
		cfg := Config{URL: "http://influx.test:8086", Gzip: GzipOff, BatchSize: 1, transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls = append(calls, time.Now())
			if fails > 0 {
				fails--
				r.Body.Close()
				return nil, errors.New("connection refused")
			}
			return handlerTransport{f}.RoundTrip(r)
		})}
		var took []error
		cfg.OnBatch = func(points int, _ time.Duration, err error) { took = append(took, err) }
		w, err := NewWriter(cfg, Target{Bucket: "db"})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(lines(0, 1), true)
		closeOK(t, w)
		if len(calls) != 3 || len(f.storedLines()) != 1 {
			t.Fatalf("%d attempts, %d stored; want 3, 1", len(calls), len(f.storedLines()))
		}
		if st := w.Stats(); st.WriteErrors["network"] != 2 || st.PointsWritten != 1 {
			t.Errorf("stats %+v", st)
		}
		if len(took) != 3 || took[0] == nil || took[2] != nil {
			t.Errorf("OnBatch saw %v, want two errors then success", took)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPartialWriteCountedNotResent(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		reason     string
		dropped    uint64
	}{
		{"1.x field type conflict", `{"error":"partial write: field type conflict: input field \"value\" on measurement \"m\" is type float, already exists as type integer dropped=2"}`,
			400, "field type conflict", 2},
		{"1.x unparsable lines", `{"error":"partial write: unable to parse 'bad line': invalid field format\nunable to parse 'worse': invalid field format dropped=0"}`,
			400, "unable to parse", 2},
		{"1.x invalid field name", `{"error":"partial write: invalid field name: input field \"time\" on measurement \"m\" is invalid dropped=1"}`,
			400, "invalid field name", 1},
		{"2.x", `{"code":"unprocessable entity","message":"failure writing points to database: partial write: field type conflict: input field \"value\" on measurement \"m\" is type float, already exists as type integer dropped=1"}`,
			422, "field type conflict", 1},
		{"3.x", `{"error":"partial write of line protocol occurred","data":[{"original_line":"m value=1i","line_number":2,"error_message":"invalid column type for column 'value', expected iox::column_type::field::float, got iox::column_type::field::integer"}]}`,
			400, "field type conflict", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := observed()
			f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
				return tc.status, http.Header{"Content-Type": {"application/json"}}, tc.body
			}}
			w := newTestWriter(t, f, Config{BatchSize: 10, Logger: log})
			w.Append(lines(0, 10), true)
			closeOK(t, w)
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1 (a partial write is not resent)", n)
			}
			st := w.Stats()
			if st.PointsDropped[tc.reason] != tc.dropped || st.PointsWritten != 10-tc.dropped || st.BatchesWritten != 1 {
				t.Errorf("stats %+v, want %d dropped for %q", st, tc.dropped, tc.reason)
			}
			if e := logs.FilterMessageSnippet("refused the rest").All(); len(e) != 1 || e[0].ContextMap()["reason"] != tc.reason {
				t.Errorf("log: %v", e)
			}
		})
	}
}

func TestWholeBatchRefusedIsBisected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Like InfluxDB 2.x: one unparsable line refuses the whole request.
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			for _, l := range r.lines {
				if strings.HasPrefix(l, "bad") {
					return http.StatusBadRequest, nil, fmt.Sprintf(`{"code":"invalid","message":"unable to parse '%s': missing fields"}`, l)
				}
			}
			return http.StatusNoContent, nil, ""
		}}
		log, logs := observed()
		w := newBubbleWriter(t, f, Config{BatchSize: 20, Logger: log})
		good := strings.Split(strings.TrimSuffix(string(lines(0, 18)), "\n"), "\n")
		block := strings.Join(good[:5], "\n") + "\nbad one\n" + strings.Join(good[5:13], "\n") + "\nbad two\n" + strings.Join(good[13:], "\n") + "\n"
		w.Append([]byte(block), true)
		closeOK(t, w)

		stored := f.storedLines()
		slices.Sort(stored)
		slices.Sort(good)
		if !slices.Equal(stored, good) {
			t.Errorf("stored %d lines, want the 18 good ones once each", len(stored))
		}
		st := w.Stats()
		if st.PointsDropped["unable to parse"] != 2 || st.PointsWritten != 18 {
			t.Errorf("stats %+v", st)
		}
		if n := len(f.requests()); n > 1+2*2*5 {
			t.Errorf("%d requests for 20 lines with 2 bad ones", n)
		}
		var shown []string
		for _, e := range logs.FilterMessage("InfluxDB refused a line").All() {
			shown = append(shown, e.ContextMap()["line"].(string))
		}
		if !slices.Equal(shown, []string{"bad one", "bad two"}) {
			t.Errorf("logged refused lines %q", shown)
		}
	})
}

func TestRefusedLinesLogRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			return http.StatusBadRequest, nil, `{"code":"invalid","message":"unable to parse"}`
		}}
		log, logs := observed()
		w := newBubbleWriter(t, f, Config{BatchSize: 50, Logger: log})
		w.Append(lines(0, 50), true)
		closeOK(t, w)
		if st := w.Stats(); st.PointsDropped["unable to parse"] != 50 {
			t.Errorf("dropped %v, want 50", st.PointsDropped)
		}
		if n := logs.FilterMessage("InfluxDB refused a line").Len(); n != 3 {
			t.Errorf("%d log entries for 50 refused lines within a second, want 3", n)
		}
	})
}

func TestAppendBlocksWhenQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _, release := heldWriter(t)
		line := []byte("m value=1\n")
		w.Append(line, true) // in flight, held by the server
		w.Append(line, true) // queued: 20 of 25 bytes
		synctest.Wait()
		if st := w.Stats(); st.QueuedBytes != 20 || st.QueuedBatches != 2 {
			t.Fatalf("queue %d bytes in %d batches, want 20 in 2", st.QueuedBytes, st.QueuedBatches)
		}

		appended := make(chan struct{})
		go func() {
			w.Append(line, true) // 30 > 25: must wait
			close(appended)
		}()
		synctest.Wait()
		select {
		case <-appended:
			t.Fatal("Append returned while the queue was full")
		default:
		}

		release <- struct{}{} // first batch delivered: 10 bytes free
		synctest.Wait()
		select {
		case <-appended:
		default:
			t.Fatal("Append still blocked after a batch was delivered")
		}
		close(release)
		closeOK(t, w)
		if st := w.Stats(); st.PointsWritten != 3 {
			t.Errorf("written %d, want 3", st.PointsWritten)
		}
	})
}

func TestCloseFlushesPartialBatch(t *testing.T) {
	f := &fakeInflux{}
	w := newTestWriter(t, f, Config{BatchSize: 100, BatchTimeout: time.Hour})
	w.Append(lines(0, 5), true)
	w.Append(lines(5, 2), true)
	closeOK(t, w)
	reqs := f.requests()
	if len(reqs) != 1 || len(reqs[0].lines) != 7 {
		t.Fatalf("want one request of 7 lines, got %d requests", len(reqs))
	}
	// Appending after Close loses the lines, visibly.
	w.Append(lines(7, 3), true)
	if st := w.Stats(); st.PointsDropped["writer closed"] != 3 || st.PointsWritten != 7 {
		t.Errorf("stats %+v", st)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseGivesUpAndCountsUndelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			h, b := v1Error("engine: cache maximum memory size exceeded")
			return http.StatusServiceUnavailable, h, b
		}}
		w := newBubbleWriter(t, f, Config{BatchSize: 5})
		w.Append(lines(0, 7), true) // a full batch of 5 and a partial one of 2
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := w.Close(ctx)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "7 points (2 batches)") {
			t.Fatalf("Close: %v; want 7 points in 2 batches not delivered", err)
		}
		if st := w.Stats(); st.PointsWritten != 0 || st.Retries == 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestCloseWithExpiredContextCancelsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := make(chan struct{}) // never closed: InfluxDB never answers
		cfg := Config{URL: "http://influx.test:8086", Gzip: GzipOff, BatchSize: 4, MaxInFlight: 1,
			transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				r.Body.Close()
				select {
				case <-r.Context().Done():
					return nil, r.Context().Err()
				case <-hang:
					return nil, errors.New("unreachable")
				}
			})}
		w, err := NewWriter(cfg, Target{Bucket: "db"})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(lines(0, 10), true) // 4 in flight, 4 queued, 2 being filled
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err = w.Close(ctx)
		if err == nil || !strings.Contains(err.Error(), "10 points (3 batches)") || !errors.Is(err, context.Canceled) {
			t.Fatalf("Close: %v; want 10 points in 3 batches not delivered", err)
		}
	})
}

func TestNewWriterRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		t    Target
		want string
	}{
		{Config{URL: "ftp://x"}, Target{Bucket: "b"}, `url "ftp://x": must start with http:// or https://`},
		{Config{URL: "http://u:hunter2@x"}, Target{Bucket: "b"}, ``},
		{Config{URL: "https://u:hunter2@"}, Target{Bucket: "b"}, `url "https://u:xxxxx@": has no host`},
		{Config{URL: "http://x", BatchSize: -1}, Target{Bucket: "b"}, `batch-size -1: must not be negative`},
		{Config{URL: "http://x", BatchTimeout: -time.Second}, Target{Bucket: "b"}, `batch-timeout "-1s": must not be negative`},
		{Config{URL: "http://x"}, Target{}, `target bucket is empty`},
		{Config{URL: "http://x"}, Target{Bucket: "/rp"}, `bucket "/rp": empty database name`},
	} {
		w, err := NewWriter(tc.cfg, tc.t)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.cfg, err)
			} else {
				w.Close(context.Background())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWriter(%q, %q): %v; want %q", tc.cfg.URL, tc.t.Bucket, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestTokenNeverLogged(t *testing.T) {
	const token = "s3cr3t-t0ken-value"
	synctest.Test(t, func(t *testing.T) {
		answers := []struct {
			status int
			body   string
		}{
			{401, `{"error":"authorization failed"}`},
			{403, `{"error":"\"bob\" user is not authorized to write to database \"db\""}`},
			{404, `{"error":"database not found: \"db\""}`},
			{500, `{"error":"timeout"}`},
			{400, `{"error":"partial write: field type conflict: x dropped=1"}`},
		}
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			if n <= len(answers) {
				return answers[n-1].status, nil, answers[n-1].body
			}
			return http.StatusBadRequest, nil, `{"code":"invalid","message":"unable to parse"}`
		}}
		log, logs := observed()
		w := newBubbleWriter(t, f, Config{Token: token, BatchSize: 2, Logger: log})
		w.Append(lines(0, 2), true)
		w.Append(lines(2, 2), true)
		closeOK(t, w)
		if a := f.requests()[0].auth; a != "Token "+token {
			t.Fatalf("the token was not sent: %q", a)
		}
		if logs.FilterMessageSnippet("credentials").Len() == 0 || logs.FilterMessageSnippet("database not found").Len() == 0 {
			t.Errorf("401 and 404 were not explained in the log")
		}
		for _, e := range logs.All() {
			if s := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(s, token) {
				t.Errorf("log entry shows the token: %s", s)
			}
		}

		// Close's error and Check's error must not show it either.
		w2 := newBubbleWriter(t, &fakeInflux{respond: func(*request, int) (int, http.Header, string) {
			return 401, nil, `{"error":"authorization failed"}`
		}}, Config{Token: token, Logger: log})
		w2.Append(lines(0, 1), true)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w2.Close(ctx); err == nil || strings.Contains(err.Error(), token) {
			t.Errorf("Close: %v", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Influxdb-Version", "1.8.10")
			w.WriteHeader(204)
		})
		mux.HandleFunc("/query", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"authorization failed"}`)
		})
		_, err := Check(context.Background(), Config{URL: "http://influx.test", Token: token, transport: handlerTransport{mux}}, Target{Bucket: "db"}, false)
		if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "401 authorization failed") {
			t.Errorf("Check: %v", err)
		}
	})
}

// A refused line of several fields (a wide point: a process's report of
// one Spark source) is sent again a field a point, so that only the field
// the server will not take is lost: InfluxDB 3 refusing a new column past
// its table's limit, or a field of another type, must not take the
// source's other metrics with it.
func TestRefusedWidePointKeepsItsOtherFields(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(line int, l string) string
	}{
		{"the line named (InfluxDB 3.0–3.4.1)", func(line int, l string) string {
			return fmt.Sprintf(`{"error":"parsing failed for write_lp endpoint","data":{"original_line":%q,"line_number":%d,"error_message":"invalid column type for column 'bad', expected iox::column_type::field::float, got iox::column_type::field::integer"}}`, l, line)
		}},
		{"the request refused whole (InfluxDB 2.x, 3.4.2+)", func(int, string) string {
			return `{"code":"invalid","message":"write buffer error: line protocol parse failed: column limit reached"}`
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
					for i, l := range r.lines {
						if strings.Contains(l, "bad=") {
							return http.StatusBadRequest, nil, c.answer(i+1, l)
						}
					}
					return http.StatusNoContent, nil, ""
				}}
				log, _ := observed()
				w := newBubbleWriter(t, f, Config{BatchSize: 20, Logger: log})
				block := "jvm,applicationid=app-1,process=3 heap.used=9 1795300000000000000\n" +
					"executor,applicationid=app-1,process=3 cpuTime.count=5,bad=1i,runTime.count=7,x\\ y=\"a,b c\" 1795300000000000000\n"
				w.Append([]byte(block), true)
				closeOK(t, w)
				stored := f.storedLines()
				slices.Sort(stored)
				want := []string{
					"executor,applicationid=app-1,process=3 cpuTime.count=5 1795300000000000000",
					"executor,applicationid=app-1,process=3 runTime.count=7 1795300000000000000",
					"executor,applicationid=app-1,process=3 x\\ y=\"a,b c\" 1795300000000000000",
					"jvm,applicationid=app-1,process=3 heap.used=9 1795300000000000000",
				}
				if !slices.Equal(stored, want) {
					t.Errorf("stored\n%s\nwant\n%s", strings.Join(stored, "\n"), strings.Join(want, "\n"))
				}
				st := w.Stats()
				dropped := 0
				for _, n := range st.PointsDropped {
					dropped += int(n)
				}
				if dropped != 1 || st.PointsWritten != 4 {
					t.Errorf("stats %+v: want the one field refused and 4 points written", st)
				}
			})
		})
	}
}

// A batch is also cut by its bytes: points of many values (the wide
// schema's) make requests of about BatchBytes, not of BatchSize points;
// a line larger than BatchBytes goes alone.
func TestBatchesByBytes(t *testing.T) {
	f := &fakeInflux{}
	w := newTestWriter(t, f, Config{BatchSize: 1000, BatchBytes: 1000, BatchTimeout: time.Hour})
	var block []byte
	for i := range 30 {
		block = fmt.Appendf(block, "m,i=%02d %s 1\n", i, strings.Repeat("f=1,", 20)+"g=2") // 100 bytes
	}
	big := "m,i=big " + strings.Repeat("f=1,", 400) + "g=2 1\n"
	w.Append(block, true)
	w.Append([]byte(big), true)
	closeOK(t, w)
	var sizes []int
	for _, r := range f.requests() {
		n := 0
		for _, l := range r.lines {
			n += len(l) + 1
		}
		sizes = append(sizes, n)
		if n > 1000 && len(r.lines) > 1 {
			t.Errorf("a request of %d lines and %d bytes", len(r.lines), n)
		}
	}
	if len(sizes) != 4 || len(f.storedLines()) != 31 {
		t.Errorf("requests of %v bytes, %d lines stored: want 3 of 1000 and the large line alone", sizes, len(f.storedLines()))
	}
}

// A 413 for a small request is the server (or a proxy before it) refusing
// every request for now, not the request being too large: the points are
// kept and retried, none dropped. A large request it refuses is split
// until the halves fit.
func TestTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tooLarge := func() (int, http.Header, string) {
			h, b := v1Error("Request Entity Too Large")
			return http.StatusRequestEntityTooLarge, h, b
		}
		f := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			if n <= 25 { // a proxy's limit, set too low for 25 requests
				return tooLarge()
			}
			return http.StatusNoContent, nil, ""
		}}
		w := newBubbleWriter(t, f, Config{BatchSize: 10, MaxRetryBackoff: time.Second})
		w.Append(lines(0, 10), true)
		closeOK(t, w)
		if got, st := f.storedLines(), w.Stats(); len(got) != 10 || st.PointsDropped[DropTooLarge] != 0 {
			t.Errorf("stored %d lines, dropped %v; want 10 and none", len(got), st.PointsDropped)
		}

		big := &fakeInflux{respond: func(r *request, n int) (int, http.Header, string) {
			if size := len(strings.Join(r.lines, "\n")); size > 100<<10 { // above the floor, as real limits are
				return tooLarge()
			}
			return http.StatusNoContent, nil, ""
		}}
		w = newBubbleWriter(t, big, Config{BatchSize: 10000, BatchBytes: 1 << 20})
		w.Append(lines(0, 7000), true)
		closeOK(t, w)
		if got, st := big.storedLines(), w.Stats(); len(got) != 7000 || st.PointsDropped[DropTooLarge] != 0 || st.WriteErrors["4xx"] == 0 {
			t.Errorf("large batch: stored %d lines, dropped %v, errors %v; want 7000, none dropped, some 413", len(got), st.PointsDropped, st.WriteErrors)
		}
	})
}
