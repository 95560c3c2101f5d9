package influx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeServer answers /ping with version (as a header, or as a 3.x JSON
// body when body is set) and the rest with mux.
func fakeServer(t *testing.T, version string, body bool, mux *http.ServeMux) string {
	t.Helper()
	if mux == nil {
		mux = http.NewServeMux()
	}
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		if body {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"version":%q,"revision":"abc"}`, version)
			return
		}
		if version != "" {
			w.Header().Set("X-Influxdb-Version", version)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCheck2x(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v2/buckets", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Header.Get("Authorization") != "Token tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			fmt.Fprint(w, `{"code":"unauthorized","message":"unauthorized access"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		// As a real 2.7.12 answers: 404 for an organization or a bucket
		// that does not exist (scripts/influxd2.sh, TestCheckRealInfluxDB2).
		switch {
		case q.Get("org") != "acme":
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"code":"not found","message":"organization name \"%s\" not found"}`, q.Get("org"))
		case q.Get("name") != "spark":
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"code":"not found","message":"bucket \"%s\" not found"}`, q.Get("name"))
		default:
			fmt.Fprint(w, `{"buckets":[{"id":"1","name":"spark","orgID":"2","retentionRules":[]}]}`)
		}
	})
	// InfluxQL through /query: 2.4+ maps every bucket to a database of its
	// name; here, as on 2.0–2.3, there is none until dbrp is set.
	dbrp := false
	mux.HandleFunc("/query", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		names := `[["_monitoring"]]`
		if dbrp {
			names = `[["_monitoring"],["spark"]]`
		}
		fmt.Fprintf(w, `{"results":[{"statement_id":0,"series":[{"name":"databases","columns":["name"],"values":%s}]}]}`, names)
	})
	url := fakeServer(t, "v2.7.11", false, mux)
	ctx := context.Background()

	res, err := Check(ctx, Config{URL: url, Org: "acme", Token: "tok"}, Target{Bucket: "spark"}, true)
	if err != nil || res.Major != 2 || res.String() != "InfluxDB v2.7.11" {
		t.Errorf("existing bucket: %v, %q", err, res)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], `influx v1 dbrp create --org "acme" --bucket-id 1 --db "spark" --rp autogen --default`) {
		t.Errorf("no DBRP mapping: warnings %q", res.Warnings)
	}
	dbrp = true
	if res, err = Check(ctx, Config{URL: url, Org: "acme", Token: "tok"}, Target{Bucket: "spark"}, true); err != nil || len(res.Warnings) != 0 {
		t.Errorf("with a DBRP mapping: %v, warnings %q", err, res.Warnings)
	}
	_, err = Check(ctx, Config{URL: url, Org: "acme", Token: "tok"}, Target{Bucket: "spark", Org: "other"}, true)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), `organization "other" does not exist on InfluxDB v2.7.11 at `+url) {
		t.Errorf("bucket in an organization that does not exist: %v", err)
	}
	_, err = Check(ctx, Config{URL: url, Org: "acme", Token: "tok"}, Target{Bucket: "logs"}, true)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), `bucket "logs" does not exist in organization "acme" on InfluxDB v2.7.11 at `+url+`; create it (influx bucket create --name "logs" --org "acme")`) {
		t.Errorf("missing bucket: %v", err)
	}
	_, err = Check(ctx, Config{URL: url, Token: "tok"}, Target{Bucket: "spark"}, false)
	if err == nil || !strings.Contains(err.Error(), "needs an organization") {
		t.Errorf("no org: %v", err)
	}
	_, err = Check(ctx, Config{URL: url, Org: "acme", Token: "wrong"}, Target{Bucket: "spark"}, false)
	if err == nil || !strings.Contains(err.Error(), "unauthorized access") || errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad token: %v", err)
	}
}

// InfluxDB 3 Core's /ping (influxdb3_server/src/http.rs): a JSON body and
// the build in X-Influxdb-Build. Its query file limit is a warning.
func TestCheck3Core(t *testing.T) {
	for _, build := range []string{"Core", "Enterprise"} {
		mux := http.NewServeMux()
		mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Influxdb-Build", build)
			w.Header().Set("X-Influxdb-Version", "3.10.1")
			fmt.Fprintf(w, `{"product_name":"InfluxDB 3 %s","version":"3.10.1","revision":"abc","process_id":"x"}`, build)
		})
		srv := httptest.NewServer(mux)
		res, err := Check(context.Background(), Config{URL: srv.URL}, Target{Bucket: "spark"}, true)
		srv.Close()
		if err != nil || res.Major != 3 || res.Build != build || res.String() != "InfluxDB 3.10.1 "+build+"; bucket check skipped: InfluxDB 3.x creates a database on its first write" {
			t.Errorf("%s: %v, %q", build, err, res)
		}
		if core := build == "Core"; core != (len(res.Warnings) == 1 && strings.Contains(res.Warnings[0], "--query-file-limit")) {
			t.Errorf("%s: warnings %q", build, res.Warnings)
		}
	}
}

func TestCheck3xAndUnknownSkipped(t *testing.T) {
	for _, tc := range []struct {
		version string
		body    bool
		major   int
	}{
		{"3.0.1", true, 3},
		{"3.2.0", false, 3},
		{"", false, 0},
		{"9.9", false, 0},
	} {
		url := fakeServer(t, tc.version, tc.body, nil) // no /query: 404
		res, err := Check(context.Background(), Config{URL: url}, Target{Bucket: "spark"}, true)
		if err != nil || res.Major != tc.major || res.Version != tc.version || !strings.Contains(res.Note, "skipped") {
			t.Errorf("version %q: %v, %+v", tc.version, err, res)
		}
	}
}

func TestCheckUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	_, err = Check(context.Background(), Config{URL: closed}, Target{Bucket: "db"}, false)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), closed) {
		t.Errorf("closed port: %v", err)
	}

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no backend", http.StatusBadGateway)
	}))
	defer proxy.Close()
	if _, err := Check(context.Background(), Config{URL: proxy.URL}, Target{Bucket: "db"}, false); !errors.Is(err, ErrUnreachable) {
		t.Errorf("proxy without backend: %v", err)
	}

	notInflux := httptest.NewServer(http.NotFoundHandler())
	defer notInflux.Close()
	_, err = Check(context.Background(), Config{URL: notInflux.URL}, Target{Bucket: "db"}, false)
	if err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "404") {
		t.Errorf("not InfluxDB: %v", err)
	}

	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	_, err = Check(context.Background(), Config{URL: tlsSrv.URL}, Target{Bucket: "db"}, false)
	if err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

func TestVersionMajor(t *testing.T) {
	for v, want := range map[string]int{
		"1.8.10": 1, "v1.11.8": 1, "v2.7.11": 2, "2.x": 2, "3.0.1": 3, "3": 3,
		"unknown": 0, "": 0, "dev": 0, "10.1": 0, "v": 0,
	} {
		if got := versionMajor(v); got != want {
			t.Errorf("versionMajor(%q) = %d, want %d", v, got, want)
		}
	}
}

// Auto compression: plain to the same machine or a LAN, gzip beyond.
func TestGzipAuto(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:8086":         false,
		"http://localhost:8086":         false,
		"http://[::1]:8086":             false,
		"http://10.1.2.3:8086":          false,
		"https://192.168.0.7":           false,
		"http://172.20.0.5:8086":        false,
		"http://[fd00::5]:8086":         false,
		"https://34.120.0.1":            true,
		"https://[2001:4860::8888]:443": true,
	} {
		if got := GzipAuto.Enabled(url); got != want {
			t.Errorf("auto for %s: %v, want %v", url, got, want)
		}
	}
	if !GzipOn.Enabled("http://127.0.0.1") || GzipOff.Enabled("https://34.120.0.1") {
		t.Error("on and off are not what they say")
	}
	for v, want := range map[any]Gzip{true: GzipOn, false: GzipOff, "auto": GzipAuto, nil: GzipAuto} {
		if got, err := ParseGzip(v); got != want || err != nil {
			t.Errorf("ParseGzip(%v) = %q, %v", v, got, err)
		}
	}
	if _, err := ParseGzip("yes"); err == nil || !strings.Contains(err.Error(), `gzip yes: must be true, false or "auto"`) {
		t.Errorf("ParseGzip(yes): %v", err)
	}
}
