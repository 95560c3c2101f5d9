package influx

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// How InfluxDB answers a write it does not take whole, by server, and what
// the writer does about it. Every answer is quoted, with the source it
// comes from, in testdata/write-answers.json, which TestAnswers checks
// against these rules one by one (and TestAnswersRealInfluxDB against a
// real InfluxDB 1.8.10 where that is the server).
//
//   - 1.8 stores the good lines of a batch and answers 400 "partial write:
//     … dropped=N" (lines it could not parse are listed, not counted).
//   - 2.x refuses the whole batch over a line it cannot parse (400
//     invalid) and stores the rest over a type or retention conflict (422
//     "partial write: … dropped=N").
//   - 3 Core and Enterprise store all of a batch or none of it on
//     /api/v2/write. 3.0–3.4.1 answer a bad line with 400 "parsing failed
//     for write_lp endpoint" and its line number; 3.4.2 and later with 400
//     {"code":"invalid"} and no line number, and use the same 400 for
//     server trouble (a full WAL, the object store) that must be retried.
//   - Cloud Dedicated and Serverless answer 400 {"code":"invalid","line":N}
//     listing up to 100 bad lines by number ("error parsing line N
//     (1-based)"); good lines may be stored already.
//
// Whatever the server, nothing but a line it will never take is dropped: a
// request it refuses as a whole for another reason (credentials, a missing
// database, a database limit) is retried, and logged as something to fix.

// answerRule is one kind of answer: its status and words (any of them, in
// the message and details, case-insensitive) and what to do.
type answerRule struct {
	name     string
	status   []int    // any of them; none: any status
	words    []string // any of them; none: any message
	numbered bool     // the answer names bad lines by number
	act      action
}

// answerRules are tried in order; the first that matches decides.
var answerRules = []answerRule{
	{name: "request too large", status: []int{http.StatusRequestEntityTooLarge}, act: actSplit},
	{name: "credentials, permissions or a missing database or bucket",
		status: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound}, act: actFix},
	{name: "rate limited or server error", status: []int{http.StatusTooManyRequests, 500, 502, 503, 504}, act: actRetry},
	// 3.x line numbers (3.0–3.4.1's data.line_number, Cloud's "line"): drop
	// those lines, send the rest; see lineNumbers.
	{name: "bad lines by number", status: []int{400, 422}, numbered: true, act: actDropLines},
	{name: "3.x v3 API partial write", status: []int{400, 422}, words: []string{"partial write of line protocol occurred"}, act: actPartial},
	{name: "1.x max-values-per-tag", status: []int{400, 422}, words: []string{"max-values-per-tag"}, act: actNewSeries},
	{name: "1.x max-series-per-database", status: []int{400, 422}, words: []string{"max-series-per-database"}, act: actNewSeries},
	{name: "1.x/2.x partial write", status: []int{400, 422}, words: []string{"partial write"}, act: actPartial},
	// 3.4.2+ answer server trouble with 400 invalid too.
	{name: "3.x write buffer trouble", status: []int{400, 422},
		words: []string{"error from wal", "wal buffer full", "wal is shutdown", "object store", "error from persister", "overloaded"}, act: actRetry},
	{name: "a line the server will not take, in a batch refused whole", status: []int{400, 422},
		words: []string{"unable to parse", "line protocol parse failed", "failed to parse line protocol", "update to schema would exceed",
			"invalid column type", "field type mismatch", "field type conflict", "series key mismatch", "is a reserved column"}, act: actSplit},
	{name: "any other refusal of the request", act: actFix},
}

func (r answerRule) matches(status int, text string, numbered bool) bool {
	if len(r.status) > 0 && !slices.Contains(r.status, status) || r.numbered && !numbered {
		return false
	}
	if len(r.words) == 0 {
		return true
	}
	for _, w := range r.words {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// classify decides what a failed write means: a network error (err), or
// an answer that is not 2xx, for a request of lines lines.
func classify(a answer, err error, lines int) failure {
	if err != nil {
		return failure{act: actRetry, kind: ErrNetwork, text: err.Error()}
	}
	e := parseErrorBody(a.body)
	f := failure{status: a.status, text: e.text}
	if f.text == "" {
		f.text = a.header.Get("X-Influxdb-Error")
	}
	if f.text == "" {
		f.text = strconv.Itoa(a.status) + " " + http.StatusText(a.status)
	}
	switch s := a.status; {
	case s == http.StatusTooManyRequests:
		f.kind = Err429
	case s >= 500:
		f.kind = Err5xx
	default:
		f.kind = Err4xx
	}
	lower := strings.ToLower(f.text)
	for _, r := range answerRules {
		if r.matches(a.status, lower, len(e.numbers) > 0) {
			f.act, f.rule = r.act, r.name
			break
		}
	}
	if f.act == actRetry {
		f.retryAfter = retryAfter(a.header)
	}
	f.reason = reasonOf(f.text, a.status)
	switch f.act {
	case actPartial:
		if e.lines >= 0 {
			f.dropped = e.lines
		} else {
			f.dropped = droppedCount(f.text[strings.Index(lower, "partial write"):])
		}
	case actNewSeries:
		f.dropped = droppedCount(f.text) // reasonOf named the limit
	case actDropLines:
		f.lines = lineNumbers(e, lines)
		if len(f.lines) == 0 {
			f.act = actSplit // numbers that do not fit the request: find the lines by halving
		}
	}
	return f
}

// droppedCount reads how many points a partial write lost: 1.x and 2.x end
// the message with "dropped=N", but 1.x counts lines it could not parse
// only as "unable to parse '…'" entries, one per line.
func droppedCount(msg string) int {
	n := 0
	if i := strings.LastIndex(msg, "dropped="); i >= 0 {
		j := i + len("dropped=")
		k := j
		for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
			k++
		}
		n, _ = strconv.Atoi(msg[j:k])
	}
	if strings.HasPrefix(strings.TrimPrefix(msg, "partial write: "), "unable to parse") {
		n += strings.Count(msg, "unable to parse '")
	}
	return n
}

// reasonOf maps InfluxDB's message to one of a few reasons, so that they
// can be metric labels.
func reasonOf(msg string, status int) string {
	m := strings.ToLower(msg)
	for _, r := range []struct{ sub, reason string }{
		{"field type conflict", DropFieldTypeConflict},
		{"invalid column type", DropFieldTypeConflict},     // 3.x
		{"field type mismatch", DropFieldTypeConflict},     // 3.x catalog
		{"unable to insert", DropFieldTypeConflict},        // Cloud
		{"update to schema would exceed", DropSchemaLimit}, // 3.x columns, tables
		{"unable to parse", DropUnableToParse},
		{"parse failed", DropUnableToParse},          // 3.4.2+
		{"parsing failed", DropUnableToParse},        // 3.0–3.4.1
		{"failed to parse", DropUnableToParse},       // Cloud
		{"error parsing line", DropUnableToParse},    // Cloud
		{"invalid field name", DropInvalidFieldName}, // 1.x "time"
		{"beyond retention policy", DropRetention},
		{"outside retention policy", DropRetention}, // 2.7.12+
		{"max-values-per-tag", DropMaxValuesPerTag},
		{"max-series-per-database", DropMaxSeries},
	} {
		if strings.Contains(m, r.sub) {
			return r.reason
		}
	}
	if status == http.StatusRequestEntityTooLarge {
		return DropTooLarge
	}
	return DropRefused
}

// errorBody is what InfluxDB puts in an error response: 1.x {"error"},
// 2.x and 3.4.2+ {"code","message"}, Cloud {"code","line","message"},
// 3.x {"error","data"} where data is one line's error (3.0–3.4.1) or a
// list of them (the v3 API's partial write).
type errorBody struct {
	Error   string          `json:"error"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Line    int             `json:"line"`
	Data    json.RawMessage `json:"data"`
}

type lineError struct {
	Line    string `json:"original_line"`
	Number  int    `json:"line_number"`
	Message string `json:"error_message"`
}

// parsedError is an error body made readable.
type parsedError struct {
	text    string // the best human-readable message, with a line's error if given
	lines   int    // lines a data list names, -1 if none
	numbers []int  // 1-based line numbers the body names
}

func parseErrorBody(body []byte) parsedError {
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		return parsedError{text: strings.TrimSpace(string(body)), lines: -1}
	}
	p := parsedError{lines: -1}
	switch {
	case e.Error != "":
		p.text = e.Error
	case e.Message != "":
		p.text = e.Message
	default:
		p.text = strings.TrimSpace(string(body))
	}
	if e.Line > 0 {
		p.numbers = append(p.numbers, e.Line)
	}
	var list []lineError
	var one lineError
	switch d := bytes.TrimSpace(e.Data); {
	case len(d) == 0 || string(d) == "null":
	case d[0] == '[' && json.Unmarshal(d, &list) == nil:
		p.lines = len(list)
		if len(list) > 0 {
			p.text += ": " + list[0].Message
		}
	case d[0] == '{' && json.Unmarshal(d, &one) == nil:
		p.text += ": " + one.Message
		if one.Number > 0 {
			p.numbers = append(p.numbers, one.Number)
		}
	}
	for _, m := range lineNumberRE.FindAllStringSubmatch(p.text, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			p.numbers = append(p.numbers, n)
		}
	}
	return p
}

// lineNumberRE finds Cloud's "error parsing line 2 (1-based)" and "error
// writing line 2 (1-based)".
var lineNumberRE = regexp.MustCompile(`line (\d+) \(1-based\)`)

// lineNumbers returns the distinct 1-based line numbers e names, sorted,
// or nil when one does not fit a request of n lines.
func lineNumbers(e parsedError, n int) []int {
	seen := map[int]bool{}
	var out []int
	for _, k := range e.numbers {
		if k < 1 || k > n {
			return nil
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
