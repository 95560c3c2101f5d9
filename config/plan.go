package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/annotate"
	"github.com/sparkpulse/sparkpulse/delta"
	"github.com/sparkpulse/sparkpulse/graphite"
	"github.com/sparkpulse/sparkpulse/human"
	"github.com/sparkpulse/sparkpulse/influx"
	"github.com/sparkpulse/sparkpulse/influxql"
	"github.com/sparkpulse/sparkpulse/ingestlog"
	"github.com/sparkpulse/sparkpulse/queue"
	"github.com/sparkpulse/sparkpulse/relay"
	"github.com/sparkpulse/sparkpulse/schema"
	"github.com/sparkpulse/sparkpulse/spark"
	"github.com/sparkpulse/sparkpulse/templates"
)

// Plan is the whole validated configuration: what `run` starts and `check`
// describes. Making it reads secret and certificate files, and opens no
// socket.
type Plan struct {
	Source         string        // the config file, or "default config"
	Influx         influx.Config // token and TLS resolved; Queue.Dir is set per writer
	CreateDatabase bool
	AdminAddr      string // "" turns the admin endpoint off
	Pprof          bool
	Log            LogConfig
	StateDir       string
	MaxFuture      time.Duration // lines dated later after their receive time are dropped
	Deltas         *DeltaPlan    // nil when the delta stage is off
	Annotate       *AnnotatePlan // nil without [annotate] urls
	Internal       *InternalPlan // nil when [internal] is disabled
	Listeners      []*Listener
	// Warnings are problems that do not stop the service, such as a
	// secret others can read; logged at start and shown by `check`.
	Warnings []string
	// origins says where each setting came from, for errors and hints.
	origins origins
}

// DeltaPlan is the validated delta stage.
type DeltaPlan struct {
	Rules     *delta.Rules
	Settings  delta.Settings
	UserRules []delta.Rule // from [[delta]] blocks, before the built-in ones
	// IngestLogBytes bounds the ingest log (with state-dir).
	IngestLogBytes int64
}

// Listener is a validated, compiled [[graphite]] block, ready to start.
type Listener struct {
	Index  int            // position in the file, from 1
	Config GraphiteConfig // as written, with bind-address, protocol and database filled in
	Mapper relay.Mapper
	// Templates is the block's template engine; nil when it runs the
	// built-in Spark mapping.
	Templates *templates.Engine
	// Schema is the built-in mapping's shape; meaningless with Templates.
	Schema schema.Shape
	Target influx.Target
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

// TCP and UDP are the block's listener settings.
func (l *Listener) TCP() graphite.TCPConfig {
	return graphite.TCPConfig{
		Addr:           l.Config.BindAddress,
		MaxLineLength:  l.Config.MaxLineLength,
		IdleTimeout:    time.Duration(l.Config.IdleTimeout),
		MaxConnections: l.Config.MaxConnections,
		MaxHeldBytes:   l.Config.MaxHeldBytes,
	}
}

func (l *Listener) UDP() graphite.UDPConfig {
	return graphite.UDPConfig{
		Addr:          l.Config.BindAddress,
		ReadBuffer:    l.Config.UDPReadBuffer,
		MaxLineLength: l.Config.MaxLineLength,
	}
}

// Writer is the block's writer settings: the service's, with the block's
// batching.
func (l *Listener) Writer(base influx.Config) influx.Config {
	base.BatchSize = l.Config.BatchSize
	base.BatchTimeout = time.Duration(l.Config.BatchTimeout)
	return base
}

// InternalPlan is the validated [internal] section.
type InternalPlan struct {
	Interval time.Duration
	Target   influx.Target
}

// AnnotatePlan is the validated [annotate] section.
type AnnotatePlan struct {
	Poller   annotate.Config // without Sink, History, Log and Now
	Target   influx.Target
	History  *influx.Target // spark_app_history's, nil when none
	AppIDTag string
}

// ErrUsage marks an error in how the flags were combined, which the
// command reports as a usage error.
var ErrUsage = errors.New("usage")

// Load reads the config (or the default one), lays the environment and
// then the flags over it, once, and validates it all. Every problem is
// reported at once, each starting with where its value came from.
func Load(o *Overrides, getenv func(string) string) (*Plan, error) {
	cfg, source, loadErr := loadLayers(o, getenv)
	if cfg == nil {
		return nil, loadErr
	}
	plan, err := cfg.prepare(source, getenv)
	if err := errors.Join(loadErr, err); err != nil {
		return nil, err
	}
	return plan, nil
}

// AdminAddr is the admin endpoint's address the layers give ("" when it
// is off) and where it came from, without validating the rest: what a
// client of the running service, such as a health check, needs.
func AdminAddr(o *Overrides, getenv func(string) string) (addr, from string, err error) {
	cfg, source, err := loadLayers(o, getenv)
	if err != nil {
		return "", "", err
	}
	return cfg.Admin.addr(), cfg.origins.at(source, "admin.bind-address"), nil
}

// loadLayers reads the config file named by --config or SPARKPULSE_CONFIG
// (else the default config) and lays the environment and the flags over
// it, without validating the result. It returns the config with the
// errors when some values were bad, nil when there is nothing to validate.
func loadLayers(o *Overrides, getenv func(string) string) (*Config, string, error) {
	path, from := o.Config, "--config"
	if path == "" {
		path, from = getenv(EnvConfig), EnvConfig
	}
	cfg, source := defaultConfig(), "default config"
	var errs []error
	if path != "" {
		if o.Bind != "" {
			return nil, "", fmt.Errorf("%w: --bind applies to the default listeners only; set bind-address in %s (from %s)", ErrUsage, path, from)
		}
		c, _, err := loadConfig(path, getenv)
		if c == nil {
			return nil, "", err
		}
		cfg, source = c, path
		errs = append(errs, err)
	}
	errs = append(errs, cfg.applyEnv(getenv, path == ""))
	cfg.applyFlags(o)
	return cfg, source, errors.Join(errs...)
}

// prepare validates everything and compiles each block's templates. All
// problems are reported at once, each naming where the value came from
// (file:line:col, the variable or the flag), the section and the key.
// getenv is read for secrets only.
func (c *Config) prepare(source string, getenv func(string) string) (*Plan, error) {
	p := &Plan{Source: source, StateDir: c.StateDir, CreateDatabase: c.InfluxDB.CreateDatabase, MaxFuture: delta.DefaultMaxFuture, origins: c.origins}
	if p.origins == nil {
		p.origins = origins{}
	}
	if c.MaxFuture > 0 {
		p.MaxFuture = time.Duration(c.MaxFuture)
	}
	errs := []error{
		c.prepareInflux(p, getenv),
		c.prepareAdminAndLog(p),
		c.prepareDeltas(p),
		c.prepareListeners(p),
	}
	// These default to the first block's target.
	errs = append(errs, c.prepareAnnotate(p, getenv), c.prepareInternal(p))
	for _, l := range p.Listeners {
		if l.Config.CheckPeer && p.Annotate == nil {
			errs = append(errs, fmt.Errorf("%s: [[graphite]] #%d check-peer: needs [annotate] urls, where Spark lists each process's address",
				p.Origin(blockKey("graphite", l.Index, "check-peer")), l.Index))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Origin is where key's value came from, to start an error or a warning
// about it: file:line:col, VARIABLE=value or --flag; else where its
// section or block is, else the source. Keys are TOML paths, a block's
// with its position from 1: "influxdb.url", "graphite.2.schema".
func (p *Plan) Origin(key string) string { return p.origins.at(p.Source, key) }

// CreateDatabaseOrigin says where create-database = true was set.
func (p *Plan) CreateDatabaseOrigin() string {
	o, ok := p.origins["influxdb.create-database"]
	switch {
	case !ok:
		return "create-database = true"
	case o.flag != "":
		return o.flag
	case o.env != "":
		return o.String()
	}
	return "create-database = true at " + o.String()
}

// CreateDatabaseHint says how to have a missing InfluxDB 1.x database
// created: the flag or variable to set, or the key where the file set it
// false; the file's key only when there is a file.
func (p *Plan) CreateDatabaseHint() string {
	switch o, ok := p.origins["influxdb.create-database"]; {
	case ok && o.line > 0:
		return fmt.Sprintf("set create-database = true at %s (it is false)", o)
	case ok && o.env != "":
		return fmt.Sprintf("set %s=true (it is %s)", o.env, o.value)
	case p.Source != "default config":
		return fmt.Sprintf("run with --create-database, set %s=true, or add create-database = true to [influxdb] in %s", EnvCreateDatabase, p.Source)
	}
	return fmt.Sprintf("run with --create-database or set %s=true", EnvCreateDatabase)
}

// sectionErrors collects a section's errors, each starting with the origin
// of the key it names.
type sectionErrors struct {
	p       *Plan
	section string // "influxdb"; "graphite.2" for a block
	what    string // "[influxdb] "; `[[graphite]] #2 (bind-address ":2003"): `
	keys    []string
	errs    []error
}

func (p *Plan) sectionErrors(section, keysOf, what string) *sectionErrors {
	return &sectionErrors{p: p, section: section, what: what, keys: sectionKeys(keysOf)}
}

// fail adds an error about key ("" for the section itself).
func (s *sectionErrors) fail(key, format string, a ...any) {
	k := s.section
	if key != "" {
		k += "." + key
	}
	s.errs = append(s.errs, fmt.Errorf("%s: %s"+format, append([]any{s.p.Origin(k), s.what}, a...)...))
}

// add adds a package's validation errors, each naming its key first.
func (s *sectionErrors) add(err error) {
	s.errs = append(s.errs, s.p.origins.keyedErrors(s.p.Source, s.section, s.what, s.keys, err)...)
}

func (s *sectionErrors) err() error { return errors.Join(s.errs...) }

// prepareInflux validates [influxdb] and resolves its token and TLS files.
func (c *Config) prepareInflux(p *Plan, getenv func(string) string) error {
	in := c.InfluxDB
	e := p.sectionErrors("influxdb", "influxdb", "[influxdb] ")
	gzip, err := influx.ParseGzip(in.Gzip)
	if err != nil {
		e.fail("gzip", "%v", err)
	}
	p.Influx = influx.Config{
		URL: in.URL, Org: in.Org, Gzip: gzip,
		MaxInFlight:    in.MaxInFlight,
		RequestTimeout: time.Duration(in.Timeout),
		Queue:          queue.Config{MaxBytes: in.MaxQueueBytes, MaxDiskBytes: in.MaxDiskQueueBytes},
	}
	if err := p.Influx.Validate(); err != nil {
		e.add(err)
	}
	if q := p.Influx.Queue; q.MaxBytes > 0 && q.MaxBytes < queue.SaneMaxBytes {
		e.fail("max-queue-bytes", "max-queue-bytes %d (%s): must be at least %d (%s)", q.MaxBytes, human.Bytes(int64(q.MaxBytes)), queue.SaneMaxBytes, human.Bytes(int64(queue.SaneMaxBytes)))
	}
	if q := p.Influx.Queue; q.MaxDiskBytes > 0 && q.MaxDiskBytes < queue.SaneMaxDiskBytes {
		e.fail("max-disk-queue-bytes", "max-disk-queue-bytes %d (%s): must be at least %d (%s)", q.MaxDiskBytes, human.Bytes(q.MaxDiskBytes), queue.SaneMaxDiskBytes, human.Bytes(int64(queue.SaneMaxDiskBytes)))
	}
	if (in.TLSCert == "") != (in.TLSKey == "") {
		key := "tls-key"
		if in.TLSKey != "" {
			key = "tls-cert"
		}
		e.fail(key, "tls-cert and tls-key go together")
	}
	if p.Influx.TLS, err = loadTLS(in.TLSCA, in.TLSCert, in.TLSKey, in.TLSInsecureSkipVerify); err != nil {
		e.add(err)
	}
	if p.Influx.Token, err = p.secret(getenv(EnvToken), in.TokenFile, in.Token); err != nil {
		e.fail("token-file", "token-file: %v", err)
	}
	if in.Token != "" {
		p.warnReadable("[influxdb] token", EnvToken)
	}
	return e.err()
}

// prepareAdminAndLog validates [admin] and [log].
func (c *Config) prepareAdminAndLog(p *Plan) error {
	admin := p.sectionErrors("admin", "admin", "[admin] ")
	p.AdminAddr, p.Pprof = c.Admin.addr(), c.Admin.Pprof
	if p.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(p.AdminAddr); err != nil {
			admin.fail("bind-address", "bind-address %q: %v", p.AdminAddr, err)
		}
	}
	log := p.sectionErrors("log", "log", "[log] ")
	p.Log = c.Log
	switch p.Log.Format {
	case "":
		p.Log.Format = DefaultLogFormat
	case "console", "json":
	default:
		log.fail("format", "format %q: must be console or json", p.Log.Format)
	}
	switch p.Log.Level {
	case "":
		p.Log.Level = DefaultLogLevel
	case "debug", "info", "warn", "error":
	default:
		log.fail("level", "level %q: must be debug, info, warn or error", p.Log.Level)
	}
	return errors.Join(admin.err(), log.err())
}

// addr is the admin endpoint's address: [admin] bind-address, or the
// default; "" when it is off.
func (a AdminConfig) addr() string {
	if a.BindAddress != nil {
		return *a.BindAddress
	}
	return DefaultAdminAddr
}

// prepareListeners compiles the [[graphite]] blocks. Disabled blocks are
// validated like influxd does, but not run.
func (c *Config) prepareListeners(p *Plan) error {
	var errs []error
	binds := map[string]int{}
	for i, g := range c.Graphite {
		l, err := g.compile(p, i+1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !*l.Config.Enabled {
			continue
		}
		// Port 0 asks the kernel for a free port: never a conflict.
		_, port, _ := net.SplitHostPort(l.Config.BindAddress)
		if prev, ok := binds[l.Name()]; ok && port != "0" {
			errs = append(errs, fmt.Errorf("%s: [[graphite]] #%d: bind-address %q with protocol %s is already used by block #%d",
				p.Origin(blockKey("graphite", i+1, "bind-address")), i+1, l.Config.BindAddress, l.Config.Protocol, prev))
			continue
		}
		binds[l.Name()] = l.Index
		p.Listeners = append(p.Listeners, l)
	}
	if len(errs) == 0 && len(p.Listeners) == 0 {
		errs = append(errs, fmt.Errorf("%s: no enabled [[graphite]] block: nothing to listen on", p.Source))
	}
	return errors.Join(errs...)
}

// compile validates the index-th block (from 1) and builds its mapper.
func (g GraphiteConfig) compile(p *Plan, index int) (*Listener, error) {
	if g.Enabled == nil {
		on := true
		g.Enabled = &on
	}
	if g.BindAddress == "" {
		g.BindAddress = DefaultBindAddr
	}
	if g.Database == "" {
		g.Database = DefaultDatabase
	}
	if g.Separator == "" {
		g.Separator = "."
	}
	e := p.sectionErrors(blockKey("graphite", index, ""), "graphite", fmt.Sprintf("[[graphite]] #%d (bind-address %q): ", index, g.BindAddress))
	if _, _, err := net.SplitHostPort(g.BindAddress); err != nil {
		e.fail("bind-address", "bind-address: %v", err)
	}
	switch proto := strings.ToLower(g.Protocol); proto {
	case "", "tcp", "udp":
		g.Protocol = cmpOr(proto, "tcp")
	default:
		e.fail("protocol", "protocol %q: must be tcp or udp", g.Protocol)
	}
	l := &Listener{Index: index, Config: g}
	l.Target, _ = target(g.Bucket, g.Database, g.RetentionPolicy, influx.Target{})
	for _, err := range []error{l.TCP().Validate(), l.UDP().Validate(), l.Writer(influx.Config{}).Validate()} {
		if err != nil {
			e.add(err)
		}
	}
	if g.MaxCachedSeries < 0 {
		e.fail("max-cached-series", "max-cached-series %d: must not be negative", g.MaxCachedSeries)
	}
	if g.CheckPeer && g.Protocol == "udp" {
		e.fail("check-peer", "check-peer: UDP has no sender to check (a datagram's source address can be forged); use it on TCP blocks")
	}
	if err := l.compileMapper(); err != nil {
		key := "templates"
		switch {
		case strings.HasPrefix(err.Error(), "tags"):
			key = "tags"
		case strings.HasPrefix(err.Error(), "spark-prefixes"):
			key = "spark-prefixes"
		case strings.HasPrefix(err.Error(), "schema"):
			key = "schema"
		}
		e.fail(key, "%w", err)
	}
	return l, e.err()
}

// compileMapper builds the block's templates, or the built-in Spark
// mapping when it has none.
func (l *Listener) compileMapper() error {
	g := l.Config
	if len(g.Templates) == 0 {
		schema, err := schema.ParseShape(g.Schema)
		if err != nil {
			return fmt.Errorf("schema: %w", err)
		}
		tags, err := templates.ParseTags(g.Tags)
		if err != nil {
			return fmt.Errorf("tags: %w", err)
		}
		l.Schema = schema
		l.Mapper = spark.NewMapper(spark.Options{Prefixes: g.SparkPrefixes, GlobalTags: tags, Schema: schema})
		return nil
	}
	if len(g.SparkPrefixes) > 0 {
		return errors.New("spark-prefixes applies to the built-in Spark mapping only; this block has templates")
	}
	if g.Schema != "" {
		return errors.New("schema applies to the built-in Spark mapping only; this block has templates, which set the shape themselves")
	}
	eng, err := templates.Compile(g.Templates, g.Separator, g.Tags)
	if err != nil {
		return err
	}
	l.Mapper, l.Templates = eng, eng
	return nil
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// prepareDeltas validates the delta settings and compiles the rules: the
// [[delta]] blocks in order, then the built-in Spark rules. Rules are
// validated even when the stage is off, as disabled [[graphite]] blocks
// are: turning it on must not reveal old errors.
func (c *Config) prepareDeltas(p *Plan) error {
	d := c.Deltas
	e := p.sectionErrors("deltas", "deltas", "[deltas] ")
	s := delta.Settings{IdleTTL: time.Duration(d.IdleTTL), MaxSeries: d.MaxSeries, MaxSeriesPerApp: d.MaxSeriesPerApp, MaxFuture: p.MaxFuture}
	if d.FirstSampleGrace != nil {
		if s.FirstSampleGrace = time.Duration(*d.FirstSampleGrace); s.FirstSampleGrace == 0 {
			s.FirstSampleGrace = delta.NoGrace // "0s": every first sample is new
		}
	}
	if err := s.Validate(); err != nil {
		e.add(err)
	}
	logBytes := d.MaxIngestLogBytes
	switch {
	case logBytes == 0:
		logBytes = ingestlog.DefaultMaxBytes
	case logBytes < ingestlog.MinMaxBytes:
		e.fail("max-ingest-log-bytes", "max-ingest-log-bytes %d: must be at least %d (a minute of a busy block's lines)", logBytes, int64(ingestlog.MinMaxBytes))
	}
	errs := e.errs
	var rules []delta.Rule
	for i, r := range c.Delta {
		where := fmt.Sprintf("%s: [[delta]] #%d", p.Origin(blockKey("delta", i+1, "")), i+1)
		if len(r.Path) == 0 && len(r.Measurement) == 0 {
			errs = append(errs, fmt.Errorf("%s: needs path or measurement patterns", where))
			continue
		}
		cumulative := r.Cumulative == nil || *r.Cumulative
		rules = append(rules, delta.Rule{Path: r.Path, Measurement: r.Measurement, Cumulative: cumulative, Unit: r.Unit, Source: where})
	}
	user := rules
	if d.SparkRules == nil || *d.SparkRules {
		rules = append(rules[:len(rules):len(rules)], spark.DeltaRules()...)
	}
	compiled, err := delta.CompileRules(rules)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 || d.Enabled != nil && !*d.Enabled {
		return errors.Join(errs...)
	}
	p.Deltas = &DeltaPlan{Rules: compiled, Settings: s.WithDefaults(), UserRules: user, IngestLogBytes: logBytes}
	return nil
}

// prepareAnnotate validates the [annotate] section and resolves its
// secrets.
func (c *Config) prepareAnnotate(p *Plan, getenv func(string) string) error {
	a := c.Annotate
	if len(a.URLs) == 0 {
		return nil
	}
	e := p.sectionErrors("annotate", "annotate", "[annotate] ")
	for i, u := range a.URLs {
		if err := annotate.CheckSource(u); err != nil {
			e.fail("urls", "urls entry %d %q: %v", i+1, influx.RedactURL(u), err)
		}
	}
	pc := annotate.Config{Sources: a.URLs, Interval: time.Duration(a.Interval), Timeout: time.Duration(a.Timeout),
		Lookback: time.Duration(a.Lookback), MaxText: a.MaxText,
		MaxResponseBytes: a.MaxResponseBytes, MaxApps: a.MaxApps, NewAppsPerPoll: a.NewAppsPerPoll,
		StageDetailsMinDuration: time.Duration(a.StageDetailsMinDuration), StageDetailsRequests: a.StageDetailsRequests,
		FailedTasksPerStage: a.FailedTasksPerStage, UsageDelay: time.Duration(a.UsageDelay), StreamRetry: time.Duration(a.StreamRetry),
		CloseOutAfter: time.Duration(a.CloseOutAfter), LostDriverAfter: time.Duration(a.LostDriverAfter)}
	if err := pc.Validate(); err != nil {
		e.add(err)
	}
	auth, err := p.annotateAuth(a, getenv)
	if err != nil {
		e.add(err)
	}
	pc.Auth = auth
	tlsConf, err := loadTLS(a.TLSCA, "", "", a.TLSInsecureSkipVerify)
	if err != nil {
		e.add(err)
	}
	pc.Transport = sourceTransport(tlsConf)
	plan := &AnnotatePlan{Poller: pc, AppIDTag: cmpOr(a.AppIDTag, schema.TagApplicationID)}
	if plan.Target, err = target(a.Bucket, a.Database, a.RetentionPolicy, p.DefaultTarget()); err != nil {
		e.add(err)
	}
	if a.HistoryBucket != "" || a.HistoryDatabase != "" || a.HistoryRetentionPolicy != "" {
		db := a.HistoryDatabase
		if db == "" && a.HistoryBucket == "" {
			db, _, _ = strings.Cut(plan.Target.Bucket, "/") // the annotations' database
		}
		h, err := target(a.HistoryBucket, db, a.HistoryRetentionPolicy, influx.Target{})
		switch {
		case err != nil:
			e.fail("history-retention-policy", "history-%v", err)
		case h == plan.Target:
			e.fail(historyKey(a), "%s is where the annotations go: the history is for a target that keeps it longer (a retention policy or bucket of its own)", h.Bucket)
		case p.CreateDatabase && a.HistoryBucket == "" && a.HistoryRetentionPolicy != "" && sameDatabase(h, plan.Target):
			// InfluxDB 1.x's way, which create-database follows: a
			// retention policy created in an existing database becomes
			// its default, where the annotations without one would go.
			e.fail(historyKey(a), "with create-database, retention policy %q would be created as the default of database %q, where the annotations go; create it yourself (CREATE RETENTION POLICY %s ON %s DURATION 0s REPLICATION 1) or give the history a database of its own (history-database)",
				a.HistoryRetentionPolicy, db, influxql.QuoteIdent(a.HistoryRetentionPolicy), influxql.QuoteIdent(db))
		default:
			plan.History = &h
		}
	}
	if len(e.errs) > 0 {
		return e.err()
	}
	p.Annotate = plan
	return nil
}

// sameDatabase reports whether two 1.x targets ("db" or "db/rp") are in
// one database.
func sameDatabase(a, b influx.Target) bool {
	da, _, _ := strings.Cut(a.Bucket, "/")
	db, _, _ := strings.Cut(b.Bucket, "/")
	return da == db
}

// historyKey is the history-* key that names the history's target, for
// an error about it.
func historyKey(a AnnotateConfig) string {
	switch {
	case a.HistoryBucket != "":
		return "history-bucket"
	case a.HistoryRetentionPolicy != "":
		return "history-retention-policy"
	}
	return "history-database"
}

// annotateAuth resolves the Spark sources' credentials: env beats a file,
// which beats the config.
func (p *Plan) annotateAuth(a AnnotateConfig, getenv func(string) string) (annotate.Auth, error) {
	auth := annotate.Auth{Username: a.Username}
	var err error
	if auth.Password, err = p.secret(getenv(envAnnotatePassword), a.PasswordFile, a.Password); err != nil {
		return auth, fmt.Errorf("password-file: %w", err)
	}
	if auth.Token, err = p.secret(getenv(envAnnotateToken), a.TokenFile, a.Token); err != nil {
		return auth, fmt.Errorf("token-file: %w", err)
	}
	if a.Password != "" {
		p.warnReadable("[annotate] password", envAnnotatePassword)
	}
	if a.Token != "" {
		p.warnReadable("[annotate] token", envAnnotateToken)
	}
	if auth.Token != "" && auth.Username != "" {
		return auth, errors.New("username and token: choose basic auth or a bearer token")
	}
	if auth.Password != "" && auth.Username == "" {
		return auth, errors.New("a password needs a username")
	}
	return auth, nil
}

// prepareInternal validates the [internal] section.
func (c *Config) prepareInternal(p *Plan) error {
	in := c.Internal
	if in.Enabled != nil && !*in.Enabled {
		return nil
	}
	interval := cmpDur(time.Duration(in.Interval), defaultInternalInterval)
	e := p.sectionErrors("internal", "internal", "[internal] ")
	if interval < time.Second {
		e.fail("interval", "interval %s: must be at least 1s", interval)
	}
	t, err := target(in.Bucket, in.Database, in.RetentionPolicy, p.DefaultTarget())
	if err != nil {
		e.add(err)
	}
	if len(e.errs) > 0 {
		return e.err()
	}
	p.Internal = &InternalPlan{Interval: interval, Target: t}
	return nil
}

func cmpDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
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

// DefaultTarget is the first [[graphite]] block's target, where sections
// without their own send their points.
func (p *Plan) DefaultTarget() influx.Target {
	if len(p.Listeners) == 0 {
		return influx.Target{}
	}
	return p.Listeners[0].Target
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

// warnReadable warns when the config file holds the secret key inline and
// any user can read it.
func (p *Plan) warnReadable(key, env string) {
	st, err := os.Stat(p.Source)
	if err != nil || st.Mode().Perm()&0o004 == 0 {
		return
	}
	p.Warnings = append(p.Warnings, fmt.Sprintf("%s holds %s and is readable by every user (mode %04o): move the secret to env %s or a file of mode 0600, or chmod 600 %s",
		p.Source, key, st.Mode().Perm(), env, p.Source))
}

// sourceTransport carries requests to Spark sources, with the [annotate]
// TLS settings.
func sourceTransport(t *tls.Config) http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = t
	return tr
}

// loadTLS builds a client TLS configuration from a section's settings, or
// returns nil when they are all unset.
func loadTLS(ca, cert, key string, insecure bool) (*tls.Config, error) {
	if ca == "" && cert == "" && !insecure {
		return nil, nil
	}
	t := &tls.Config{InsecureSkipVerify: insecure} //nolint:gosec // only when the operator asks for it
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca %q: no PEM certificate found", ca)
		}
		t.RootCAs = pool
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls-cert/tls-key: %w", err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	return t, nil
}
