package influx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxQueryAnswer bounds an InfluxQL answer.
const maxQueryAnswer = 16 << 20

// ErrAnswerTooLarge is what Query's error is (errors.Is) when the answer
// passes the bound on what a reader holds: read a shorter time range.
var ErrAnswerTooLarge = fmt.Errorf("answer larger than %d bytes", maxQueryAnswer)

// queryError is a refused InfluxQL statement.
type queryError struct {
	status int // HTTP status; 200 when the statement itself failed
	text   string
	err    error // what it is, if it is one of ours
}

func (e *queryError) Error() string {
	return fmt.Sprintf("%d %s", e.status, e.text)
}

func (e *queryError) Unwrap() error { return e.err }

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

// Querier runs InfluxQL statements against a database (a 1.x database,
// or a 2.x or 3.x bucket through its DBRP mapping) over one HTTP client,
// whose connections its statements share; numbers in its answers are
// json.Number. It is safe for concurrent use.
type Querier struct{ c *checker }

// NewQuerier returns a Querier of the server cfg names.
func NewQuerier(cfg Config) (*Querier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("influx: %w", err)
	}
	return &Querier{c: newChecker(cfg)}, nil
}

// Query runs one InfluxQL statement against db and returns the series of
// its answer.
func (q *Querier) Query(ctx context.Context, db, statement string) ([]Series, error) {
	series, err := q.c.series(ctx, db, statement)
	if err != nil {
		return nil, fmt.Errorf("influx: %s at %s: %w", statement, q.c.url, err)
	}
	return series, nil
}

// Close releases the Querier's idle connections.
func (q *Querier) Close() { q.c.client.close() }

// series runs one InfluxQL statement with POST /query (1.x refuses CREATE
// over GET) and returns the series of its first result.
func (c *checker) series(ctx context.Context, db, q string) ([]Series, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	form := url.Values{"q": {q}}
	if db != "" {
		form.Set("db", db)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.client.base+"query", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if readOnly(q) {
		// A read may be sent again on a fresh connection when a kept-alive
		// one turns out closed (net/http does so only for idempotent
		// requests; the empty key is not sent).
		req.Header["Idempotency-Key"] = nil
	}
	a, err := c.client.do(req, maxQueryAnswer+1)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	body := a.body
	if a.status != http.StatusOK {
		return nil, &queryError{status: a.status, text: parseErrorBody(body).text}
	}
	if len(body) > maxQueryAnswer {
		return nil, &queryError{status: a.status, text: ErrAnswerTooLarge.Error(), err: ErrAnswerTooLarge}
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
		return nil, &queryError{status: a.status, text: "not an InfluxQL answer: " + truncate(string(body), 200)}
	}
	if r.Error != "" {
		return nil, &queryError{status: a.status, text: r.Error}
	}
	if e := r.Results[0].Error; e != "" {
		return nil, &queryError{status: a.status, text: e}
	}
	return r.Results[0].Series, nil
}

// readOnly reports whether an InfluxQL statement only reads.
func readOnly(q string) bool {
	verb, _, _ := strings.Cut(strings.TrimSpace(q), " ")
	into := strings.Contains(strings.ToUpper(q), " INTO ")
	return (strings.EqualFold(verb, "SELECT") && !into) || strings.EqualFold(verb, "SHOW")
}

// Number is a value of a Series as a float64, if it is a number.
func Number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
