//go:build unix

package live

import (
	"os"

	"golang.org/x/sys/unix"
)

// termSize reports whether f is a terminal, and its width.
func termSize(f *os.File) (bool, int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return false, DefaultWidth
	}
	if ws.Col == 0 {
		return true, DefaultWidth
	}
	return true, int(ws.Col)
}
