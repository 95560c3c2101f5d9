package sparkapi

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
)

// Range checks. Every answer of a Spark UI may be hostile or broken, and
// its numbers feed facts, accounting and advice. Check zeroes, in place,
// every value that no Spark could have written, and says which:
//
//   - a count, a size, a duration or an id below zero (Spark's −1 for an
//     attempt still running, EndTimeEpoch, is kept), or of 2^58 or more:
//     9 years of CPU in nanoseconds (80 000 core-hours in one stage),
//     256 PiB; sums of 32 such values still fit an int64;
//   - a quantile or distribution value that is not finite, below zero or
//     2^58 or more; a quantile outside [0, 1];
//   - cores (totalCores, maxTasks) above 65 536;
//   - a date, or an epoch in ms, before 2000 or more than a day after
//     now (the UI's clock may run a little ahead of ours);
//   - a peak memory metric above 2^50 bytes (1 PiB).
//
// Zero is what a client reads for an absent field, so a zeroed value is
// read as not given: no cores known, no date, no peak.

const (
	maxWhole = 1 << 58
	maxCores = 1 << 16
	maxPeak  = 1 << 50
)

var earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Check zeroes the impossible values of v, a pointer to one of the
// package's types or a slice of them, and returns one "field value" text
// for each, naming the JSON field.
func Check(v any, now time.Time) []string {
	c := checker{latest: now.Add(24 * time.Hour)}
	c.walk(reflect.ValueOf(v), "")
	return c.bad
}

type checker struct {
	latest time.Time
	bad    []string
}

var dateType = reflect.TypeOf(Date{})

func (c *checker) fail(path string, v any) {
	if len(c.bad) < 100 {
		c.bad = append(c.bad, fmt.Sprintf("%s %v", path, v))
	}
}

func (c *checker) walk(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		if d, ok := v.Interface().(*Date); ok && v.CanSet() {
			if t := d.Time; !t.IsZero() && !c.plausible(t) && t.UnixMilli() != -1 {
				c.fail(path, t.UTC().Format(DateLayout))
				v.Set(reflect.Zero(v.Type())) // an optional date: absent
			}
			return
		}
		c.walk(v.Elem(), path)
	case reflect.Slice:
		for i := range v.Len() {
			c.walk(v.Index(i), path)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.Int64 {
			return
		}
		for _, k := range v.MapKeys() {
			if n := v.MapIndex(k).Int(); n < 0 || n > maxPeak {
				c.fail(path+"."+k.String(), n)
				v.SetMapIndex(k, reflect.Zero(v.Type().Elem()))
			}
		}
	case reflect.Struct:
		if v.Type() == dateType {
			if t := v.Interface().(Date).Time; !t.IsZero() && !c.plausible(t) && t.UnixMilli() != -1 {
				c.fail(path, t.UTC().Format(DateLayout))
				v.Set(reflect.Zero(dateType))
			}
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			if path != "" {
				name = path + "." + name
			}
			c.field(v.Field(i), f.Name, name)
		}
	}
}

// field checks a struct field: Go name goName, JSON path path.
func (c *checker) field(v reflect.Value, goName, path string) {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		n := v.Int()
		ok := n >= 0 && n < maxWhole
		switch {
		case strings.HasSuffix(goName, "Epoch"):
			ok = n <= 0 || c.plausible(time.UnixMilli(n))
			ok = ok && n >= -1
		case goName == "TotalCores" || goName == "MaxTasks":
			ok = ok && n <= maxCores
		}
		if !ok {
			c.fail(path, n)
			v.SetInt(0)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Float64 {
			for i := range v.Len() {
				x := v.Index(i).Float()
				ok := !math.IsNaN(x) && x >= 0 && x < maxWhole
				if goName == "Quantiles" {
					ok = ok && x <= 1
				}
				if !ok {
					c.fail(path, x)
					v.Index(i).SetFloat(0)
				}
			}
			return
		}
		c.walk(v, path)
	default:
		c.walk(v, path)
	}
}

func (c *checker) plausible(t time.Time) bool { return !t.Before(earliest) && !t.After(c.latest) }
