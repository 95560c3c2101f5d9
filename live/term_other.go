//go:build !unix

package live

import "os"

// termSize reports whether f is a terminal: without the ioctl, a
// character device is taken for one, DefaultWidth wide.
func termSize(f *os.File) (bool, int) {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0, DefaultWidth
}
