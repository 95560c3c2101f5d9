package annotate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// executorSizing is what package sizing needs of an executor.
func executorSizing(x *sparkapi.Executor) sizing.Executor {
	return sizing.Executor{ID: x.ID, Peaks: x.PeakMemoryMetrics, TaskTimeMs: x.TotalDuration, GCTimeMs: x.TotalGCTime, RemoveReason: x.RemoveReason}
}

// optMS is an optional date in epoch ms, 0 when absent.
func optMS(d *sparkapi.Date) int64 { return d.Ms() }

// formatQueryDate writes a time as the REST API's date parameters take it.
func formatQueryDate(ms int64) string { return time.UnixMilli(ms).UTC().Format(sparkapi.DateLayout) }

// Failure kinds, the label of the error counter.
const (
	kindNetwork = "network"
	kindStatus  = "http_status"
	kindDecode  = "decode"
)

// fetchError is a failed request, with its kind for the counters.
type fetchError struct {
	kind   string
	status int // for kindStatus
	url    string
	err    error
}

func (e *fetchError) Error() string {
	switch e.kind {
	case kindStatus:
		return fmt.Sprintf("GET %s: %d %s: %v", e.url, e.status, http.StatusText(e.status), e.err)
	}
	return fmt.Sprintf("GET %s: %v", e.url, e.err)
}

func (e *fetchError) Unwrap() error { return e.err }

// isNotFound reports whether err is Spark's 404: an unknown application,
// job, stage or execution, or an API part that is not there.
func isNotFound(err error) bool {
	var fe *fetchError
	return errors.As(err, &fe) && fe.kind == kindStatus && fe.status == http.StatusNotFound
}

// maxBody bounds a response; a full list of 1000 stages is a few MB.
const maxBody = 64 << 20

// get fetches url and decodes its JSON into out.
func (p *Poller) get(ctx context.Context, url string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return &fetchError{kind: kindNetwork, url: url, err: err}
	}
	req.Header.Set("Accept", "application/json")
	p.cfg.Auth.apply(req)
	p.stats.requests.Add(1)
	resp, err := p.client.Do(req)
	if err != nil {
		return &fetchError{kind: kindNetwork, url: url, err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	p.stats.bytes.Add(uint64(len(body)))
	if err != nil {
		return &fetchError{kind: kindNetwork, url: url, err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return &fetchError{kind: kindStatus, status: resp.StatusCode, url: url, err: errors.New(snippet(body))}
	}
	if len(body) > maxBody {
		return &fetchError{kind: kindDecode, url: url, err: fmt.Errorf("response larger than %d bytes", maxBody)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &fetchError{kind: kindDecode, url: url, err: fmt.Errorf("%v; body starts %q", err, snippet(body))}
	}
	return nil
}

// snippet is the start of a response body, for error messages: an HTML
// page from a proxy, or Spark's one-line error.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 120 {
		b = append(b[:120:120], "…"...)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// Auth is how requests to Spark authenticate: HTTP basic auth with
// Username and Password, or a bearer Token. The zero value sends nothing.
type Auth struct {
	Username, Password string
	Token              string
}

func (a Auth) apply(r *http.Request) {
	switch {
	case a.Token != "":
		r.Header.Set("Authorization", "Bearer "+a.Token)
	case a.Username != "":
		r.SetBasicAuth(a.Username, a.Password)
	}
}

// String never shows the secret.
func (a Auth) String() string {
	switch {
	case a.Token != "":
		return "bearer token"
	case a.Username != "":
		return "basic auth as " + a.Username
	}
	return "none"
}
