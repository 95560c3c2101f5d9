package influxtest

import (
	"bytes"
	"sync"
)

// Output collects a process's output from its two pipes, and tells those
// who wait for a line that more has come: influxd's here, and that of the
// other servers tests run and read the log of, such as Spark's.
type Output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed at the next Write
}

func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
		b.written = nil
	}
	return b.b.Write(p)
}

// Len is the number of bytes written so far.
func (b *Output) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len()
}

// From returns what was written from offset on, and a channel closed at
// the next Write.
func (b *Output) From(offset int) (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written == nil {
		b.written = make(chan struct{})
	}
	return string(b.b.Bytes()[offset:]), b.written
}

func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
