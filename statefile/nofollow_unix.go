//go:build unix

package statefile

import "syscall"

// noFollow makes opening a symbolic link fail instead of opening its target.
const noFollow = syscall.O_NOFOLLOW
