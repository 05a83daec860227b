package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// BenchmarkWSRoundTrip: one invocation of a client-side capability over a
// loopback WebSocket: invoke → capability_invoked to the client →
// capability_result back → the outcome.
func BenchmarkWSRoundTrip(b *testing.B) {
	f, _ := newLimited(b, server.ManagerOptions{Limits: server.Limits{FramesPerSecond: -1, FrameBurst: -1}}, server.Options{}) // a benchmark outruns any frame rate
	c := f.dial(clientToken, "s1", "?after=0")
	c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.echo", false)}})
	c.reply("r")
	s, release, err := f.mgr.Acquire(context.Background(), "s1")
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	go func() { // the client: answer every call
		for {
			_, data, err := c.conn.Read(c.ctx)
			if err != nil {
				return
			}
			fr, err := protocol.DecodeFrame(data)
			if err != nil {
				continue
			}
			if inv, ok := fr.Msg.(*protocol.CapabilityInvoked); ok {
				b, _ := protocol.EncodeFrame(&protocol.Frame{Msg: &protocol.CapabilityResult{CallID: inv.CallID, Result: inv.Input}})
				_ = c.conn.Write(c.ctx, 1, b)
			}
		}
	}()
	ctx := context.Background()
	in := json.RawMessage(`{"n":7}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if out := s.Invoke(ctx, protocol.AudienceLLM, "ui.echo", in); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}

// BenchmarkInvoke100Sessions: agent-side invocations spread over 100
// sessions from concurrent goroutines; reports invocations per second.
func BenchmarkInvoke100Sessions(b *testing.B) {
	mgr := server.NewManager(server.ManagerOptions{})
	var sessions []*session.Session
	for i := range 100 {
		s, release, err := mgr.Acquire(context.Background(), fmt.Sprint("s", i))
		if err != nil {
			b.Fatal(err)
		}
		defer release()
		c := protocol.Capability{Name: "echo", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
			Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
		if err := s.RegisterAgent(c, session.HandlerFunc(func(_ context.Context, call *session.Call) (json.RawMessage, error) { return call.Input, nil })); err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	var next atomic.Uint64
	in := json.RawMessage(`{"text":"the quick brown fox"}`)
	b.ReportAllocs()
	b.SetParallelism(50) // 100 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			s := sessions[next.Add(1)%100]
			if out := s.Invoke(ctx, protocol.AudienceLLM, "echo", in); !out.IsOK() {
				b.Error(out.Err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "invocations/s")
}

// BenchmarkIdleSessionMemory: the heap held by one idle session in memory,
// with three client capabilities registered and 20 events in its log.
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 500
	b.ReportAllocs()
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		mgr := server.NewManager(server.ManagerOptions{})
		for i := range n {
			s, release, err := mgr.Acquire(context.Background(), fmt.Sprint("idle-", i))
			if err != nil {
				b.Fatal(err)
			}
			for j := range 3 {
				if err := s.Register(session.Client, clientCap(fmt.Sprint("ui.", j), false)); err != nil {
					b.Fatal(err)
				}
			}
			release()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(mgr)
		// Signed: HeapAlloc can shrink when the GC frees garbage from before
		// the measurement, and an unsigned difference then wraps to 2^64.
		grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		if grown <= 0 {
			b.Fatalf("heap did not grow (%d bytes): the measurement is meaningless", grown)
		}
		b.ReportMetric(float64(grown)/n, "bytes/session")
	}
}
