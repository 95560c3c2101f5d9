package influx

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// request is what the fake InfluxDB received.
type request struct {
	at     time.Time
	bucket string
	auth   string
	gzip   bool
	lines  []string
}

// fakeInflux is an InfluxDB write endpoint whose answers the test decides.
// It keeps every request and the lines it "stored".
type fakeInflux struct {
	t *testing.T
	// respond answers a request: status 2xx stores the lines. nil = 204.
	respond func(r *request, n int) (status int, header http.Header, body string)

	mu     sync.Mutex
	reqs   []*request
	stored []string
}

func (f *fakeInflux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	req := &request{at: time.Now(), bucket: r.URL.Query().Get("bucket"), auth: r.Header.Get("Authorization")}
	if r.Header.Get("Content-Encoding") == "gzip" {
		req.gzip = true
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			f.t.Errorf("fake influx: gzip: %v", err)
			http.Error(w, err.Error(), 500)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	if s := string(b); s != "" {
		if !strings.HasSuffix(s, "\n") {
			f.t.Errorf("fake influx: body does not end in a newline: %q", s)
		}
		req.lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	n := len(f.reqs)
	f.mu.Unlock()

	status, header, text := http.StatusNoContent, http.Header(nil), ""
	if f.respond != nil {
		status, header, text = f.respond(req, n)
	}
	if status/100 == 2 {
		f.mu.Lock()
		f.stored = append(f.stored, req.lines...)
		f.mu.Unlock()
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	if text != "" && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	io.WriteString(w, text)
}

func (f *fakeInflux) requests() []*request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*request(nil), f.reqs...)
}

func (f *fakeInflux) storedLines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stored...)
}

// handlerTransport serves requests in memory, so that synctest bubbles
// never wait on the network.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close() // ends the client's gzip goroutine if the handler did not read
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// v1Error is InfluxDB 1.x's error answer.
func v1Error(msg string) (http.Header, string) {
	h := http.Header{"X-Influxdb-Error": {msg}}
	b := fmt.Sprintf(`{"error":%q}`, msg)
	return h, b
}

// lines returns n distinct line protocol lines, each ending in '\n'.
func lines(from, n int) []byte {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "m,host=h%d value=%d %d\n", i%7, i, 1_700_000_000_000_000_000+int64(i))
	}
	return []byte(b.String())
}

// observed returns a logger that keeps every entry.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// advance moves a synctest bubble's fake clock forward.
func advance(d time.Duration) { <-time.After(d) }
