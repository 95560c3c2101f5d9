package simulate

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// After SetAddr, the next round's reports all go to the new address.
func TestSetAddr(t *testing.T) {
	accepted := func(l net.Listener) <-chan int {
		n := make(chan int, 1)
		go func() {
			count := 0
			defer func() { n <- count }()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				count++
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}
		}()
		return n
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	first, second := listen(), listen()
	firstN, secondN := accepted(first), accepted(second)

	start := time.Unix(1_700_000_000, 0)
	c := NewCluster(Config{Addr: first.Addr().String(), Apps: 1, Executors: 2, Period: 10 * time.Second, Seed: 1, Confirm: true}, start)
	procs := c.Processes()
	if _, failed := c.SendRound(context.Background(), start); failed != 0 {
		t.Fatalf("round to the first address: %d reports failed", failed)
	}
	c.SetAddr(second.Addr().String())
	if _, failed := c.SendRound(context.Background(), start.Add(10*time.Second)); failed != 0 {
		t.Fatalf("round to the second address: %d reports failed", failed)
	}
	// With Confirm, each round returns once its reports were all taken.
	first.Close()
	second.Close()
	if n := <-firstN; n != procs {
		t.Errorf("first address: %d reports, want %d", n, procs)
	}
	if n := <-secondN; n != procs {
		t.Errorf("second address: %d reports, want %d", n, procs)
	}
}
