package proc

import (
	"log/slog"

	"github.com/brainrt/brain/handle"
)

// Options configure [New]. A nil *Options means the defaults.
type Options struct {
	// Logger receives setup notices, such as Landlock being unavailable in
	// best-effort mode. nil discards them.
	Logger *slog.Logger
}

// opRun is the operation name in every CapabilityError of this package.
const opRun = "run"

// Log attribute keys.
const (
	logKeyRoot     = "root"
	logKeyLandlock = "landlock"
	logKeyUID      = "uid"
	logKeyErr      = "err"
)

// Exec implements handle.Exec.
var _ handle.Exec = (*Exec)(nil)
