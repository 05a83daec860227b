package store_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// benchEvent is a typical event: a dispatched call with a small input.
func benchEvent(seq uint64) session.Event {
	return session.Event{Seq: seq, Msg: &protocol.CapabilityInvoked{
		CallID: "cq3k5x7m2-42", Name: "fs.read", Input: json.RawMessage(`{"path":"notes/todo.md","maxBytes":65536}`), InvokedBy: "agent",
	}}
}

// BenchmarkAppend appends one event per op, acknowledged by the embedded
// server: with the default fsync policy, and with SyncAlways.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts *store.Options
	}{
		{"default", nil},
		{"sync-always", &store.Options{SyncAlways: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := open(b, b.TempDir(), bc.opts)
			j := journal(b, st, "bench")
			seq := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				if err := j.Append(benchEvent(seq)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad1000 loads a session of 1000 events.
func BenchmarkLoad1000(b *testing.B) {
	st := open(b, b.TempDir(), nil)
	j := journal(b, st, "bench")
	for seq := uint64(1); seq <= 1000; seq++ {
		appendAll(b, j, benchEvent(seq))
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := load(b, st, "bench"); len(got) != 1000 {
			b.Fatalf("loaded %d events", len(got))
		}
	}
}

// BenchmarkAppendParallel appends from concurrent goroutines, each its own
// session's journal (a session appends in seq order, one at a time), to one
// embedded store: the shape of many sessions busy at once. It reports
// events per second across all of them.
func BenchmarkAppendParallel(b *testing.B) {
	for _, par := range []int{1, 8, 32} {
		b.Run(fmt.Sprint("sessions=", 2*par), func(b *testing.B) { // RunParallel runs par×GOMAXPROCS goroutines
			st := open(b, b.TempDir(), nil)
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				j := journal(b, st, fmt.Sprint("bench-", next.Add(1)))
				seq := uint64(0)
				for pb.Next() {
					seq++
					if err := j.Append(benchEvent(seq)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
