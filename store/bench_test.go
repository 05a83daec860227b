package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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

// wakeLog is a 1,000-event log of finished calls: each call's invocation
// and then its outcome, so that a restore leaves nothing pending and
// appends nothing (a wake that appended would grow the log each op).
func wakeLog(n int) []session.Event {
	events := make([]session.Event, 0, n)
	for i := 0; len(events) < n; i++ {
		e := benchEvent(uint64(len(events) + 1))
		inv := *e.Msg.(*protocol.CapabilityInvoked)
		inv.CallID = fmt.Sprintf("cq3k5x7m2-%d", i)
		events = append(events, session.Event{Seq: e.Seq, Msg: &inv})
		if len(events) < n {
			events = append(events, session.Event{Seq: e.Seq + 1, Msg: &protocol.CapabilityOutcome{
				CallID: inv.CallID, Name: inv.Name, Outcome: protocol.OK(json.RawMessage(`{"text":"- buy milk\n- write the wake benchmark"}`)),
			}})
		}
	}
	return events
}

// BenchmarkWake wakes a hibernated session of 1,000 events from an
// embedded store: "load" is [store.Store.Load] alone; "wake" is what
// package server did to wake a session before checkpoints —
// [store.Store.Resume] (the load, and the journal that continues it) and
// [session.Restore] journaling to it; "checkpoint" is what it does now:
// [store.Store.ResumeFrom] and [session.RestoreFrom] from the checkpoint
// the session's hibernation wrote. Besides ns/op it reports cpu-ns/op, the process's CPU time (user
// and system, every goroutine's, the embedded server's included) a wake:
// on a shared machine the wall time is mostly the wait for a core.
func BenchmarkWake(b *testing.B) {
	const n = 1000
	st := open(b, b.TempDir(), nil)
	j := journal(b, st, "wake")
	appendAll(b, j, wakeLog(n)...)
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if got := load(b, st, "wake"); len(got) != n {
				b.Fatalf("loaded %d events", len(got))
			}
		}
	})
	b.Run("wake", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			events, j, err := st.Resume(context.Background(), "wake")
			if err != nil {
				b.Fatal(err)
			}
			s, err := session.Restore("wake", events, &session.Options{Journal: j}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if got := s.LastSeq(); got != n {
				b.Fatalf("restored up to seq %d, want %d (the restore appended)", got, n)
			}
		}
	})
	// As a hibernated session wakes in package server: from the
	// checkpoint its hibernation wrote.
	if err := st.Checkpoint(context.Background(), "wake", nil); err != nil {
		b.Fatal(err)
	}
	b.Run("checkpoint", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			cp, events, j, err := st.ResumeFrom(context.Background(), "wake")
			if err != nil || cp == nil {
				b.Fatalf("resume: checkpoint %v, %v", cp != nil, err)
			}
			s, err := session.RestoreFrom("wake", cp, events, &session.Options{Journal: j}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if got := s.LastSeq(); got != n {
				b.Fatalf("restored up to seq %d, want %d", got, n)
			}
		}
	})
}

// reportCPU starts counting the process's CPU time; the function it
// returns reports it as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
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
