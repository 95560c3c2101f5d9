//go:build !unix

package graphite

import "net"

// nowReaderOf returns c.Read: without a way to read without waiting, a
// block is what one read returns.
func nowReaderOf(c net.Conn) func([]byte) (int, error) { return c.Read }
