package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A client registers a capability, the LLM invokes it, the client answers.
func Example() {
	s := session.New("demo", nil)
	ctx := context.Background()

	err := s.Register(session.Client, protocol.Capability{
		Name:        "platform.react",
		Description: "Acknowledge a user message with an emoji.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"emoji":{"type":"string"}},"required":["emoji"]}`),
		Side:        protocol.SideClient,
		Origin:      protocol.Origin{Kind: protocol.OriginClient},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The client: read events, answer capability_invoked.
	sub := s.Subscribe(s.LastSeq())
	go func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if inv, ok := ev.Msg.(*protocol.CapabilityInvoked); ok {
				_ = s.Result(session.Client, &protocol.CapabilityResult{CallID: inv.CallID, Result: json.RawMessage(`{"shown":true}`)})
			}
		}
	}()
	defer sub.Close()

	out := s.Invoke(ctx, protocol.AudienceLLM, "platform.react", json.RawMessage(`{"emoji":"👍"}`))
	fmt.Println(string(out.Value))

	out = s.Invoke(ctx, protocol.AudienceLLM, "platform.react", json.RawMessage(`{"emoji":1}`))
	fmt.Println(out.Err.Code)
	// Output:
	// {"shown":true}
	// invalid_input
}

// An agent-side capability runs a Go handler in the kernel's process.
func ExampleSession_RegisterAgent() {
	s := session.New("demo", nil)
	_ = s.RegisterAgent(protocol.Capability{
		Name:        "math.add",
		Description: "Add two numbers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
		Side:        protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginAgent},
		Audience:    []protocol.Audience{protocol.AudienceLLM},
	}, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		var in struct{ A, B float64 }
		if err := json.Unmarshal(c.Input, &in); err != nil {
			return nil, err
		}
		return json.Marshal(in.A + in.B)
	}))
	out := s.Invoke(context.Background(), protocol.AudienceLLM, "math.add", json.RawMessage(`{"a":2,"b":3}`))
	fmt.Println(string(out.Value))
	out = s.Invoke(context.Background(), protocol.AudienceUser, "math.add", json.RawMessage(`{"a":2,"b":3}`))
	fmt.Println(out.Err.Code)
	fmt.Print(s.PromptSection())
	// Output:
	// 5
	// forbidden
	// <CAPABILITIES>
	// ## __capabilities.list
	// List the capabilities you can call in this session, with their descriptions and input schemas.
	//
	// ## math.add
	// Add two numbers.
	//
	// </CAPABILITIES>
}

// RenderPromptSection renders the section from a list the caller has
// already read, as a driver does when it builds a model step.
func ExampleRenderPromptSection() {
	caps := []protocol.Capability{{
		Name:           "fs.read",
		Description:    "Read a file in the workspace.",
		PromptFragment: "Paths are relative to the workspace.",
	}}
	fmt.Print(session.RenderPromptSection(caps))
	// Output:
	// <CAPABILITIES>
	// ## fs.read
	// Read a file in the workspace.
	// Paths are relative to the workspace.
	//
	// </CAPABILITIES>
}

// sliceJournal stores events in a slice and reads them back: a stand-in
// for package store's journals.
type sliceJournal struct{ events []session.Event }

func (j *sliceJournal) Append(e session.Event) error { j.events = append(j.events, e); return nil }

func (j *sliceJournal) ReadEvents(_ context.Context, after, through uint64) ([]session.Event, error) {
	var out []session.Event
	for _, e := range j.events {
		if e.Seq > after && e.Seq <= through {
			out = append(out, e)
		}
	}
	return out, nil
}

// A journaled session with a History keeps only its latest LogMemory
// events in memory (fewer when they hold more than LogMemoryBytes of
// values); a subscriber further back reads the older ones of its replay
// window back from the journal, and sees every event in order.
func ExampleOptions_history() {
	j := &sliceJournal{}
	s := session.New("long", &session.Options{Journal: j, History: j, LogMemory: 2})
	for i := range 4 {
		c := protocol.Capability{Name: fmt.Sprint("ui.", i), Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
			Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}}
		if err := s.Register(session.Client, c); err != nil {
			fmt.Println(err)
			return
		}
	}
	sub := s.Subscribe(0)
	defer sub.Close()
	for seq := uint64(0); seq < s.LastSeq(); {
		ev, err := sub.Next(context.Background())
		if err != nil {
			fmt.Println(err)
			return
		}
		seq = ev.Seq
		fmt.Println(ev.Seq, ev.Msg.MessageType())
	}
	// Output:
	// 1 capability_register
	// 2 capability_register
	// 3 capability_register
	// 4 capability_register
}

// A server running many sessions gives them one Go, so that their calls
// run on a few reused goroutines (package server's Manager passes a pool
// that reuses the goroutine idle last). This one counts what it runs.
func ExampleOptions_go() {
	var ran atomic.Int64
	opts := &session.Options{Go: func(f func()) {
		ran.Add(1)
		go f()
	}}
	s := session.New("pooled", opts)
	_ = s.RegisterAgent(protocol.Capability{
		Name: "math.double", Description: "Double a number.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`),
		Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
		Audience: []protocol.Audience{protocol.AudienceLLM},
	}, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		var in struct{ N float64 }
		if err := json.Unmarshal(c.Input, &in); err != nil {
			return nil, err
		}
		return json.Marshal(2 * in.N)
	}))
	out := s.Invoke(context.Background(), protocol.AudienceLLM, "math.double", json.RawMessage(`{"n":21}`))
	fmt.Println(string(out.Value), "— goroutines started through Go:", ran.Load())
	// Output:
	// 42 — goroutines started through Go: 1
}

// A checkpoint of a session's events restores the session as all of them
// do.
func ExampleCompact() {
	j := &sliceJournal{}
	s := session.New("demo", &session.Options{Journal: j})
	for range 50 { // 100 events: a call and its outcome each
		s.Invoke(context.Background(), protocol.AudienceLLM, "__capabilities.list", []byte(`{}`))
	}
	cp, err := session.Compact(nil, j.events, nil)
	if err != nil {
		panic(err)
	}
	r, err := session.RestoreFrom("demo", cp, nil, &session.Options{History: j}, nil)
	fmt.Println(len(cp.Latest), "latest events kept,", len(cp.Finished.Calls), "finished calls remembered; restored at seq", r.LastSeq(), err)
	// Output: 32 latest events kept, 34 finished calls remembered; restored at seq 100 <nil>
}
