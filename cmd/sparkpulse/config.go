package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// Config is the sparkpulse configuration file. Key names in [[graphite]]
// are those of InfluxDB 1.x, so an existing block can be pasted in.
type Config struct {
	// StateDir keeps what must survive a restart (the delta baselines).
	// Empty: nothing is kept, and a restart loses one interval of deltas.
	StateDir string           `toml:"state-dir"`
	InfluxDB InfluxDBConfig   `toml:"influxdb"`
	Admin    AdminConfig      `toml:"admin"`
	Log      LogConfig        `toml:"log"`
	Deltas   DeltaSettings    `toml:"deltas"`
	Delta    []DeltaRule      `toml:"delta"`
	Annotate AnnotateConfig   `toml:"annotate"`
	Internal InternalConfig   `toml:"internal"`
	Graphite []GraphiteConfig `toml:"graphite"`
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
	// Where the points go; default: the first [[graphite]] block's target.
	Database        string `toml:"database"`
	RetentionPolicy string `toml:"retention-policy"`
	Bucket          string `toml:"bucket"`
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
	SparkRules       *bool     `toml:"spark-rules"`        // the built-in Spark rules after the [[delta]] blocks; default true
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
	Gzip                  *bool    `toml:"gzip"`
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
	// MaxCachedSeries bounds the series whose mapping the block remembers
	// (default 1000000, about 200 bytes each).
	MaxCachedSeries int `toml:"max-cached-series"`
	// SparkPrefixes are GraphiteSink prefixes the built-in Spark mapping
	// strips into the username tag (only needed when the prefix is used
	// together with a custom spark.metrics.namespace).
	SparkPrefixes []string `toml:"spark-prefixes"`
}

// Duration is a time.Duration written as "10s" in the config.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use e.g. \"500ms\", \"10s\", \"2m\")", b)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Defaults, documented in the README's config reference.
const (
	defaultInfluxURL     = "http://127.0.0.1:8086"
	defaultAdminAddr     = "127.0.0.1:9108"
	defaultBindAddr      = ":2003"
	defaultDatabase      = "graphite"
	defaultBatchSize     = 5000
	defaultBatchTimeout  = time.Second
	defaultMaxLineLength = 64 << 10
	defaultIdleTimeout   = 2 * time.Minute
	defaultTimeout       = 10 * time.Second
	defaultMaxInFlight   = 2
	defaultMaxQueueBytes = 64 << 20

	defaultMaxDiskQueueBytes = 1 << 30
)

// Env variables read by sparkpulse; they override the file, flags override them.
const (
	envToken            = "SPARKPULSE_INFLUXDB_TOKEN"
	envURL              = "SPARKPULSE_INFLUXDB_URL"
	envOrg              = "SPARKPULSE_INFLUXDB_ORG"
	envAnnotatePassword = "SPARKPULSE_ANNOTATE_PASSWORD"
	envAnnotateToken    = "SPARKPULSE_ANNOTATE_TOKEN"
)

// influxdbSections are top-level tables of an influxdb.conf. A file with any
// of them is read as an InfluxDB 1.x config: only its [[graphite]] blocks are
// taken, and, as in influxd, a block runs only with enabled = true.
var influxdbSections = []string{
	"meta", "data", "coordinator", "retention", "shard-precreation", "monitor",
	"http", "ifql", "logging", "subscriber", "collectd", "opentsdb", "udp",
	"continuous_queries", "tls", "reporting-disabled", "bind-address",
}

// loadConfig reads and decodes a config file. It reports unknown keys and
// bad values with the file, line and key. Defaults are applied by
// (*Config).prepare, not here.
func loadConfig(path string) (*Config, bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read config: %w", err)
	}
	var top map[string]any
	if err := toml.Unmarshal(data, &top); err != nil {
		return nil, false, decodeError(path, err)
	}
	influxMode := false
	for k := range top {
		if slices.Contains(influxdbSections, k) {
			influxMode = true
		}
	}
	cfg := &Config{}
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	err = dec.Decode(cfg)
	if influxMode {
		// Everything outside [[graphite]] belongs to influxd.
		cfg.InfluxDB, cfg.Admin, cfg.Log = InfluxDBConfig{}, AdminConfig{}, LogConfig{}
		cfg.StateDir, cfg.Deltas, cfg.Delta, cfg.Annotate = "", DeltaSettings{}, nil, AnnotateConfig{}
		off := false
		cfg.Internal = InternalConfig{Enabled: &off} // an influxdb.conf has its own [monitor]
		var sme *toml.StrictMissingError
		if errors.As(err, &sme) {
			var kept []toml.DecodeError
			for _, e := range sme.Errors {
				if k := e.Key(); len(k) > 0 && k[0] == "graphite" {
					kept = append(kept, e)
				}
			}
			err = nil
			if len(kept) > 0 {
				err = &toml.StrictMissingError{Errors: kept}
			}
		}
		for i := range cfg.Graphite {
			if cfg.Graphite[i].Enabled == nil {
				off := false
				cfg.Graphite[i].Enabled = &off
			}
		}
	}
	if err != nil {
		return nil, false, decodeError(path, err)
	}
	return cfg, influxMode, nil
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
		key := strings.Join(de.Key(), ".")
		if key != "" {
			return fmt.Errorf("%s:%d:%d: key %q: %s", path, row, col, key, de.Error())
		}
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, de.Error())
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Listener is a validated, compiled [[graphite]] block, ready to start.
type Listener struct {
	Index  int // position in the file, from 1
	Config GraphiteConfig
	Mapper interface {
		Apply(path []byte, r *templates.Result) error
	}
	Target   influx.Target
	Describe []string // what the mapping does, for `check`
	Warnings []string
}

// Name identifies the listener in logs and metrics, e.g. "tcp://:2003".
// Blocks on port 0 (a free port, in tests) also carry their position, as
// their addresses are alike until bound.
func (l *Listener) Name() string {
	name := l.Config.Protocol + "://" + l.Config.BindAddress
	if _, port, _ := net.SplitHostPort(l.Config.BindAddress); port == "0" {
		name += fmt.Sprintf("#%d", l.Index)
	}
	return name
}

// Plan is the whole validated configuration.
type Plan struct {
	InfluxDB  InfluxDBConfig
	Token     string // resolved from env, token-file or token; never logged
	AdminAddr string
	Pprof     bool
	Log       LogConfig
	StateDir  string
	// DeltaRules is nil when the delta stage is off.
	DeltaRules    *delta.Rules
	DeltaSettings delta.Settings
	DeltaDescribe []string // for `check`
	// Annotate is nil when no [annotate] urls are set.
	Annotate *AnnotatePlan
	// Internal is nil when [internal] is disabled.
	Internal  *InternalPlan
	Listeners []*Listener
	// Warnings are problems that do not stop the service, such as a
	// secret others can read; logged at start and shown by `check`.
	Warnings []string
}

// InternalPlan is the validated [internal] section.
type InternalPlan struct {
	Interval time.Duration
	Target   influx.Target
}

// AnnotatePlan is the validated [annotate] section.
type AnnotatePlan struct {
	Config   AnnotateConfig // durations and limits with defaults; secrets cleared
	Auth     annotate.Auth  // resolved from env, files or the config; never logged
	Target   influx.Target
	AppIDTag string
}

// prepare applies defaults, resolves secrets and validates everything,
// compiling each block's templates. All problems are reported at once, each
// naming the block and key. Nothing is opened here.
func (c *Config) prepare(source string, getenv func(string) string) (*Plan, error) {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	p := &Plan{InfluxDB: c.InfluxDB, Log: c.Log}
	in := &p.InfluxDB
	if v := getenv(envURL); v != "" {
		in.URL = v
	}
	if v := getenv(envOrg); v != "" {
		in.Org = v
	}
	if in.URL == "" {
		in.URL = defaultInfluxURL
	}
	if !strings.HasPrefix(in.URL, "http://") && !strings.HasPrefix(in.URL, "https://") {
		fail("%s: [influxdb] url %q: must start with http:// or https://", source, influx.RedactURL(in.URL))
	}
	if in.Timeout == 0 {
		in.Timeout = Duration(defaultTimeout)
	}
	if in.MaxInFlight == 0 {
		in.MaxInFlight = defaultMaxInFlight
	}
	if in.MaxInFlight < 0 {
		fail("%s: [influxdb] max-in-flight %d: must be positive", source, in.MaxInFlight)
	}
	if in.MaxQueueBytes == 0 {
		in.MaxQueueBytes = defaultMaxQueueBytes
	}
	if in.MaxQueueBytes < 1<<20 {
		fail("%s: [influxdb] max-queue-bytes %d: must be at least 1048576", source, in.MaxQueueBytes)
	}
	if in.MaxDiskQueueBytes == 0 {
		in.MaxDiskQueueBytes = defaultMaxDiskQueueBytes
	}
	if in.MaxDiskQueueBytes < 16<<20 {
		fail("%s: [influxdb] max-disk-queue-bytes %d: must be at least 16777216", source, in.MaxDiskQueueBytes)
	}
	if (in.TLSCert == "") != (in.TLSKey == "") {
		fail("%s: [influxdb] tls-cert and tls-key go together", source)
	}
	var err error
	if p.Token, err = p.secret(getenv(envToken), in.TokenFile, in.Token); err != nil {
		fail("%s: [influxdb] token-file: %v", source, err)
	}
	if in.Token != "" {
		p.warnReadable(source, "[influxdb] token", envToken)
	}
	in.Token = "" // only Plan.Token holds it from here on

	p.AdminAddr = defaultAdminAddr
	if c.Admin.BindAddress != nil {
		p.AdminAddr = *c.Admin.BindAddress
	}
	p.Pprof = c.Admin.Pprof
	if p.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(p.AdminAddr); err != nil {
			fail("%s: [admin] bind-address %q: %v", source, p.AdminAddr, err)
		}
	}
	switch p.Log.Format {
	case "":
		p.Log.Format = "console"
	case "console", "json":
	default:
		fail("%s: [log] format %q: must be console or json", source, p.Log.Format)
	}
	switch p.Log.Level {
	case "":
		p.Log.Level = "info"
	case "debug", "info", "warn", "error":
	default:
		fail("%s: [log] level %q: must be debug, info, warn or error", source, p.Log.Level)
	}

	p.StateDir = c.StateDir
	if err := c.prepareDeltas(p, source); err != nil {
		errs = append(errs, err)
	}

	binds := map[string]int{}
	for i, g := range c.Graphite {
		where := fmt.Sprintf("%s: [[graphite]] #%d", source, i+1)
		l, err := g.compile(where, i+1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !*l.Config.Enabled {
			continue // validated like influxd does, but not run
		}
		// Port 0 asks the kernel for a free port: never a conflict.
		_, port, _ := net.SplitHostPort(l.Config.BindAddress)
		if prev, ok := binds[l.Name()]; ok && port != "0" {
			fail("%s: bind-address %q with protocol %s is already used by block #%d", where, l.Config.BindAddress, l.Config.Protocol, prev)
			continue
		}
		binds[l.Name()] = l.Index
		p.Listeners = append(p.Listeners, l)
	}
	if len(errs) == 0 && len(p.Listeners) == 0 {
		fail("%s: no enabled [[graphite]] block: nothing to listen on", source)
	}
	if err := c.prepareAnnotate(p, source, getenv); err != nil {
		errs = append(errs, err)
	}
	if err := c.prepareInternal(p, source); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// compile validates one block and builds its mapper.
func (g GraphiteConfig) compile(where string, index int) (*Listener, error) {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(where+": "+format, a...)) }

	if g.Enabled == nil {
		on := true
		g.Enabled = &on
	}
	if g.BindAddress == "" {
		g.BindAddress = defaultBindAddr
	}
	where += fmt.Sprintf(" (bind-address %q)", g.BindAddress)
	if _, _, err := net.SplitHostPort(g.BindAddress); err != nil {
		fail("bind-address: %v", err)
	}
	switch strings.ToLower(g.Protocol) {
	case "":
		g.Protocol = "tcp"
	case "tcp", "udp":
		g.Protocol = strings.ToLower(g.Protocol)
	default:
		fail("protocol %q: must be tcp or udp", g.Protocol)
	}
	if g.Database == "" {
		g.Database = defaultDatabase
	}
	if g.Separator == "" {
		g.Separator = "."
	}
	if g.BatchSize == 0 {
		g.BatchSize = defaultBatchSize
	}
	if g.BatchSize < 0 {
		fail("batch-size %d: must be positive", g.BatchSize)
	}
	if g.BatchTimeout == 0 {
		g.BatchTimeout = Duration(defaultBatchTimeout)
	}
	if g.MaxLineLength == 0 {
		g.MaxLineLength = defaultMaxLineLength
	}
	if g.MaxLineLength < 0 {
		fail("max-line-length %d: must be positive", g.MaxLineLength)
	}
	if g.IdleTimeout == 0 {
		g.IdleTimeout = Duration(defaultIdleTimeout)
	}
	if g.MaxConnections < 0 {
		fail("max-connections %d: must not be negative", g.MaxConnections)
	}
	if g.MaxCachedSeries < 0 {
		fail("max-cached-series %d: must not be negative", g.MaxCachedSeries)
	}
	if g.UDPReadBuffer < 0 {
		fail("udp-read-buffer %d: must not be negative", g.UDPReadBuffer)
	}

	l := &Listener{Index: index, Config: g}
	l.Target, _ = target(g.Bucket, g.Database, g.RetentionPolicy, influx.Target{})

	if len(g.Templates) > 0 {
		if len(g.SparkPrefixes) > 0 {
			fail("spark-prefixes applies to the built-in Spark mapping only; this block has templates")
		}
		eng, err := templates.Compile(g.Templates, g.Separator, g.Tags)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		} else {
			l.Mapper = eng
			l.Describe = eng.Describe()
			l.Warnings = eng.Warnings()
		}
	} else {
		tags, err := templates.ParseTags(g.Tags)
		if err != nil {
			fail("tags: %v", err)
		}
		l.Mapper = spark.NewMapper(spark.Options{Prefixes: g.SparkPrefixes, GlobalTags: tags})
		l.Describe = []string{"built-in Spark mapping (no templates configured)"}
		if len(g.SparkPrefixes) > 0 {
			l.Describe = append(l.Describe, fmt.Sprintf("known GraphiteSink prefixes: %q", g.SparkPrefixes))
		}
		if len(g.Tags) > 0 {
			l.Describe = append(l.Describe, fmt.Sprintf("global tags: %q", g.Tags))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return l, nil
}

// tcpConfig and udpConfig translate a block into listener settings.
func (l *Listener) tcpConfig() graphite.TCPConfig {
	return graphite.TCPConfig{
		Addr:           l.Config.BindAddress,
		MaxLineLength:  l.Config.MaxLineLength,
		IdleTimeout:    time.Duration(l.Config.IdleTimeout),
		MaxConnections: l.Config.MaxConnections,
	}
}

func (l *Listener) udpConfig() graphite.UDPConfig {
	return graphite.UDPConfig{
		Addr:          l.Config.BindAddress,
		ReadBuffer:    l.Config.UDPReadBuffer,
		MaxLineLength: l.Config.MaxLineLength,
	}
}

// defaultConfig is what runs without a config file: the built-in Spark
// mapping on TCP and UDP port 2003, as Spark's GraphiteSink can use either.
func defaultConfig() *Config {
	return &Config{Graphite: []GraphiteConfig{
		{Protocol: "tcp"},
		{Protocol: "udp"},
	}}
}

// Delta defaults, documented in the README.
const (
	defaultFirstSampleGrace = 20 * time.Second // two of Spark's default 10 s periods
	defaultIdleTTL          = 15 * time.Minute
	defaultMaxSeries        = 1_000_000
)

// prepareDeltas validates the delta settings and compiles the rules: the
// [[delta]] blocks in order, then the built-in Spark rules.
func (c *Config) prepareDeltas(p *Plan, source string) error {
	d := c.Deltas
	var errs []error
	s := delta.Settings{
		FirstSampleGrace: defaultFirstSampleGrace,
		IdleTTL:          time.Duration(d.IdleTTL),
		MaxSeries:        d.MaxSeries,
	}
	if d.FirstSampleGrace != nil {
		s.FirstSampleGrace = time.Duration(*d.FirstSampleGrace)
		if s.FirstSampleGrace == 0 {
			s.FirstSampleGrace = delta.NoGrace
		}
	}
	if s.IdleTTL == 0 {
		s.IdleTTL = defaultIdleTTL
	}
	if s.MaxSeries == 0 {
		s.MaxSeries = defaultMaxSeries
	}
	if s.MaxSeries < 0 {
		errs = append(errs, fmt.Errorf("%s: [deltas] max-series %d: must be positive", source, s.MaxSeries))
	}
	var rules []delta.Rule
	for i, r := range c.Delta {
		where := fmt.Sprintf("%s: [[delta]] #%d", source, i+1)
		if len(r.Path) == 0 && len(r.Measurement) == 0 {
			errs = append(errs, fmt.Errorf("%s: needs path or measurement patterns", where))
			continue
		}
		cumulative := r.Cumulative == nil || *r.Cumulative
		rules = append(rules, delta.Rule{Path: r.Path, Measurement: r.Measurement, Cumulative: cumulative, Unit: r.Unit, Source: where})
	}
	user := len(rules)
	if d.SparkRules == nil || *d.SparkRules {
		rules = append(rules, spark.DeltaRules()...)
	}
	compiled, err := delta.CompileRules(rules)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Rules are validated even when the stage is off, as disabled
	// [[graphite]] blocks are: turning it on must not reveal old errors.
	if d.Enabled != nil && !*d.Enabled {
		p.DeltaDescribe = []string{"off"}
		return nil
	}
	p.DeltaRules, p.DeltaSettings = compiled, s
	grace := s.FirstSampleGrace.String()
	if s.FirstSampleGrace == delta.NoGrace {
		grace = "none"
	}
	p.DeltaDescribe = []string{fmt.Sprintf("%d [[delta]] rules, then %d built-in Spark rules; first-sample-grace %s, idle-ttl %s, max-series %d",
		user, len(rules)-user, grace, s.IdleTTL, s.MaxSeries)}
	for _, r := range rules[:user] {
		kind := "cumulative"
		if !r.Cumulative {
			kind = "not cumulative"
		}
		p.DeltaDescribe = append(p.DeltaDescribe, fmt.Sprintf("%s: %s, path %q, measurement %q, unit %q", r.Source, kind, r.Path, r.Measurement, r.Unit))
	}
	return nil
}

// secret resolves a secret: the environment beats a file, which beats the
// config. A file's trailing newline is not part of it, and a file any user
// can read is warned about.
func (p *Plan) secret(env, file, inline string) (string, error) {
	switch {
	case env != "":
		return env, nil
	case file != "":
		if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o004 != 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("secret file %s is readable by every user (mode %04o): chmod 600 it", file, st.Mode().Perm()))
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return inline, nil
}

// warnReadable warns when the config file at source holds the secret key
// inline and any user can read it.
func (p *Plan) warnReadable(source, key, env string) {
	st, err := os.Stat(source)
	if err != nil || st.Mode().Perm()&0o004 == 0 {
		return
	}
	p.Warnings = append(p.Warnings, fmt.Sprintf("%s holds %s and is readable by every user (mode %04o): move the secret to env %s or a file of mode 0600, or chmod 600 %s",
		source, key, st.Mode().Perm(), env, source))
}

// prepareAnnotate validates the [annotate] section and resolves its
// secrets: env beats a file, which beats the config.
func (c *Config) prepareAnnotate(p *Plan, source string, getenv func(string) string) error {
	a := c.Annotate
	if len(a.URLs) == 0 {
		return nil
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: [annotate] "+format, append([]any{source}, args...)...))
	}
	for i, u := range a.URLs {
		if err := annotate.CheckSource(u); err != nil {
			fail("urls entry %d %q: %v", i+1, influx.RedactURL(u), err)
		}
	}
	if a.Interval == 0 {
		a.Interval = Duration(annotate.DefaultInterval)
	}
	if time.Duration(a.Interval) < time.Second {
		fail("interval %s: must be at least 1s", time.Duration(a.Interval))
	}
	if a.Timeout == 0 {
		a.Timeout = Duration(annotate.DefaultTimeout)
	}
	if a.Lookback == 0 {
		a.Lookback = Duration(annotate.DefaultLookback)
	}
	if a.MaxText == 0 {
		a.MaxText = annotate.DefaultMaxText
	}
	if a.MaxText < 20 {
		fail("max-text %d: must be at least 20", a.MaxText)
	}
	if a.AppIDTag == "" {
		a.AppIDTag = "applicationid"
	}
	auth := annotate.Auth{Username: a.Username}
	var err error
	if auth.Password, err = p.secret(getenv(envAnnotatePassword), a.PasswordFile, a.Password); err != nil {
		fail("password-file: %v", err)
	}
	if auth.Token, err = p.secret(getenv(envAnnotateToken), a.TokenFile, a.Token); err != nil {
		fail("token-file: %v", err)
	}
	if a.Password != "" {
		p.warnReadable(source, "[annotate] password", envAnnotatePassword)
	}
	if a.Token != "" {
		p.warnReadable(source, "[annotate] token", envAnnotateToken)
	}
	if auth.Token != "" && auth.Username != "" {
		fail("username and token: choose basic auth or a bearer token")
	}
	if auth.Password != "" && auth.Username == "" {
		fail("a password needs a username")
	}
	a.Password, a.Token = "", ""
	plan := &AnnotatePlan{Config: a, Auth: auth, AppIDTag: a.AppIDTag}
	if plan.Target, err = target(a.Bucket, a.Database, a.RetentionPolicy, p.defaultTarget()); err != nil {
		fail("%v", err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	p.Annotate = plan
	return nil
}

// target is where a section's points go: its bucket, else its database
// and retention policy (written as the 1.x bucket "db/rp"), else def.
func target(bucket, database, rp string, def influx.Target) (influx.Target, error) {
	switch {
	case bucket != "":
		return influx.Target{Bucket: bucket}, nil
	case database != "" && rp != "":
		return influx.Target{Bucket: database + "/" + rp}, nil
	case database != "":
		return influx.Target{Bucket: database}, nil
	case rp != "":
		return def, errors.New("retention-policy needs database")
	}
	return def, nil
}

// defaultTarget is the first [[graphite]] block's target, where sections
// without their own send their points.
func (p *Plan) defaultTarget() influx.Target {
	if len(p.Listeners) == 0 {
		return influx.Target{}
	}
	return p.Listeners[0].Target
}

// Internal-metrics defaults.
const defaultInternalInterval = 10 * time.Second

// prepareInternal validates the [internal] section.
func (c *Config) prepareInternal(p *Plan, source string) error {
	in := c.Internal
	if in.Enabled != nil && !*in.Enabled {
		return nil
	}
	if in.Interval == 0 {
		in.Interval = Duration(defaultInternalInterval)
	}
	if time.Duration(in.Interval) < time.Second {
		return fmt.Errorf("%s: [internal] interval %s: must be at least 1s", source, time.Duration(in.Interval))
	}
	t, err := target(in.Bucket, in.Database, in.RetentionPolicy, p.defaultTarget())
	if err != nil {
		return fmt.Errorf("%s: [internal] %w", source, err)
	}
	p.Internal = &InternalPlan{Interval: time.Duration(in.Interval), Target: t}
	return nil
}
