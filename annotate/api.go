package annotate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sparkpulse/sparkpulse/sizing"
	"github.com/sparkpulse/sparkpulse/sparkapi"
)

// appStateKey carries, in a sync's context, the attempt being read: get
// notes there the values of its answers it read as absent.
type appStateKey struct{}

// executorSizing is what package sizing needs of an executor.
func executorSizing(x *sparkapi.Executor) sizing.Executor {
	return sizing.Executor{ID: x.ID, Peaks: x.PeakMemoryMetrics, TaskTimeMs: x.TotalDuration, GCTimeMs: x.TotalGCTime, RemoveReason: x.RemoveReason,
		Cores: x.TotalCores} // the executor's own: spark.executor.cores may be unset (standalone takes all a worker has)
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
	// kindWrongApp: a template instance answered for an application other
	// than the one it was asked about; refused, so that no source speaks
	// for another application.
	kindWrongApp = "wrong_app"
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

// get fetches url and decodes its JSON into out, as a stream: a response
// is never held whole, and one larger than MaxResponseBytes is a decode
// error. Redirects are not followed (see newHTTPClient).
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
	body := &countedReader{r: io.LimitReader(resp.Body, p.cfg.MaxResponseBytes+1)}
	defer func() { p.stats.bytes.Add(uint64(body.n)) }()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(body, 512))
		return &fetchError{kind: kindStatus, status: resp.StatusCode, url: url, err: errors.New(snippet(head))}
	}
	err = decodeStream(json.NewDecoder(body), out)
	switch {
	case body.n > p.cfg.MaxResponseBytes:
		return &fetchError{kind: kindDecode, url: url, err: fmt.Errorf("response larger than max-response-bytes (%d)", p.cfg.MaxResponseBytes)}
	case err != nil:
		return &fetchError{kind: kindDecode, url: url, err: fmt.Errorf("%v; body starts %q", err, snippet(body.head))}
	}
	if bad := sparkapi.Check(out, p.cfg.Now()); len(bad) > 0 {
		p.stats.invalid.Add(uint64(len(bad)))
		if st, ok := ctx.Value(appStateKey{}).(*appState); ok {
			st.invalid += len(bad)
			if len(st.invalidSeen) < 5 {
				st.invalidSeen = append(st.invalidSeen, bad[:min(len(bad), 5-len(st.invalidSeen))]...)
			}
		}
		// At most once a minute: a hostile UI answers every poll.
		now := p.cfg.Now().Unix()
		if last := p.stats.invalidLogged.Load(); now-last >= 60 && p.stats.invalidLogged.CompareAndSwap(last, now) {
			p.log.Warn("Spark REST answer with values no Spark writes: read as absent", zap.String("url", url),
				zap.Int("values", len(bad)), zap.Strings("first", bad[:min(len(bad), 5)]))
		}
	}
	return nil
}

// decodeStream decodes one JSON value into out. A list (out points to a
// slice) is decoded an element at a time, so that the decoder holds one
// element's text, not the whole answer's.
func decodeStream(dec *json.Decoder, out any) error {
	v := reflect.ValueOf(out).Elem()
	if v.Kind() != reflect.Slice {
		return dec.Decode(out)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null
		v.SetLen(0)
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("want a JSON list, got %v", tok)
	}
	v.SetLen(0)
	for dec.More() {
		e := reflect.New(v.Type().Elem())
		if err := dec.Decode(e.Interface()); err != nil {
			return err
		}
		v.Set(reflect.Append(v, e.Elem()))
	}
	_, err = dec.Token() // ']'
	return err
}

// countedReader counts what is read through it, and keeps the start.
type countedReader struct {
	r    io.Reader
	n    int64
	head []byte // the first bytes, for error messages
}

func (c *countedReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if room := 512 - len(c.head); room > 0 {
		c.head = append(c.head, b[:min(n, room)]...)
	}
	return n, err
}

// newHTTPClient makes the client of Spark's REST API. It follows no
// redirect: a source is named by its final URL, and a redirect that a
// Spark UI (run by whoever submitted the job) answers must not carry
// sparkpulse's credentials, or its requests, anywhere else.
func newHTTPClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// snippet is the start of a response body, for error messages: an HTML
// page from a proxy, or Spark's one-line error. It is short and keeps only
// printable ASCII, so that a hostile answer cannot fill or forge log lines.
func snippet(b []byte) string {
	const maxShown = 80
	var out strings.Builder
	space := true
	for _, c := range bytes.TrimSpace(b) {
		switch {
		case out.Len() >= maxShown:
			return out.String() + "…"
		case c <= ' ':
			if !space {
				out.WriteByte(' ')
			}
			space = true
			continue
		case c > '~':
			c = '?'
		}
		out.WriteByte(c)
		space = false
	}
	return out.String()
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
