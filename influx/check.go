package influx

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/domain"
)

// ErrUnreachable is wrapped by Check's error when InfluxDB cannot be
// reached (connection refused, DNS, timeout, a proxy's 502/503/504).
var ErrUnreachable = errors.New("InfluxDB is unreachable")

// CheckResult describes the server Check talked to and what it did.
type CheckResult struct {
	Version string   // as the server reports it ("1.8.10", "v2.7.1", "unknown"); "" if it does not
	Major   int      // 1, 2 or 3; 0 when the version is not recognised
	Created []string // what Check created, e.g. `database "spark"`
	Note    string   // set when the check was skipped, and why; for the caller to log
}

// String is a one-line summary for a log entry.
func (r CheckResult) String() string {
	parts := []string{r.server()}
	if len(r.Created) > 0 {
		parts = append(parts, "created "+strings.Join(r.Created, ", "))
	}
	if r.Note != "" {
		parts = append(parts, r.Note)
	}
	return strings.Join(parts, "; ")
}

// server names the server in messages: "InfluxDB 1.8.10", or
// `InfluxDB 1.x (version "unknown")` for a build without a version.
func (r CheckResult) server() string {
	if r.Major > 0 && versionMajor(r.Version) == r.Major {
		return "InfluxDB " + r.Version
	}
	if r.Major > 0 {
		return fmt.Sprintf("InfluxDB %d.x (version %q)", r.Major, r.Version)
	}
	return fmt.Sprintf("InfluxDB (version %q)", r.Version)
}

// Check verifies at start-up that t can be written to. It reads the version
// from /ping, then on 1.x looks the database (and retention policy) up with
// InfluxQL and, with create, creates what is missing the way InfluxDB 1.x's
// graphite listener does; on 2.x it looks the bucket up in its
// organization; on 3.x it does nothing (3.x creates a database on its first
// write) and says so in Note. A server whose version is not recognised is
// checked as 1.x if it answers SHOW DATABASES, else skipped with a Note.
//
// An error wrapping ErrUnreachable means InfluxDB could not be reached; any
// other error means the target is missing or the configuration is wrong.
func Check(ctx context.Context, cfg Config, t Target, create bool) (CheckResult, error) {
	var res CheckResult
	cfg, err := cfg.withDefaults()
	if err != nil {
		return res, err
	}
	if t.Bucket == "" {
		return res, errors.New("influx: target bucket is empty")
	}
	c := &checker{cfg: cfg, url: RedactURL(cfg.URL), client: newClient(cfg)}
	defer c.client.Close()

	res.Version, err = c.ping(ctx)
	if err != nil {
		return res, err
	}
	res.Major = versionMajor(res.Version)
	switch res.Major {
	case 1:
		err = c.check1x(ctx, &res, t.Bucket, create)
	case 2:
		err = c.check2x(ctx, &res, t)
	case 3:
		res.Note = "bucket check skipped: InfluxDB 3.x creates a database on its first write"
	default:
		if _, perr := c.query(ctx, "", "SHOW DATABASES"); perr == nil {
			res.Major = 1 // a 1.x built without a version (go install) says "unknown"
			err = c.check1x(ctx, &res, t.Bucket, create)
		} else if qe := (*queryError)(nil); errors.As(perr, &qe) && (qe.status == 401 || qe.status == 403) {
			err = fmt.Errorf("influx: %s at %s refused the credentials for SHOW DATABASES (%d %s); check the token",
				res.server(), c.url, qe.status, qe.text)
		} else {
			res.Note = "bucket check skipped: the server's version is not recognised and it does not answer InfluxQL"
		}
	}
	return res, err
}

type checker struct {
	cfg    Config
	url    string // redacted
	client influxdb2.Client
}

// ping reads the server's version from GET /ping.
func (c *checker) ping(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.client.ServerURL(), "/")+"/ping", nil)
	if err != nil {
		return "", fmt.Errorf("influx: URL %q: %w", c.url, err)
	}
	resp, err := c.client.HTTPService().DoHTTPRequestWithResponse(req, nil)
	if err != nil {
		if isTLSConfigError(err) {
			return "", fmt.Errorf("influx: TLS with InfluxDB at %s failed (check tls-ca and the certificate): %w", c.url, err)
		}
		return "", fmt.Errorf("influx: %w at %s: %w", ErrUnreachable, c.url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch s := resp.StatusCode; {
	case s == http.StatusBadGateway || s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout:
		return "", fmt.Errorf("influx: %w at %s: GET /ping answered %s", ErrUnreachable, c.url, resp.Status)
	case s < 300, s == http.StatusUnauthorized, s == http.StatusForbidden:
		// Reachable; /ping may need auth (1.x ping-auth-enabled, 3.x).
	default:
		return "", fmt.Errorf("influx: GET %s/ping answered %s, not as InfluxDB does; check the URL", c.url, resp.Status)
	}
	if v := resp.Header.Get("X-Influxdb-Version"); v != "" {
		return v, nil
	}
	var v struct{ Version string }
	if json.Unmarshal(body, &v) == nil {
		return v.Version, nil // 3.x: {"version":"3.0.1","revision":"…"}
	}
	return "", nil
}

// isTLSConfigError tells a certificate problem, which retrying will not
// fix, from InfluxDB being down.
func isTLSConfigError(err error) bool {
	var (
		cv  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		rhe tls.RecordHeaderError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &rhe)
}

// versionMajor is 1, 2 or 3 for "1.8.10", "v2.7.1", "2.x", "3.0.1"; else 0.
func versionMajor(v string) int {
	v = strings.TrimPrefix(strings.TrimPrefix(v, "v"), "V")
	if len(v) >= 2 && v[1] == '.' || len(v) == 1 {
		switch v[0] {
		case '1':
			return 1
		case '2':
			return 2
		case '3':
			return 3
		}
	}
	return 0
}

// check1x looks up db and rp of bucket "db/rp" and creates what is missing
// with create: a missing database with the retention policy as its only and
// default one, a missing retention policy as the new default, as InfluxDB
// 1.x's graphite listener does.
func (c *checker) check1x(ctx context.Context, res *CheckResult, bucket string, create bool) error {
	db, rp, err := splitDBRP(bucket)
	if err != nil {
		return err
	}
	hint := ""
	if c.cfg.Token != "" {
		hint = " (or the user of the token may not read it)"
	}
	dbs, err := c.query(ctx, "", "SHOW DATABASES")
	if err != nil {
		return c.queryFailed(res, "SHOW DATABASES", err)
	}
	if !hasName(dbs, db) {
		if !create {
			return fmt.Errorf("influx: database %q does not exist on %s at %s%s; create it or set create-database = true",
				db, res.server(), c.url, hint)
		}
		q := "CREATE DATABASE " + quoteIdent(db)
		what := fmt.Sprintf("database %q", db)
		if rp != "" {
			q += " WITH NAME " + quoteIdent(rp)
			what += fmt.Sprintf(" with retention policy %q", rp)
		}
		if _, err := c.query(ctx, "", q); err != nil {
			return c.queryFailed(res, q, err)
		}
		res.Created = append(res.Created, what)
		return nil
	}
	if rp == "" {
		return nil
	}
	rps, err := c.query(ctx, db, "SHOW RETENTION POLICIES ON "+quoteIdent(db))
	if err != nil {
		return c.queryFailed(res, "SHOW RETENTION POLICIES", err)
	}
	if hasName(rps, rp) {
		return nil
	}
	if !create {
		return fmt.Errorf("influx: retention policy %q does not exist on database %q on %s at %s; create it or set create-database = true",
			rp, db, res.server(), c.url)
	}
	q := fmt.Sprintf("CREATE RETENTION POLICY %s ON %s DURATION 0s REPLICATION 1 DEFAULT", quoteIdent(rp), quoteIdent(db))
	if _, err := c.query(ctx, "", q); err != nil {
		return c.queryFailed(res, q, err)
	}
	res.Created = append(res.Created, fmt.Sprintf("retention policy %q on database %q (now its default)", rp, db))
	return nil
}

// queryFailed explains a failed InfluxQL statement.
func (c *checker) queryFailed(res *CheckResult, q string, err error) error {
	var qe *queryError
	if errors.As(err, &qe) {
		switch qe.status {
		case http.StatusUnauthorized:
			return fmt.Errorf("influx: %s at %s refused the credentials for %s (401 %s); set the token to \"user:password\"",
				res.server(), c.url, q, qe.text)
		case http.StatusForbidden:
			return fmt.Errorf("influx: %s at %s did not allow %s (403 %s); use an admin user or create it yourself",
				res.server(), c.url, q, qe.text)
		}
	}
	return fmt.Errorf("influx: %s on %s at %s: %w", q, res.server(), c.url, err)
}

// queryError is a refused InfluxQL statement.
type queryError struct {
	status int // HTTP status; 200 when the statement itself failed
	text   string
}

func (e *queryError) Error() string {
	return fmt.Sprintf("%d %s", e.status, e.text)
}

// query runs one InfluxQL statement and returns the values of its first
// series.
func (c *checker) query(ctx context.Context, db, q string) ([][]any, error) {
	series, err := c.series(ctx, db, q)
	if err != nil || len(series) == 0 {
		return nil, err
	}
	return series[0].Values, nil
}

// Series is one series of an InfluxQL answer.
type Series struct {
	Name    string            `json:"name"`
	Tags    map[string]string `json:"tags"`
	Columns []string          `json:"columns"`
	Values  [][]any           `json:"values"`
}

// Query runs one InfluxQL statement against db (a 1.x database, or a 2.x
// or 3.x bucket through its DBRP mapping) and returns the series of its
// answer. Numbers are json.Number.
func Query(ctx context.Context, cfg Config, db, q string) ([]Series, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &checker{cfg: cfg, url: RedactURL(cfg.URL), client: newClient(cfg)}
	defer c.client.Close()
	series, err := c.series(ctx, db, q)
	if err != nil {
		return nil, fmt.Errorf("influx: %s at %s: %w", q, c.url, err)
	}
	return series, nil
}

// series runs one InfluxQL statement with POST /query (1.x refuses CREATE
// over GET) and returns the series of its first result.
func (c *checker) series(ctx context.Context, db, q string) ([]Series, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	form := url.Values{"q": {q}}
	if db != "" {
		form.Set("db", db)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.client.ServerURL(), "/")+"/query", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.client.HTTPService().DoHTTPRequestWithResponse(req, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the answer: %w", ErrUnreachable, err)
	}
	if resp.StatusCode != http.StatusOK {
		text, _ := parseErrorBody(string(body))
		return nil, &queryError{status: resp.StatusCode, text: text}
	}
	var r struct {
		Error   string
		Results []struct {
			Error  string
			Series []Series
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil || (r.Error == "" && len(r.Results) == 0) {
		return nil, &queryError{status: resp.StatusCode, text: "not an InfluxQL answer: " + truncate(string(body), 200)}
	}
	if r.Error != "" {
		return nil, &queryError{status: resp.StatusCode, text: r.Error}
	}
	if e := r.Results[0].Error; e != "" {
		return nil, &queryError{status: resp.StatusCode, text: e}
	}
	return r.Results[0].Series, nil
}

// check2x looks the bucket up in its organization.
func (c *checker) check2x(ctx context.Context, res *CheckResult, t Target) error {
	org := t.Org
	if org == "" {
		org = c.cfg.Org
	}
	if org == "" {
		return fmt.Errorf("influx: %s at %s needs an organization to find bucket %q; set org", res.server(), c.url, t.Bucket)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	// BucketsAPI.FindBucketByName ignores the organization; this is the
	// request it makes, with the organization added.
	got, err := c.client.APIClient().GetBuckets(ctx, &domain.GetBucketsParams{Name: &t.Bucket, Org: &org})
	if err != nil {
		return fmt.Errorf("influx: looking up bucket %q in organization %q on %s at %s: %w", t.Bucket, org, res.server(), c.url, err)
	}
	if got.Buckets == nil || len(*got.Buckets) == 0 {
		return fmt.Errorf("influx: bucket %q does not exist in organization %q on %s at %s; create it (influx bucket create --name %q --org %q)",
			t.Bucket, org, res.server(), c.url, t.Bucket, org)
	}
	return nil
}

// hasName reports whether one of the rows starts with name.
func hasName(rows [][]any, name string) bool {
	for _, r := range rows {
		if len(r) > 0 && r[0] == name {
			return true
		}
	}
	return false
}

// quoteIdent quotes an InfluxQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
