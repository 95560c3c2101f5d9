//go:build !unix

package influxtest

import "testing"

// RefusingAddr returns an address on which connections are refused for
// the whole test. It needs a socket bound without listening, which is
// done on Unix only: elsewhere the test is skipped.
func RefusingAddr(tb testing.TB) string {
	tb.Helper()
	tb.Skip("influxtest: RefusingAddr binds a socket without listening, on Unix only")
	return ""
}

// holdPort keeps nothing outside Unix: a killed server's port is free
// until it is restarted.
func holdPort(string) (release func(), err error) { return func() {}, nil }
