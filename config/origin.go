package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/sparkpulse/sparkpulse/influx"
)

// origin is where a setting's value came from: a line of the config file,
// an environment variable or a flag. Errors start with it, so that the
// value is fixed where it was written.
type origin struct {
	file      string
	line, col int
	vars      []string // the ${VAR}s substituted on that line
	env       string   // variable name
	value     string   // its value, as given
	flag      string   // "--influxdb-url"
}

func (o origin) String() string {
	switch {
	case o.flag != "":
		return o.flag
	case o.env != "":
		return o.env + "=" + o.value
	case o.line > 0:
		s := fmt.Sprintf("%s:%d:%d", o.file, o.line, o.col)
		if len(o.vars) > 0 {
			s += " (${" + strings.Join(o.vars, "}, ${") + "})"
		}
		return s
	}
	return o.file
}

// origins maps a setting's key to where its value came from. Keys are
// the TOML paths, with a block's position from 1: "influxdb.url",
// "state-dir", "graphite.2.bind-address"; a section or block alone
// ("influxdb", "graphite.2") is where its header is.
type origins map[string]origin

// at is the start of an error about key: where its value came from, else
// where its section or block is, else source.
func (m origins) at(source, key string) string {
	for k := key; k != ""; {
		if o, ok := m[k]; ok {
			return o.String()
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return source
}

// blockKey is the key of a setting of the index-th (from 1) block of an
// array of tables: blockKey("graphite", 2, "database") = "graphite.2.database".
func blockKey(array string, index int, key string) string {
	k := array + "." + strconv.Itoa(index)
	if key != "" {
		k += "." + key
	}
	return k
}

// keyedErrors starts each of err's errors (one per errors.Join member) with
// the origin of the setting it names. The packages' validation errors start
// with the key ("max-series -5: must be positive"); keys lists the
// section's keys, and under prefix ("influxdb", "graphite.1") their
// origins are looked up. what follows the origin ("[influxdb]").
func (m origins) keyedErrors(source, prefix, what string, keys []string, err error) []error {
	var errs []error
	for _, e := range splitJoined(err) {
		msg := e.Error()
		key := prefix
		first, _, _ := strings.Cut(msg, " ")
		first = strings.TrimSuffix(first, ":")
		for _, k := range keys {
			if k == first {
				key = prefix + "." + k
				if prefix == "" {
					key = k
				}
			}
		}
		errs = append(errs, fmt.Errorf("%s: %s%w", m.at(source, key), what, e))
	}
	return errs
}

// splitJoined undoes errors.Join, one level.
func splitJoined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// filePositions finds where each key, table and block of a TOML file is,
// for origins. A file that does not parse gives what came before the
// problem (the decoder reports the problem itself).
func filePositions(file string, data []byte, vars map[int][]string) origins {
	out := origins{}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	counts := map[string]int{}
	keyOf := func(n *unstable.Node) []string {
		var parts []string
		it := n.Key()
		for it.Next() {
			parts = append(parts, string(it.Node().Data))
		}
		return parts
	}
	at := func(n *unstable.Node, col0 bool) origin {
		sh := p.Shape(n.Raw)
		o := origin{file: file, line: sh.Start.Line, col: sh.Start.Column, vars: vars[sh.Start.Line]}
		if col0 {
			o.col = 1
		}
		return o
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			k := keyOf(e)
			first := e.Key()
			first.Next()
			name := strings.Join(k, ".")
			if e.Kind == unstable.ArrayTable {
				counts[name]++
				name = blockKey(name, counts[name], "")
			}
			table = strings.Split(name, ".")
			out[name] = at(first.Node(), true)
		case unstable.KeyValue:
			k := append(append([]string{}, table...), keyOf(e)...)
			out[strings.Join(k, ".")] = at(e, false)
		}
	}
	return out
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expandVars replaces ${VAR} and ${VAR:-default} in a TOML file with the
// environment's values, before it is decoded; $$ is a $. Comments are left
// as they are. In a "basic" string the value is escaped as TOML needs;
// elsewhere it is inserted as written (a number, a boolean, an array). An
// unset or empty variable without a default is an error naming file:line
// and the variable; all of them are reported. It returns the text and the
// variables used on each line.
func expandVars(file string, data []byte, getenv func(string) string) ([]byte, map[int][]string, error) {
	const (
		normal = iota
		comment
		basic
		literal
		mlBasic
		mlLiteral
	)
	var (
		out   strings.Builder
		errs  []error
		used  = map[int][]string{}
		state = normal
		line  = 1
		col   = 1
		s     = string(data)
	)
	out.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line, col = line+1, 0
			if state == comment || state == basic || state == literal {
				state = normal
			}
		case state == comment:
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			out.WriteByte('$')
			i, col = i+2, col+2
			continue
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 || strings.IndexByte(s[i:i+end], '\n') >= 0 {
				errs = append(errs, fmt.Errorf("%s:%d:%d: ${ without a closing }", file, line, col))
				out.WriteString(s[i:])
				i = len(s)
				continue
			}
			expr := s[i+2 : i+end]
			name, def, hasDef := strings.Cut(expr, ":-")
			v := ""
			switch {
			case !varName.MatchString(name):
				errs = append(errs, fmt.Errorf("%s:%d:%d: ${%s}: not a variable name (letters, digits and _)", file, line, col, expr))
			default:
				v = getenv(name)
				if v == "" && !hasDef {
					errs = append(errs, fmt.Errorf("%s:%d:%d: ${%s}: the variable is not set (give it a value, or a default: ${%s:-value})", file, line, col, name, name))
				} else if v == "" {
					v = def
				}
				used[line] = append(used[line], name)
			}
			switch state {
			case basic, mlBasic:
				v = tomlEscape(v)
			case literal:
				if strings.ContainsAny(v, "'\n") {
					errs = append(errs, fmt.Errorf("%s:%d:%d: ${%s}: its value holds a ' or a newline, which a '…' string cannot: use \"…\"", file, line, col, name))
				}
			case mlLiteral:
				if strings.Contains(v, "'''") {
					errs = append(errs, fmt.Errorf("%s:%d:%d: ${%s}: its value holds ''', which a '''…''' string cannot: use \"\"\"…\"\"\"", file, line, col, name))
				}
			}
			out.WriteString(v)
			i, col = i+end+1, col+end+1
			continue
		case state == normal && c == '#':
			state = comment
		case state == normal && strings.HasPrefix(s[i:], `"""`):
			state = mlBasic
			out.WriteString(`"""`)
			i, col = i+3, col+3
			continue
		case state == normal && strings.HasPrefix(s[i:], `'''`):
			state = mlLiteral
			out.WriteString(`'''`)
			i, col = i+3, col+3
			continue
		case state == normal && c == '"':
			state = basic
		case state == normal && c == '\'':
			state = literal
		case (state == basic || state == mlBasic) && c == '\\' && i+1 < len(s):
			out.WriteString(s[i : i+2])
			i, col = i+2, col+2
			continue
		case state == basic && c == '"', state == literal && c == '\'':
			state = normal
		case state == mlBasic && strings.HasPrefix(s[i:], `"""`), state == mlLiteral && strings.HasPrefix(s[i:], `'''`):
			state = normal
			out.WriteString(s[i : i+3])
			i, col = i+3, col+3
			continue
		}
		out.WriteByte(c)
		i, col = i+1, col+1
	}
	return []byte(out.String()), used, errors.Join(errs...)
}

// tomlEscape escapes s for a TOML basic string.
func tomlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redactValue hides the credentials a URL setting may hold, before an
// error quotes it.
func redactValue(key, v string) string {
	if strings.HasSuffix(key, "url") || strings.HasSuffix(key, "urls") {
		return influx.RedactURL(v)
	}
	return v
}
