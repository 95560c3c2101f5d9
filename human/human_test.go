package human

import "testing"

func TestWords(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Count(1, "application"), "1 application"},
		{Count(0, "application"), "0 applications"},
		{Count(4, "application"), "4 applications"},
		{Count(2, "process", "processes"), "2 processes"},
		{Bytes(64 << 20), "64 MiB"},
		{Bytes(429496729), "409.6 MiB"},
		{Bytes(1 << 30), "1 GiB"},
		{Bytes(3 << 29), "1.5 GiB"},
		{Bytes(512), "512 B"},
		{Bytes(-2048), "-2 KiB"},
		{IDs([]int{3, 4, 7}), "3,4,7"},
		{IDs([]int{12}), "12"},
		{IDs(nil), ""},
		{Hours(0.0312), "0.031"}, // a test-sized job: not 0.0
		{Hours(0), "0.0"},
		{Hours(12.34), "12.3"},
		{Hours(-0.5), "-0.5"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
