// Package settle gives an idle process's free memory back to the
// operating system.
//
// The Go runtime returns freed memory to the system slowly: a process
// that has been busy and then goes quiet keeps most of the heap its busy
// spell grew until its next collection — one every two minutes when
// nothing allocates — and, after that, until the background scavenger
// has walked it back, while the garbage of the busy spell is counted as
// resident all along. For a server whose operator reads its resident
// memory (a container's limit, an autoscaler, `ps`) that is memory the
// node looks like it holds and does not. [Run] watches how much the
// process allocates; once it has allocated next to nothing for a while
// after a busy spell, it collects twice — which empties the sync.Pools
// of what nobody has asked for since — and returns every free page
// ([runtime/debug.FreeOSMemory]), once, and then waits for the next busy
// spell. A node that never goes quiet is never interrupted, and one
// that does pays two collections per quiet spell: at most one release
// every Quiet plus Interval, however its load comes and goes.
package settle

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options tune [Run]; nil or zero fields take the defaults.
type Options struct {
	// Interval is how often Run reads the runtime's allocation counter
	// (default 5 s).
	Interval time.Duration
	// Quiet is how long the process must allocate less than QuietRate
	// before its memory is given back (default 15 s: past the embedded
	// NATS server's 10 s block-cache expiry, so the caches a busy spell
	// filled are dropped first).
	Quiet time.Duration
	// QuietRate is the allocation rate, in bytes a second, under which
	// the process counts as quiet (default 256 KiB/s: 10,000 idle
	// connections' timers allocate about 8 KiB a second; brain's
	// journaled round trips, about 10 KiB each, reach it at 25 a
	// second).
	QuietRate float64
	// Logger gets a debug line per release; nil discards.
	Logger *slog.Logger

	// release and allocated replace debug.FreeOSMemory and the runtime's
	// counter of bytes allocated, for tests.
	release   func()
	allocated func() uint64
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Interval <= 0 {
		out.Interval = 5 * time.Second
	}
	if out.Quiet <= 0 {
		out.Quiet = 15 * time.Second
	}
	if out.QuietRate <= 0 {
		out.QuietRate = 256 << 10
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.release == nil {
		out.release = release
	}
	if out.allocated == nil {
		out.allocated = heapAllocated
	}
	return out
}

// release collects twice and returns every free page to the system. Two
// collections, because what sits in a sync.Pool survives one (the pool
// keeps it as a victim) and goes with the second: a pool's buffers that
// nobody has asked for since the busy spell — the embedded NATS server
// keeps a file block's 8 MiB cache in one — are free memory too.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// Run watches the process until ctx ends, giving its free memory back
// once per quiet spell that follows a busy one (see the package doc).
// It blocks; run it in a goroutine of its own.
func Run(ctx context.Context, o *Options) {
	opts := o.withDefaults()
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	var (
		last      = opts.allocated()
		lastAt    = time.Now()
		quietFrom time.Time // when the current quiet spell began; zero while busy
		busy      bool      // a busy spell since the last release
	)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := opts.allocated()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			if rate >= opts.QuietRate {
				busy, quietFrom = true, time.Time{}
				continue
			}
			if quietFrom.IsZero() {
				// The quiet began somewhere in the interval just read:
				// count it from the interval's start at the latest.
				quietFrom = now.Add(-opts.Interval)
			}
			if !busy || now.Sub(quietFrom) < opts.Quiet {
				continue
			}
			start, before := time.Now(), heapReleased()
			opts.release()
			released := time.Now()
			busy = false
			last, lastAt = opts.allocated(), released // the release's own allocations are not a busy spell
			opts.Logger.Debug("settle: quiet: gave free memory back to the system",
				slog.Duration("quietFor", now.Sub(quietFrom).Round(time.Second)),
				slog.Int64("gaveBackBytes", int64(heapReleased())-int64(before)),
				slog.Duration("took", released.Sub(start).Round(time.Millisecond)))
		}
	}
}

// heapAllocated is the runtime's cumulative count of bytes allocated on
// the heap (0 where the runtime does not have it: never busy, never
// released).
func heapAllocated() uint64 { return readUint64("/gc/heap/allocs:bytes") }

// heapReleased is how much of the heap the runtime has given back to the
// system and not taken again.
func heapReleased() uint64 { return readUint64("/memory/classes/heap/released:bytes") }

func readUint64(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
