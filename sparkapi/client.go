package sparkapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Client defaults.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMaxResponseBytes = 16 << 20
)

// ClientConfig configures a Client. Zero values take the defaults.
type ClientConfig struct {
	// Transport carries the requests (TLS settings live there); nil uses
	// http.DefaultTransport.
	Transport http.RoundTripper
	Auth      Auth
	Timeout   time.Duration // per request; default 5s
	// MaxResponseBytes bounds one answer; a larger one is a failed
	// request (KindDecode). Default 16 MiB: a list of 1000 stages is a
	// few MB.
	MaxResponseBytes int64
	// Now is the clock Check judges dates by; default time.Now.
	Now func() time.Time
}

// Client reads Spark's monitoring REST API: one GET, its answer decoded
// into this package's types as a stream and checked (Check). A Client is
// safe for concurrent use.
//
// It follows no redirect: a source is named by its final URL, and a
// redirect that a Spark UI (run by whoever submitted the job) answers
// must not carry the credentials, or the requests, anywhere else. Every
// failure is an *Error with its kind; what an answer shows of itself in
// an error is a short, printable snippet, so that a hostile answer cannot
// fill or forge log lines.
type Client struct {
	http             *http.Client
	auth             Auth
	timeout          time.Duration
	maxResponseBytes int64
	now              func() time.Time

	requests, bytes atomic.Uint64
}

// NewClient returns a Client.
func NewClient(cfg ClientConfig) *Client {
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{
		http: &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		auth: cfg.Auth, timeout: cfg.Timeout, maxResponseBytes: cfg.MaxResponseBytes, now: cfg.Now,
	}
}

// Requests is how many HTTP requests the Client has made.
func (c *Client) Requests() uint64 { return c.requests.Load() }

// Bytes is how many response bytes the Client has read.
func (c *Client) Bytes() uint64 { return c.bytes.Load() }

// Failure kinds: an Error's Kind, the label strings of the error counters
// (sparkpulse_annotate_errors_total).
const (
	KindNetwork = "network"     // no answer: connection, timeout, or a request that could not be made
	KindStatus  = "http_status" // an answer other than 200 OK (redirects included)
	KindDecode  = "decode"      // a 200 whose body is not the JSON asked for, or is too large
)

// Error is a failed request, with its kind for the counters.
type Error struct {
	Kind   string // KindNetwork, KindStatus, KindDecode, or a kind of the caller's
	Status int    // for KindStatus
	URL    string
	Err    error
	// StartingUp, for KindDecode: the body is the page a driver's UI
	// serves while it starts (startingUp).
	StartingUp bool
}

// startingUp begins the page SparkUI serves, 200 and text, until its
// handlers are attached (Spark 3.5 and 4.x): "Spark is starting up.
// Please wait a while until it's ready."
const startingUp = "Spark is starting up."

func (e *Error) Error() string {
	switch e.Kind {
	case KindStatus:
		return fmt.Sprintf("GET %s: %d %s: %v", e.URL, e.Status, http.StatusText(e.Status), e.Err)
	}
	return fmt.Sprintf("GET %s: %v", e.URL, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsNotFound reports whether err is Spark's 404: an unknown application,
// job, stage or execution, or an API part that is not there.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindStatus && e.Status == http.StatusNotFound
}

// IsRefused reports whether err is a refused connection: nothing listens
// at the address, as at a driver's UI port between two applications.
func IsRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// IsStartingUp reports whether err is a driver's UI answering, while the
// driver starts, the page SparkUI serves until its handlers are attached
// ("Spark is starting up. Please wait a while until it's ready.", 200, in
// place of JSON): its API answers moments later.
func IsStartingUp(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StartingUp
}

// Get fetches url and decodes its JSON into out, as a stream: a response
// is never held whole, and one larger than MaxResponseBytes is a decode
// error. A decoded answer is checked: invalid lists, one "field value"
// text each, the values no Spark writes, which Check zeroed in out (read
// as absent).
func (c *Client) Get(ctx context.Context, url string, out any) (invalid []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, &Error{Kind: KindNetwork, URL: url, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	c.auth.apply(req)
	c.requests.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Kind: KindNetwork, URL: url, Err: err}
	}
	defer resp.Body.Close()
	body := &countedReader{r: io.LimitReader(resp.Body, c.maxResponseBytes+1)}
	defer func() { c.bytes.Add(uint64(body.n)) }()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(body, 512))
		return nil, &Error{Kind: KindStatus, Status: resp.StatusCode, URL: url, Err: errors.New(snippet(head))}
	}
	err = decodeStream(json.NewDecoder(body), out)
	switch {
	case body.n > c.maxResponseBytes:
		return nil, &Error{Kind: KindDecode, URL: url, Err: fmt.Errorf("response larger than max-response-bytes (%d)", c.maxResponseBytes)}
	case err != nil:
		return nil, &Error{Kind: KindDecode, URL: url, Err: fmt.Errorf("%v; body starts %q", err, snippet(body.head)),
			StartingUp: bytes.HasPrefix(body.head, []byte(startingUp))}
	}
	return Check(out, c.now()), nil
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
