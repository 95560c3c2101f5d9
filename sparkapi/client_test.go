package sparkapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serve runs h on 127.0.0.1 for the test and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// wantKind fails t unless err is an *Error of kind.
func wantKind(t *testing.T, err error, kind string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Fatalf("error %v, want kind %s", err, kind)
	}
	return e
}

// A list is decoded into the package's types, with the request's
// credentials and Accept header, and counted.
func TestClientGet(t *testing.T) {
	const body = `[{"id":"app-1","name":"one","attempts":[]},{"id":"app-2","name":"two","attempts":[]}]`
	var headers []http.Header
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers = append(headers, r.Header.Clone())
		fmt.Fprint(w, body)
	}))
	for _, tc := range []struct {
		auth Auth
		want string
	}{
		{Auth{}, ""},
		{Auth{Token: "t0ken"}, "Bearer t0ken"},
		{Auth{Username: "spark", Password: "s3cret-pw"}, "Basic c3Bhcms6czNjcmV0LXB3"},
	} {
		c := NewClient(ClientConfig{Auth: tc.auth, Now: func() time.Time { return now }})
		apps := []Application{{ID: "left over"}}
		bad, err := c.Get(context.Background(), src+"/api/v1/applications", &apps)
		if err != nil || len(bad) != 0 {
			t.Fatalf("%v: %v, invalid %q", tc.auth, err, bad)
		}
		if len(apps) != 2 || apps[0].ID != "app-1" || apps[1].Name != "two" {
			t.Errorf("decoded %+v", apps)
		}
		h := headers[len(headers)-1]
		if h.Get("Authorization") != tc.want || h.Get("Accept") != "application/json" {
			t.Errorf("%v: headers %v, want Authorization %q", tc.auth, h, tc.want)
		}
		if c.Requests() != 1 || c.Bytes() != uint64(len(body)) {
			t.Errorf("%d requests, %d bytes; want 1, %d", c.Requests(), c.Bytes(), len(body))
		}
		if strings.Contains(tc.auth.String(), "s3cret") || strings.Contains(tc.auth.String(), "t0ken") {
			t.Errorf("Auth.String shows the secret: %s", tc.auth)
		}
	}
}

// A redirect is not followed: the credentials and the request stay with
// the source as configured, and the answer is a failed request.
func TestClientNoRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte(`{"secret":"credentials of another service"}`))
	}))
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/credentials", http.StatusFound)
	}))
	c := NewClient(ClientConfig{Auth: Auth{Token: "t0ken"}})
	var app Application
	_, err := c.Get(context.Background(), src+"/api/v1/applications/app-1", &app)
	if e := wantKind(t, err, KindStatus); e.Status != http.StatusFound {
		t.Errorf("status %d, want 302", e.Status)
	}
	if elsewhere.Load() != 0 {
		t.Error("the redirect was followed")
	}
}

// An answer larger than MaxResponseBytes is a decode error, read no
// further than the bound.
func TestClientResponseLimit(t *testing.T) {
	const huge, limit = 10 << 20, 1 << 20
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("["))
		item := []byte(`{"id":"` + strings.Repeat("x", 1000) + `","attempts":[]},`)
		for n := 0; n < huge; n += len(item) {
			if _, err := w.Write(item); err != nil {
				return
			}
		}
		w.Write([]byte(`{"id":"x","attempts":[]}]`))
	}))
	c := NewClient(ClientConfig{MaxResponseBytes: limit})
	var apps []Application
	_, err := c.Get(context.Background(), src+"/api/v1/applications", &apps)
	wantKind(t, err, KindDecode)
	if !strings.Contains(err.Error(), "larger than max-response-bytes (1048576)") || c.Bytes() > limit+1 {
		t.Errorf("%v, %d bytes read; want the bound named, at most %d bytes", err, c.Bytes(), limit+1)
	}
}

// What is not the JSON asked for is a decode error that quotes the start
// of the answer, made harmless for a log line.
func TestClientWrongContent(t *testing.T) {
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>\n<body>Application application_1_0001 has finished\x1b[31m; see the History Server</body></html>")
		case "/object":
			fmt.Fprint(w, `{"id":"app-1"}`)
		case "/truncated":
			fmt.Fprint(w, `[{"id":"app-1","attempts":[`)
		case "/starting":
			fmt.Fprint(w, "Spark is starting up. Please wait a while until it's ready.")
		}
	}))
	c := NewClient(ClientConfig{})
	for path, want := range map[string]string{
		"/html":      `body starts "<html> <body>Application application_1_0001 has finished [31m; see the History S…"`,
		"/object":    "want a JSON list",
		"/truncated": "unexpected EOF",
		"/starting":  `body starts "Spark is starting up.`,
	} {
		var apps []Application
		_, err := c.Get(context.Background(), src+path, &apps)
		wantKind(t, err, KindDecode)
		if IsStartingUp(err) != (path == "/starting") {
			t.Errorf("%s: IsStartingUp %v", path, IsStartingUp(err))
		}
		if !strings.Contains(err.Error(), want) || strings.ContainsAny(err.Error(), "\n\x1b") {
			t.Errorf("%s: %q, want it to hold %q", path, err, want)
		}
	}
	var app Application // a single value decodes as a whole
	if _, err := c.Get(context.Background(), src+"/object", &app); err != nil || app.ID != "app-1" {
		t.Errorf("object: %v, %+v", err, app)
	}
}

// An answer other than 200 is an http_status error with Spark's message;
// Spark's 404 is told apart.
func TestClientStatus(t *testing.T) {
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/applications/app-9":
			http.Error(w, "unknown app: app-9", http.StatusNotFound)
		default:
			http.Error(w, "java.lang.NullPointerException\n\tat org.apache.spark", http.StatusInternalServerError)
		}
	}))
	c := NewClient(ClientConfig{})
	var app Application
	_, err := c.Get(context.Background(), src+"/api/v1/applications/app-9", &app)
	if wantKind(t, err, KindStatus); !IsNotFound(err) || !strings.Contains(err.Error(), "404 Not Found: unknown app: app-9") {
		t.Errorf("%v: want Spark's 404", err)
	}
	_, err = c.Get(context.Background(), src+"/api/v1/applications/app-1", &app)
	if e := wantKind(t, err, KindStatus); e.Status != 500 || IsNotFound(err) ||
		!strings.HasSuffix(err.Error(), "500 Internal Server Error: java.lang.NullPointerException at org.apache.spark") {
		t.Errorf("%q", err)
	}
}

// No answer at all, or none within Timeout, is a network error.
func TestClientNetwork(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	gone := ts.URL
	ts.Close()
	c := NewClient(ClientConfig{Timeout: 100 * time.Millisecond})
	var app Application
	_, err := c.Get(context.Background(), gone+"/api/v1/applications/app-1", &app)
	wantKind(t, err, KindNetwork)

	slow := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers nothing until the client gives up
	}))
	_, err = c.Get(context.Background(), slow+"/api/v1/applications/app-1", &app)
	if wantKind(t, err, KindNetwork); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v: want the timeout", err)
	}
}

// Values no Spark writes are zeroed (Check) and named.
func TestClientInvalidValues(t *testing.T) {
	src := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"id":"driver","totalCores":1000000000},{"id":"1","totalCores":4}]`)
	}))
	c := NewClient(ClientConfig{Now: func() time.Time { return now }})
	var execs []Executor
	bad, err := c.Get(context.Background(), src+"/api/v1/applications/app-1/allexecutors", &execs)
	if err != nil || !slices.Equal(bad, []string{"totalCores 1000000000"}) {
		t.Fatalf("%v, invalid %q", err, bad)
	}
	if execs[0].TotalCores != 0 || execs[1].TotalCores != 4 {
		t.Errorf("executors %+v: want the impossible cores read as absent", execs)
	}
}

func TestSnippet(t *testing.T) {
	got := snippet([]byte("  <html>\n\t<body>\x1b[31mred\x00 \xff" + strings.Repeat("z", 200)))
	if strings.ContainsAny(got, "\n\t\x1b\x00\xff") || len(got) > 90 || !strings.HasPrefix(got, "<html> <body> [31mred ?zz") {
		t.Errorf("snippet %q", got)
	}
}
