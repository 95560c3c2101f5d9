package annotate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Application is what Spark's REST API says of one application attempt's
// executors and settings, for sizing.
type Application struct {
	ID, Name, AttemptID string
	Source              string // the base URL that answered
	Completed           bool
	Properties          map[string]string // the environment's sparkProperties
	Executors           []Executor        // the driver and every executor, removed ones too
}

// Executor is an entry of allexecutors.
type Executor struct {
	ID, HostPort  string
	Active        bool
	Cores         int
	TaskTimeMs    int64
	GCTimeMs      int64
	RemoveReason  string
	Peaks         map[string]int64 // peakMemoryMetrics
	Added, Remove int64            // epoch ms; Remove 0 while active
}

// ReadApplication asks the sources of cfg, in order, for application
// appID and returns the first answer: its newest attempt's Spark
// properties and executors. Templates are filled with appID. Only the
// sources, timeout, auth and transport of cfg are used.
func ReadApplication(ctx context.Context, cfg Config, appID string) (Application, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	p := &Poller{cfg: cfg, client: &http.Client{Transport: cfg.Transport}}
	var errs []error
	for _, s := range cfg.Sources {
		if err := CheckSource(s); err != nil {
			return Application{}, fmt.Errorf("source %q: %w", s, err)
		}
		base := strings.TrimRight(strings.ReplaceAll(s, "{app_id}", url.PathEscape(appID)), "/")
		app, err := p.readApplication(ctx, base, appID)
		if err == nil {
			return app, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return Application{}, errors.New("no Spark REST source: give --url or [annotate] urls")
	}
	return Application{}, fmt.Errorf("application %s: %w", appID, errors.Join(errs...))
}

func (p *Poller) readApplication(ctx context.Context, base, appID string) (Application, error) {
	var app apiApp
	root := base + "/api/v1/applications/" + url.PathEscape(appID)
	if err := p.get(ctx, root, &app); err != nil {
		return Application{}, err
	}
	if len(app.Attempts) == 0 {
		return Application{}, fmt.Errorf("%s: no attempts", root)
	}
	att := app.Attempts[0] // Spark lists the newest first
	out := Application{ID: app.ID, Name: app.Name, AttemptID: att.AttemptID, Source: base, Completed: att.Completed}
	if att.AttemptID != "" {
		root += "/" + url.PathEscape(att.AttemptID)
	}
	var env environment
	if err := p.get(ctx, root+"/environment", &env); err != nil {
		return Application{}, err
	}
	out.Properties = env.properties()
	var execs []apiExecutor
	if err := p.get(ctx, root+"/allexecutors", &execs); err != nil {
		return Application{}, err
	}
	for _, x := range execs {
		out.Executors = append(out.Executors, Executor{ID: x.ID, HostPort: x.HostPort, Active: x.IsActive, Cores: x.TotalCores,
			TaskTimeMs: x.TotalDuration, GCTimeMs: x.TotalGCTime, RemoveReason: x.RemoveReason, Peaks: x.PeakMemoryMetrics,
			Added: optMS(x.AddTime), Remove: optMS(x.RemoveTime)})
	}
	return out, nil
}
