package main

import (
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/telemetry"
)

// poolStats reports the WebAssembly pools of h (nil: none) for /metrics.
func poolStats(h *host.Host) []telemetry.PoolStat {
	if h == nil {
		return nil
	}
	stats := h.Stats()
	out := make([]telemetry.PoolStat, len(stats))
	for i, s := range stats {
		out[i] = telemetry.PoolStat{Tool: s.Tool, Size: s.Size, InUse: s.InUse, Limit: s.Limit, Discards: s.Discards}
	}
	return out
}
