//go:build !unix

package statefile

// noFollow is 0 where the system has no O_NOFOLLOW; files are still
// created exclusively and renamed into place.
const noFollow = 0
