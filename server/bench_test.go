package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// BenchmarkWSRoundTrip: one invocation of a client-side capability over a
// loopback WebSocket: invoke → capability_invoked to the client →
// capability_result back → the outcome. No journal.
func BenchmarkWSRoundTrip(b *testing.B) {
	benchRoundTrip(b, server.ManagerOptions{})
}

// BenchmarkWSRoundTripJournaled is BenchmarkWSRoundTrip with the embedded
// JetStream journal on, as `brain serve` runs by default: every event of
// the call (capability_invoked, capability_result's outcome) is
// acknowledged by the store before the client or the invoker sees it.
func BenchmarkWSRoundTripJournaled(b *testing.B) {
	st, err := store.Open(context.Background(), &store.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	benchRoundTrip(b, server.ManagerOptions{Store: st})
}

// benchRoundTrip runs the round trip on a kernel with options mo; the
// frame rate is unlimited (a benchmark outruns any).
func benchRoundTrip(b *testing.B, mo server.ManagerOptions) {
	mo.Limits = server.Limits{FramesPerSecond: -1, FrameBurst: -1}
	f, _ := newLimited(b, mo, server.Options{})
	c := f.dial(clientToken, "s1", "?after=0")
	c.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.echo", false)}})
	c.reply("r")
	s, release, err := f.mgr.Acquire(context.Background(), "s1")
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	// The client's reads outlive the dial's 10 s handshake context: a
	// long run must not lose its client half-way.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The client: answer every call. It reads frames as a host platform's
	// client would — the fields it needs, no strict checks (those are the
	// kernel's, and are measured on its side) — so that the allocations
	// reported are mostly the kernel's.
	go func() {
		var fr struct {
			Msg struct {
				Type   string          `json:"type"`
				CallID string          `json:"callId"`
				Input  json.RawMessage `json:"input"`
			} `json:"msg"`
		}
		out := make([]byte, 0, 256)
		for {
			_, data, err := c.conn.Read(context.Background()) // ends when the connection closes (cleanup)
			if err != nil {
				return
			}
			if !bytes.Contains(data, []byte(`"capability_invoked"`)) {
				continue // acks and outcomes: nothing to answer
			}
			fr.Msg.Input = fr.Msg.Input[:0]
			if err := json.Unmarshal(data, &fr); err != nil || fr.Msg.Type != string(protocol.TypeCapabilityInvoked) {
				continue
			}
			out = append(out[:0], `{"v":2,"msg":{"type":"capability_result","callId":`...)
			out = strconv.AppendQuote(out, fr.Msg.CallID) // call ids are [A-Za-z0-9-]: Go and JSON quote them alike
			out = append(append(append(out, `,"result":`...), fr.Msg.Input...), "}}"...)
			_ = c.conn.Write(context.Background(), 1, out)
		}
	}()
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
