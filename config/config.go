package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Config is the sparkpulse configuration file. Key names in [[graphite]]
// are those of InfluxDB 1.x, so an existing block can be pasted in.
type Config struct {
	// StateDir keeps what must survive a restart (the delta baselines).
	// Empty: nothing is kept, and a restart loses one interval of deltas.
	StateDir string `toml:"state-dir"`
	// MaxFuture is how far after its receive time a line may be dated
	// (default 2m); later lines are dropped, counted as "future".
	MaxFuture Duration         `toml:"max-future"`
	InfluxDB  InfluxDBConfig   `toml:"influxdb"`
	Admin     AdminConfig      `toml:"admin"`
	Log       LogConfig        `toml:"log"`
	Deltas    DeltaSettings    `toml:"deltas"`
	Delta     []DeltaRule      `toml:"delta"`
	Annotate  AnnotateConfig   `toml:"annotate"`
	Internal  InternalConfig   `toml:"internal"`
	Graphite  []GraphiteConfig `toml:"graphite"`

	// origins says where each value came from, for errors.
	origins origins
}

// InternalConfig is the [internal] section: sparkpulse's own metrics (those
// of /metrics) written to InfluxDB for the health dashboard.
type InternalConfig struct {
	Enabled  *bool    `toml:"enabled"`  // default true
	Interval Duration `toml:"interval"` // default 10s
	// Where the points go; default: the first [[graphite]] block's target.
	Database        string `toml:"database"`
	RetentionPolicy string `toml:"retention-policy"`
	Bucket          string `toml:"bucket"`
}

// AnnotateConfig is the [annotate] section: Spark REST sources polled for
// job, stage and SQL annotations. It is on when URLs is not empty.
type AnnotateConfig struct {
	URLs     []string `toml:"urls"`
	Interval Duration `toml:"interval"`
	Timeout  Duration `toml:"timeout"`
	Lookback Duration `toml:"lookback"`
	MaxText  int      `toml:"max-text"`
	// Bounds on what the sources may cost (see annotate.Config).
	MaxResponseBytes int64 `toml:"max-response-bytes"`
	MaxApps          int   `toml:"max-apps"`
	NewAppsPerPoll   int   `toml:"new-apps-per-poll"`
	// Stage details: task distribution, straggler, failed tasks.
	StageDetailsMinDuration SignedDuration `toml:"stage-details-min-duration"` // "-1s": every stage
	StageDetailsRequests    int            `toml:"stage-details-requests"`
	FailedTasksPerStage     int            `toml:"failed-tasks-per-stage"`
	// Accounting: how long after an application's end its metrics are
	// summed (its last reports must be in).
	UsageDelay Duration `toml:"usage-delay"`
	// How long a failing read of the metrics stream for an accounting is
	// retried (default 6h).
	StreamRetry Duration `toml:"stream-retry"`
	// How long an application no source shows any more waits for one to
	// show its end before it is closed out (default 10m).
	CloseOutAfter Duration `toml:"close-out-after"`
	// How long an application a History Server lists as running, whose
	// live UI went, waits with its event log unread and its metrics
	// quiet before it is closed out as lost (default 10m).
	LostDriverAfter Duration `toml:"lost-driver-after"`
	// Where the points go; default: the first [[graphite]] block's target.
	Database        string `toml:"database"`
	RetentionPolicy string `toml:"retention-policy"`
	Bucket          string `toml:"bucket"`
	// Where spark_app_history goes, kept longer than the facts; none when
	// all are empty. A retention policy alone is one of the annotations'
	// database.
	HistoryDatabase        string `toml:"history-database"`
	HistoryRetentionPolicy string `toml:"history-retention-policy"`
	HistoryBucket          string `toml:"history-bucket"`
	// Basic auth, or a bearer token; secrets preferably from env or files.
	Username              string `toml:"username"`
	Password              string `toml:"password"`
	PasswordFile          string `toml:"password-file"`
	Token                 string `toml:"token"`
	TokenFile             string `toml:"token-file"`
	TLSCA                 string `toml:"tls-ca"`
	TLSInsecureSkipVerify bool   `toml:"tls-insecure-skip-verify"`
	// AppIDTag is the tag whose values fill {app_id} in URL templates.
	AppIDTag string `toml:"app-id-tag"`
}

// DeltaSettings configures the delta stage for all blocks.
type DeltaSettings struct {
	Enabled          *bool     `toml:"enabled"`            // default true
	FirstSampleGrace *Duration `toml:"first-sample-grace"` // default 20s; "0s": every first sample is a new series
	IdleTTL          Duration  `toml:"idle-ttl"`           // default 15m
	MaxSeries        int       `toml:"max-series"`         // default 1000000
	MaxSeriesPerApp  int       `toml:"max-series-per-app"` // default 250000
	// MaxIngestLogBytes bounds the ingest log in state-dir (package
	// ingestlog); default ingestlog.DefaultMaxBytes.
	MaxIngestLogBytes int64 `toml:"max-ingest-log-bytes"`
	SparkRules        *bool `toml:"spark-rules"` // the built-in Spark rules after the [[delta]] blocks; default true
}

// DeltaRule is a [[delta]] block: which series are cumulative.
type DeltaRule struct {
	Path        []string `toml:"path"`
	Measurement []string `toml:"measurement"`
	Cumulative  *bool    `toml:"cumulative"` // default true; false makes an exception
	Unit        string   `toml:"unit"`
}

// InfluxDBConfig says where points go.
type InfluxDBConfig struct {
	URL   string `toml:"url"`
	Org   string `toml:"org"`
	Token string `toml:"token"`
	// TokenFile holds the token (trailing newline ignored); preferred over
	// Token because the config file is often readable by many.
	TokenFile             string   `toml:"token-file"`
	CreateDatabase        bool     `toml:"create-database"`
	Gzip                  any      `toml:"gzip"` // true, false or "auto"
	Timeout               Duration `toml:"timeout"`
	MaxInFlight           int      `toml:"max-in-flight"`
	MaxQueueBytes         int      `toml:"max-queue-bytes"`
	MaxDiskQueueBytes     int64    `toml:"max-disk-queue-bytes"`
	TLSCA                 string   `toml:"tls-ca"`
	TLSCert               string   `toml:"tls-cert"`
	TLSKey                string   `toml:"tls-key"`
	TLSInsecureSkipVerify bool     `toml:"tls-insecure-skip-verify"`
}

// AdminConfig is the HTTP listener for /metrics and /healthz.
type AdminConfig struct {
	BindAddress *string `toml:"bind-address"` // "" turns it off
	// Pprof serves Go's profiles under /debug/pprof/ on the admin address.
	Pprof bool `toml:"pprof"`
}

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string `toml:"format"` // console or json
	Level  string `toml:"level"`  // debug, info, warn, error
}

// GraphiteConfig is one listener, as InfluxDB 1.x's [[graphite]] block plus
// sparkpulse's own keys.
type GraphiteConfig struct {
	Enabled         *bool    `toml:"enabled"`
	BindAddress     string   `toml:"bind-address"`
	Protocol        string   `toml:"protocol"`
	Database        string   `toml:"database"`
	RetentionPolicy string   `toml:"retention-policy"`
	Bucket          string   `toml:"bucket"`
	Templates       []string `toml:"templates"`
	Tags            []string `toml:"tags"`
	Separator       string   `toml:"separator"`
	BatchSize       int      `toml:"batch-size"`
	BatchTimeout    Duration `toml:"batch-timeout"`
	UDPReadBuffer   int      `toml:"udp-read-buffer"`
	// Accepted for compatibility with influxdb.conf; sparkpulse's queue is
	// bounded by [influxdb] max-queue-bytes instead, and writes have no
	// consistency level outside InfluxDB Enterprise.
	BatchPending     int    `toml:"batch-pending"`
	ConsistencyLevel string `toml:"consistency-level"`

	MaxLineLength  int      `toml:"max-line-length"`
	IdleTimeout    Duration `toml:"idle-timeout"`
	MaxConnections int      `toml:"max-connections"`
	MaxHeldBytes   int64    `toml:"max-held-bytes"`
	// MaxCachedSeries bounds the series whose mapping the block remembers
	// (default 1000000, about 200 bytes each).
	MaxCachedSeries int `toml:"max-cached-series"`
	// SparkPrefixes are GraphiteSink prefixes the built-in Spark mapping
	// strips into the username tag (only needed when the prefix is used
	// together with a custom spark.metrics.namespace).
	SparkPrefixes []string `toml:"spark-prefixes"`
	// Schema is the built-in Spark mapping's shape: "wide" (the default,
	// a measurement per Spark source) or "cern" (a measurement per
	// metric, for the CERN dashboards). See schema.Shape.
	Schema string `toml:"schema"`
	// CheckPeer drops a TCP connection's points of a Spark process unless
	// they come from the IP address Spark's REST API lists for it (needs
	// [annotate]; see docs/security.md). Default false.
	CheckPeer bool `toml:"check-peer"`
}

// Duration is a time.Duration written as "10s" in the config.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(FormatDuration(time.Duration(d))), nil }

// SignedDuration is a Duration where a negative value means something,
// such as stage-details-min-duration's "-1s" (every stage).
type SignedDuration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *SignedDuration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = SignedDuration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d SignedDuration) MarshalText() ([]byte, error) {
	return []byte(FormatDuration(time.Duration(d))), nil
}

// Defaults of the settings no component package has; the others are the
// packages' own (influx, queue, graphite, delta, relay, annotate). The
// command's flag help names the exported ones.
const (
	DefaultAdminAddr        = "127.0.0.1:2033"
	DefaultBindAddr         = ":2003"
	DefaultDatabase         = "spark"
	defaultInternalInterval = 10 * time.Second
	DefaultLogFormat        = "console"
	DefaultLogLevel         = "info"
)

// influxdbSections are top-level tables of an influxdb.conf. A file with any
// of them is read as an InfluxDB 1.x config: only its [[graphite]] blocks are
// taken, and, as in influxd, a block runs only with enabled = true.
var influxdbSections = []string{
	"meta", "data", "coordinator", "retention", "shard-precreation", "monitor",
	"http", "ifql", "logging", "subscriber", "collectd", "opentsdb", "udp",
	"continuous_queries", "tls", "reporting-disabled", "bind-address",
}

// loadConfig reads and decodes a config file, after replacing its ${VAR}s
// (see expandVars). It reports unknown keys and bad values with the file,
// line and key, all of them: a config is returned with the errors when
// only some values are bad, so that the rest is validated too. Zero values
// stand for the defaults, which the packages apply.
func loadConfig(path string, getenv func(string) string) (*Config, bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read config: %w", err)
	}
	data, vars, varErr := expandVars(path, data, getenv)
	var top map[string]any
	if err := toml.Unmarshal(data, &top); err != nil {
		return nil, false, errors.Join(varErr, decodeError(path, err))
	}
	influxMode := false
	for k := range top {
		if slices.Contains(influxdbSections, k) {
			influxMode = true
		}
	}
	cfg, errs := decodeAll(path, data)
	if cfg == nil {
		return nil, false, errors.Join(append([]error{varErr}, errs...)...)
	}
	if influxMode {
		// Everything outside [[graphite]] belongs to influxd.
		cfg.InfluxDB, cfg.Admin, cfg.Log = InfluxDBConfig{}, AdminConfig{}, LogConfig{}
		cfg.StateDir, cfg.MaxFuture, cfg.Deltas, cfg.Delta, cfg.Annotate = "", 0, DeltaSettings{}, nil, AnnotateConfig{}
		off := false
		cfg.Internal = InternalConfig{Enabled: &off} // an influxdb.conf has its own [monitor]
		errs = slices.DeleteFunc(errs, func(e error) bool {
			var u unknownKeyError
			return errors.As(e, &u) && u.key[0] != "graphite"
		})
		for i := range cfg.Graphite {
			if cfg.Graphite[i].Enabled == nil {
				off := false
				cfg.Graphite[i].Enabled = &off
			}
		}
	}
	cfg.origins = filePositions(path, data, vars)
	return cfg, influxMode, errors.Join(append([]error{varErr}, errs...)...)
}

// maxDecodeErrors bounds how many bad values one load reports.
const maxDecodeErrors = 50

// decodeAll decodes data into a Config, reporting every bad value: the
// decoder stops at the first, so its line is blanked and the file decoded
// again. It returns nil when the file no longer decodes.
func decodeAll(path string, data []byte) (*Config, []error) {
	var errs []error
	lines := bytes.SplitAfter(data, []byte("\n"))
	blanked := map[int]bool{}
	for range maxDecodeErrors {
		cfg := &Config{}
		err := toml.NewDecoder(bytes.NewReader(bytes.Join(lines, nil))).DisallowUnknownFields().Decode(cfg)
		var de *toml.DecodeError
		var sme *toml.StrictMissingError
		switch {
		case err == nil:
			return cfg, errs
		case errors.As(err, &sme):
			for _, e := range sme.Errors {
				row, col := e.Position()
				errs = append(errs, unknownKeyError{fmt.Sprintf("%s:%d:%d", path, row, col), e.Key()})
			}
			return cfg, errs
		case errors.As(err, &de):
			errs = append(errs, decodeError(path, err))
			row, _ := de.Position()
			if row < 1 || row > len(lines) || blanked[row] {
				return nil, errs
			}
			// Blanked, the line keeps the others' numbers.
			lines[row-1], blanked[row] = []byte("\n"), true
		default:
			return nil, append(errs, decodeError(path, err))
		}
	}
	return nil, errs
}

// unknownKeyError is a key the config does not have.
type unknownKeyError struct {
	at  string // file:line:col
	key []string
}

func (e unknownKeyError) Error() string {
	return fmt.Sprintf("%s: unknown key %q", e.at, strings.Join(e.key, "."))
}

// decodeError rewrites go-toml's errors as "file:line:col: key: reason".
func decodeError(path string, err error) error {
	var sme *toml.StrictMissingError
	if errors.As(err, &sme) {
		var errs []error
		for _, e := range sme.Errors {
			row, col := e.Position()
			errs = append(errs, fmt.Errorf("%s:%d:%d: unknown key %q", path, row, col, strings.Join(e.Key(), ".")))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := de.Error()
		// Go's types mean nothing to the reader of the file.
		if m := typeMismatch.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("a TOML %s where %s is wanted", m[1], wantedType(m[2]))
		}
		key := strings.Join(de.Key(), ".")
		if key != "" {
			return fmt.Errorf("%s:%d:%d: key %q: %s", path, row, col, key, msg)
		}
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, msg)
	}
	return fmt.Errorf("%s: %w", path, err)
}

var typeMismatch = regexp.MustCompile(`^toml: cannot (?:decode|store) TOML (\w+) (?:into|in) (?:struct field )?\S+ of type (\S+)`)

// wantedType names a field's Go type as the file writes its values.
func wantedType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list ([\"a\", \"b\"])"
	case strings.Contains(goType, "Duration"):
		return "a duration (\"10s\", \"7d\")"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "bool"):
		return "true or false"
	case strings.Contains(goType, "string"):
		return "a string"
	}
	return "a " + strings.TrimPrefix(goType, "*")
}

// defaultConfig is what runs without a config file: the built-in Spark
// mapping on TCP and UDP port 2003, as Spark's GraphiteSink can use either.
func defaultConfig() *Config {
	return &Config{Graphite: []GraphiteConfig{
		{Protocol: "tcp"},
		{Protocol: "udp"},
	}, origins: origins{}}
}

// Overrides are the values the command's flags give; zero values leave the
// setting to the layers below. The flags' names are the values' origins.
type Overrides struct {
	Config         string   // --config; else SPARKPULSE_CONFIG names the file
	InfluxURL      string   // --influxdb-url
	InfluxOrg      string   // --influxdb-org
	Database       string   // --database: every block's, replacing retention-policy and bucket
	Bucket         string   // --bucket: every block's
	Bind           string   // --bind: the default listeners' address, refused with a config file
	AdminAddr      string   // --admin-bind; "off" turns the endpoint off
	LogFormat      string   // --log-format
	LogLevel       string   // --log-level
	CreateDatabase bool     // --create-database
	StateDir       string   // --state-dir
	AnnotateURLs   []string // --annotate-url, report's --url: replace [annotate] urls
}

// applyFlags lays the command line over the file and the environment,
// noting the flags as the values' origins (--bind applies to the default
// listeners only: loadLayers refuses it with a config file).
func (c *Config) applyFlags(o *Overrides) {
	if c.origins == nil {
		c.origins = origins{}
	}
	set := func(key, flag string, dst *string, v string) {
		if v != "" {
			*dst = v
			c.origins[key] = origin{flag: flag}
		}
	}
	set("influxdb.url", "--influxdb-url", &c.InfluxDB.URL, o.InfluxURL)
	set("influxdb.org", "--influxdb-org", &c.InfluxDB.Org, o.InfluxOrg)
	set("log.format", "--log-format", &c.Log.Format, o.LogFormat)
	set("log.level", "--log-level", &c.Log.Level, o.LogLevel)
	set("state-dir", "--state-dir", &c.StateDir, o.StateDir)
	if o.CreateDatabase {
		c.InfluxDB.CreateDatabase = true
		c.origins["influxdb.create-database"] = origin{flag: "--create-database"}
	}
	if o.AdminAddr != "" {
		a := o.AdminAddr
		if a == "off" {
			a = ""
		}
		c.Admin.BindAddress = &a
		c.origins["admin.bind-address"] = origin{flag: "--admin-bind"}
	}
	if len(o.AnnotateURLs) > 0 {
		c.Annotate.URLs = o.AnnotateURLs
		c.origins["annotate.urls"] = origin{flag: "--annotate-url"}
	}
	for i := range c.Graphite {
		g := &c.Graphite[i]
		key := func(k string) string { return blockKey("graphite", i+1, k) }
		set(key("bind-address"), "--bind", &g.BindAddress, o.Bind)
		if o.Database != "" {
			g.Database, g.RetentionPolicy, g.Bucket = o.Database, "", ""
			c.origins[key("database")] = origin{flag: "--database"}
		}
		set(key("bucket"), "--bucket", &g.Bucket, o.Bucket)
	}
}
