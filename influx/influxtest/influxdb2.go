package influxtest

// A real InfluxDB 2.x server (influxd 2.7) for integration tests, on a
// loopback port it picks (port 0; its log names the port it got, at level
// info) with its data in a temporary directory, onboarded by API
// (org "spark", bucket "spark", an operator token) and read back with
// InfluxQL through the 1.x compatibility API (/query).
//
// The binary is $INFLUXD2, else $(go env GOPATH)/bin/influxd2-<version>,
// which scripts/influxd2.sh builds from influxdata/influxdb's Go module (it
// cannot be go installed). When it is missing or does not start, the test is
// skipped with that command, except in CI (CI set), where it fails.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Influxd2Version is the InfluxDB 2.x release these tests are written
// against, and the one scripts/influxd2.sh builds.
const Influxd2Version = "v2.7.12"

// InstallCommand2 builds the influxd 2.x these tests are written against
// (run from the repository's root).
const InstallCommand2 = "scripts/influxd2.sh"

// What Start2 sets up on a new server.
const (
	Org2      = "spark"
	Bucket2   = "spark"
	User2     = "sparkpulse"
	Password2 = "sparkpulse-test" // 2.x wants 8 characters or more
	Token2    = "sparkpulse-test-token"
)

// Server2 is a running influxd 2.x, onboarded.
type Server2 struct {
	process
	Version string // as /health reports it, e.g. "v2.7.12"

	Org, Bucket, User, Token string // the operator's; Token may do anything
	OrgID, BucketID, UserID  string
}

// Start2 runs influxd 2.x until the end of the test, waits until /health
// passes and onboards it (POST /api/v2/setup). On failure its log is
// printed. Of the options, WithEnv applies.
func Start2(tb testing.TB, opts ...Option) *Server2 {
	tb.Helper()
	return start(tb, "influxd 2.x", InstallCommand2, func(dir string) (*Server2, error) { return Launch2(dir, opts...) })
}

// Launch2 is Start2 for programs: influxd 2.x with its data under dir, on a
// loopback port it picks, onboarded. The caller stops it with Stop.
func Launch2(dir string, opts ...Option) (*Server2, error) {
	o, bin, err := prepare(dir, opts, func() (string, error) { return findBinary("INFLUXD2", Binary2Path()) })
	if err != nil {
		return nil, err
	}
	if o.tls || len(o.extra) > 0 {
		return nil, fmt.Errorf("influxtest: WithTLS, WithConfig and WithGraphite are for influxd 1.x")
	}
	return start2(dir, bin, o)
}

// Binary2Path is where scripts/influxd2.sh puts influxd 2.x:
// $(go env GOPATH)/bin/influxd2-<version>.
func Binary2Path() string {
	return filepath.Join(gopathFirst(), "bin", "influxd2-"+Influxd2Version)
}

func start2(dir, bin string, o options) (*Server2, error) {
	s := &Server2{}
	s.process = process{
		Dir:       dir,
		scheme:    "http",
		listening: http2Listening,
		// /health passes once influxd serves HTTP (it opens its listener
		// last, after the storage engine).
		probe: "/health",
		ready: func(r *http.Response) bool {
			var h struct{ Status, Version string }
			if r.StatusCode != http.StatusOK || json.NewDecoder(r.Body).Decode(&h) != nil || h.Status != "pass" {
				return false
			}
			s.Version = h.Version
			return true
		},
		log:    &Output{},
		client: &http.Client{Timeout: 30 * time.Second},
	}
	s.command = func(httpAddr string) (*exec.Cmd, error) {
		cmd := exec.Command(bin,
			"--http-bind-address="+httpAddr,
			"--bolt-path="+filepath.Join(dir, "influxd.bolt"),
			"--sqlite-path="+filepath.Join(dir, "influxd.sqlite"), // its default is under $HOME
			"--engine-path="+filepath.Join(dir, "engine"),
			"--reporting-disabled",
			"--log-level=info", // at which it logs the port it bound
		)
		cmd.Dir = dir // influxd reads a config.* file from its working directory
		// Only the flags above and the test's own INFLUXD_ variables: a
		// developer's INFLUXD_CONFIG_PATH or the like must not leak in.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "INFLUXD_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, o.env...)
		return cmd, nil
	}
	if err := s.launch("127.0.0.1:0"); err != nil {
		return nil, err
	}
	if err := s.setup(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s: onboarding: %v\n%s", bin, err, s.log.String())
	}
	return s, nil
}

// setup onboards the new server: the first user, org "spark", bucket
// "spark" (infinite retention) and the operator token, as the influx CLI's
// "influx setup" and the Docker image's DOCKER_INFLUXDB_INIT_* do.
func (s *Server2) setup() error {
	req := map[string]any{
		"username": User2, "password": Password2, "org": Org2, "bucket": Bucket2,
		"token": Token2, "retentionPeriodSeconds": 0,
	}
	var resp struct {
		User   struct{ ID string }
		Org    struct{ ID string }
		Bucket struct{ ID string }
		Auth   struct{ Token string }
	}
	if err := s.api(http.MethodPost, "/api/v2/setup", "", req, &resp); err != nil {
		return err
	}
	if resp.Auth.Token != Token2 || resp.Bucket.ID == "" || resp.Org.ID == "" {
		return fmt.Errorf("setup answered %+v", resp)
	}
	s.Org, s.Bucket, s.User, s.Token = Org2, Bucket2, User2, Token2
	s.token = s.Token // InfluxQL through the 1.x compatibility API, and writes
	s.OrgID, s.BucketID, s.UserID = resp.Org.ID, resp.Bucket.ID, resp.User.ID
	return nil
}

// InfluxQLVia is a *Server that is no process, for code that takes one to
// run InfluxQL (grafanatest): its Query and TryQuery go to url's /query
// through rt, e.g. one that adds a token, or that asks two servers and
// compares their answers. Kill, Restart and PID are not for it; Stop does
// nothing.
func InfluxQLVia(url string, rt http.RoundTripper) *Server {
	exited := make(chan struct{})
	close(exited)
	return &Server{process: process{URL: url, HTTPAddr: strings.TrimPrefix(url, "http://"), log: &Output{}, exited: exited,
		client: &http.Client{Timeout: 30 * time.Second, Transport: rt}}}
}

// tokenTransport authenticates every request with a 2.x token, as Grafana's
// InfluxQL data source does for 2.x (Authorization: Token …).
type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Token "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// APIError is a 2.x API answer that is not 2xx.
type APIError struct {
	Status int
	Code   string // "not found", "unauthorized", …
	Body   string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Body) }

// API sends a JSON request to the 2.x API with the operator token and
// decodes the answer into out (unless nil). An answer that is not 2xx
// fails the test.
func (s *Server2) API(tb testing.TB, method, path string, in, out any) {
	tb.Helper()
	if err := s.api(method, path, s.Token, in, out); err != nil {
		tb.Fatalf("influxtest: %s %s: %v", method, path, err)
	}
}

// TryAPI is API with another token ("" for none), returning the error (an
// *APIError for an answer that is not 2xx) instead of failing the test.
func (s *Server2) TryAPI(token, method, path string, in, out any) error {
	return s.api(method, path, token, in, out)
}

func (s *Server2) api(method, path, token string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Code string }
		_ = json.Unmarshal(b, &e)
		return &APIError{Status: resp.StatusCode, Code: e.Code, Body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: %v", b, err)
		}
	}
	return nil
}

// CreateBucket creates a bucket in the server's org that keeps data for
// retention (0: forever; 2.x's shortest is 1h) and returns its ID.
func (s *Server2) CreateBucket(tb testing.TB, name string, retention time.Duration) string {
	tb.Helper()
	rules := []map[string]any{}
	if retention > 0 {
		rules = append(rules, map[string]any{"type": "expire", "everySeconds": int64(retention / time.Second)})
	}
	var b struct{ ID string }
	s.API(tb, http.MethodPost, "/api/v2/buckets", map[string]any{"orgID": s.OrgID, "name": name, "retentionRules": rules}, &b)
	return b.ID
}

// CreateDBRP maps InfluxQL's database db and retention policy rp to a
// bucket (POST /api/v2/dbrps, as "influx v1 dbrp create" does) and returns
// the mapping's ID.
func (s *Server2) CreateDBRP(tb testing.TB, db, rp, bucketID string, isDefault bool) string {
	tb.Helper()
	var m struct{ ID string }
	s.API(tb, http.MethodPost, "/api/v2/dbrps", map[string]any{
		"orgID": s.OrgID, "bucketID": bucketID, "database": db, "retention_policy": rp, "default": isDefault,
	}, &m)
	if m.ID == "" {
		tb.Fatalf("influxtest: POST /api/v2/dbrps answered no ID")
	}
	return m.ID
}

// CreateToken creates a token in the server's org allowed actions ("read",
// "write") on all its buckets and returns it.
func (s *Server2) CreateToken(tb testing.TB, actions ...string) string {
	tb.Helper()
	var perms []map[string]any
	for _, a := range actions {
		perms = append(perms, map[string]any{"action": a, "resource": map[string]any{"type": "buckets", "orgID": s.OrgID}})
	}
	var auth struct{ Token string }
	s.API(tb, http.MethodPost, "/api/v2/authorizations", map[string]any{"orgID": s.OrgID, "permissions": perms}, &auth)
	return auth.Token
}

// InfluxQL is a *Server for code that takes one to run InfluxQL, such as
// grafanatest: its Query and TryQuery go to this server's /query with the
// token (see InfluxQLVia).
func (s *Server2) InfluxQL() *Server { return InfluxQLVia(s.URL, s.TokenTransport()) }

// TokenTransport is an http.RoundTripper that authenticates every request
// with the operator token, as Grafana's InfluxQL data source does for 2.x.
func (s *Server2) TokenTransport() http.RoundTripper { return tokenTransport{token: s.Token} }
