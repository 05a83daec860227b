//go:build !unix

package fsroot

import "os"

// Open flags: no equivalent on these platforms.
const (
	oNonblock  = 0
	oDirectory = 0
)

// linkCount reports one link: outside Unix the hard-link check is not
// implemented (see docs/handle-fs.md). brain's environments run on Linux.
func linkCount(os.FileInfo) uint64 { return 1 }
