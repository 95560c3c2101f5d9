package main

import (
	"strconv"
	"strings"
)

// plural writes a count with its noun: "1 application", "2 applications".
// The noun's plural is the noun and "s" unless given.
func plural(n int, noun string, pluralForm ...string) string {
	word := noun
	if n != 1 {
		word = noun + "s"
		if len(pluralForm) > 0 {
			word = pluralForm[0]
		}
	}
	return strconv.Itoa(n) + " " + word
}

// humanBytes writes a size in binary units, exactly when it is a whole
// number of them ("64 MiB"), else with one decimal ("1.5 GiB").
func humanBytes(n int64) string {
	if n < 0 {
		return "-" + humanBytes(-n)
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i, f := 0, float64(n)
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}
