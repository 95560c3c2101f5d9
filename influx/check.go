package influx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/influxdata/influxdb-client-go/v2/domain"

	"github.com/sparkpulse/sparkpulse/influxql"
)

// ErrUnreachable is wrapped by Check's error when InfluxDB cannot be
// reached (connection refused, DNS, timeout, a proxy's 502/503/504).
var ErrUnreachable = errors.New("InfluxDB is unreachable")

// ErrMissing is matched (errors.Is) by Check's error when the database,
// retention policy or bucket does not exist.
var ErrMissing = errors.New("influx: the target does not exist")

type missingError struct{ msg string }

func (e missingError) Error() string        { return e.msg }
func (e missingError) Is(target error) bool { return target == ErrMissing }

func missing(format string, args ...any) error { return missingError{fmt.Sprintf(format, args...)} }

// CheckResult describes the server Check talked to and what it did.
type CheckResult struct {
	Version string   // as the server reports it ("1.8.10", "v2.7.1", "unknown"); "" if it does not
	Build   string   // X-Influxdb-Build: "OSS" (1.x, 2.x), "Core" or "Enterprise" (3.x); "" if not said
	Major   int      // 1, 2 or 3; 0 when the version is not recognised
	Created []string // what Check created, e.g. `database "spark"`
	Note    string   // set when the check was skipped, and why; for the caller to log
	// Warnings are what the server will not do that sparkpulse's
	// dashboards need, or limits they run into, each with its remedy.
	Warnings []string
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
	if r.Major == 3 && r.Build != "" && versionMajor(r.Version) == 3 {
		return "InfluxDB " + r.Version + " " + strings.TrimPrefix(r.Build, "InfluxDB 3 ")
	}
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
	if err := cfg.Validate(); err != nil {
		return res, fmt.Errorf("influx: %w", err)
	}
	if err := validTarget(t); err != nil {
		return res, err
	}
	c := newChecker(cfg)
	defer c.client.close()

	var err error
	res.Version, res.Build, err = c.ping(ctx)
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
		if strings.Contains(res.Build, "Core") {
			// influxdb3_write/src/write_buffer/mod.rs: "Query would scan {} Parquet files, exceeding the file limit"
			res.Warnings = append(res.Warnings, "InfluxDB 3 Core refuses a query that would read more than 432 Parquet files of a table, "+
				"about 72 hours of data: keep the dashboards' time range under 3 days, or start influxdb3 with a larger --query-file-limit")
		}
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

// checker asks InfluxDB about itself: its version, databases and buckets.
type checker struct {
	cfg    Config
	url    string // redacted
	client *client
}

func newChecker(cfg Config) *checker {
	cfg = cfg.WithDefaults()
	cfg.Gzip = GzipOff // checks and queries send no bodies worth compressing
	return &checker{cfg: cfg, url: RedactURL(cfg.URL), client: newClient(cfg)}
}

// ping reads the server's version and build from GET /ping.
func (c *checker) ping(ctx context.Context) (version, build string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.client.base+"ping", nil)
	if err != nil {
		return "", "", fmt.Errorf("influx: URL %q: %w", c.url, err)
	}
	a, err := c.client.do(req, 4<<10)
	if err != nil {
		if isTLSConfigError(err) {
			return "", "", fmt.Errorf("influx: TLS with InfluxDB at %s failed (check tls-ca and the certificate): %w", c.url, err)
		}
		return "", "", fmt.Errorf("influx: %w at %s: %w", ErrUnreachable, c.url, err)
	}
	status := fmt.Sprintf("%d %s", a.status, http.StatusText(a.status))
	switch s := a.status; {
	case s == http.StatusBadGateway || s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout:
		return "", "", fmt.Errorf("influx: %w at %s: GET /ping answered %s", ErrUnreachable, c.url, status)
	case s < 300, s == http.StatusUnauthorized, s == http.StatusForbidden:
		// Reachable; /ping may need auth (1.x ping-auth-enabled, 3.x).
	default:
		return "", "", fmt.Errorf("influx: GET %s/ping answered %s, not as InfluxDB does; check the URL", c.url, status)
	}
	build = a.header.Get("X-Influxdb-Build")
	var body struct {
		Version string
		Product string `json:"product_name"` // 3.x: "InfluxDB 3 Core"
	}
	_ = json.Unmarshal(a.body, &body)
	if build == "" {
		build = body.Product
	}
	if v := a.header.Get("X-Influxdb-Version"); v != "" {
		return v, build, nil
	}
	return body.Version, build, nil // 3.x: {"version":"3.0.1","revision":"…"}
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
			return missing("influx: database %q does not exist on %s at %s%s; create it or set create-database = true",
				db, res.server(), c.url, hint)
		}
		q := "CREATE DATABASE " + influxql.QuoteIdent(db)
		what := fmt.Sprintf("database %q", db)
		if rp != "" {
			q += " WITH NAME " + influxql.QuoteIdent(rp)
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
	rps, err := c.query(ctx, db, "SHOW RETENTION POLICIES ON "+influxql.QuoteIdent(db))
	if err != nil {
		return c.queryFailed(res, "SHOW RETENTION POLICIES", err)
	}
	if hasName(rps, rp) {
		return nil
	}
	if !create {
		return missing("influx: retention policy %q does not exist on database %q on %s at %s; create it or set create-database = true",
			rp, db, res.server(), c.url)
	}
	q := fmt.Sprintf("CREATE RETENTION POLICY %s ON %s DURATION 0s REPLICATION 1 DEFAULT", influxql.QuoteIdent(rp), influxql.QuoteIdent(db))
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
	got, err := c.client.c.APIClient().GetBuckets(ctx, &domain.GetBucketsParams{Name: &t.Bucket, Org: &org})
	// 2.7 answers 404 for an organization or a bucket that does not
	// exist (earlier versions an empty list); the client keeps only the
	// answer's code and message.
	if err != nil && strings.HasPrefix(err.Error(), string(domain.ErrorCodeNotFound)+":") {
		if strings.Contains(err.Error(), "organization") {
			return missing("influx: organization %q does not exist on %s at %s (%v); set org to the token's organization",
				org, res.server(), c.url, err)
		}
		got, err = &domain.Buckets{}, nil
	}
	if err != nil {
		return fmt.Errorf("influx: looking up bucket %q in organization %q on %s at %s: %w", t.Bucket, org, res.server(), c.url, err)
	}
	if got.Buckets == nil || len(*got.Buckets) == 0 {
		return missing("influx: bucket %q does not exist in organization %q on %s at %s; create it (influx bucket create --name %q --org %q)",
			t.Bucket, org, res.server(), c.url, t.Bucket, org)
	}
	// The dashboards' InfluxQL finds the bucket through a DBRP mapping:
	// 2.4 and later map every bucket to a database of its name; 2.0–2.3
	// and Cloud Serverless need one made.
	dbs, err := c.query(ctx, "", "SHOW DATABASES")
	if err == nil && !hasName(dbs, t.Bucket) {
		id := "<bucket id>"
		if b := (*got.Buckets)[0]; b.Id != nil {
			id = *b.Id
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("InfluxQL (the dashboards) has no database %q for bucket %q: "+
			"create the DBRP mapping: influx v1 dbrp create --org %q --bucket-id %s --db %q --rp autogen --default", t.Bucket, t.Bucket, org, id, t.Bucket))
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
