package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// runDemo runs one session in-process and narrates it: a client registers
// capabilities, the runtime registers a Go one, the LLM invokes them, a user
// approves one and rejects another, and a late subscriber replays the log.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "demo [-frames]",
		`Runs one session in this process and narrates it: a client registers
capabilities (one is refused), the runtime registers a Go one, the LLM invokes
them, a user approves one call and rejects another, and a late subscriber
replays the event log. No network, no files.`,
		"brain demo -frames")
	frames := fs.Bool("frames", false, "print every event as the JSON frame a client would receive, in seq order, where it happens")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "demo", fs.Args()); !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	s := session.New("demo", nil)
	var (
		mu         sync.Mutex // the client goroutine and this one both narrate
		printed    uint64     // the last seq the client goroutine has narrated
		clientGone bool
	)
	caughtUp := sync.NewCond(&mu)
	sayLocked := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		sayLocked(format, a...)
	}
	// flush waits until the client goroutine has narrated every event so
	// far, so that with -frames each frame is printed where it happened,
	// before the narration goes on.
	flush := func() {
		last := s.LastSeq()
		mu.Lock()
		defer mu.Unlock()
		for printed < last && !clientGone {
			caughtUp.Wait()
		}
	}

	// The client side: a goroutine that plays the host platform. It answers
	// calls to its capabilities and approves or rejects what needs approval.
	sub := s.Subscribe(0)
	defer sub.Close()
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		defer func() {
			mu.Lock()
			clientGone = true
			caughtUp.Broadcast()
			mu.Unlock()
		}()
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			if *frames {
				b, _ := protocol.EncodeFrame(&protocol.Frame{Seq: ev.Seq, Msg: ev.Msg})
				sayLocked("    event %s", b)
			}
			printed = ev.Seq
			caughtUp.Broadcast()
			mu.Unlock()
			switch m := ev.Msg.(type) {
			case *protocol.CapabilityInvoked:
				if c, ok := s.Lookup(m.Name); ok && c.Side == protocol.SideClient {
					_ = s.Result(session.Client, &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`{"shown":true}`)})
				}
			case *protocol.ApprovalRequested:
				d := protocol.CapabilityApprove{CallID: m.CallID, Decision: protocol.DecisionApproved, DecidedBy: "ada", InputDigest: m.InputDigest}
				if strings.Contains(string(m.Input), "secrets") {
					d.Decision, d.Feedback = protocol.DecisionRejected, "not the secrets folder"
				}
				say("  [client] user ada decides %s for %s %s", d.Decision, m.Name, m.Input)
				_ = s.Approve(session.Client, &d)
			}
		}
	}()

	say("1. The client registers platform.react (client side).")
	must(stderr, s.Register(session.Client, protocol.Capability{
		Name: "platform.react", Description: "Acknowledge a user message with an emoji.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"emoji":{"type":"string"}},"required":["emoji"],"additionalProperties":false}`),
		Side:        protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
		PromptFragment: "React to thank the user, at most once per message.",
	}))

	flush()
	say("2. The runtime registers files.delete (agent side, a Go handler, requires approval).")
	must(stderr, s.RegisterAgent(protocol.Capability{
		Name: "files.delete", Description: "Delete a folder of the workspace.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
		RequiresApproval: true, Kind: protocol.KindEffect,
	}, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
		return json.RawMessage(`{"deleted":true}`), nil
	})))

	flush()
	say("3. A client trying to register an agent capability is refused:")
	err := s.Register(session.Client, protocol.Capability{Name: "evil", Description: "x", InputSchema: json.RawMessage(`{}`),
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}})
	say("   %v", err)

	flush()
	say("4. The system prompt section the LLM sees:")
	for _, line := range strings.Split(strings.TrimSpace(s.PromptSection()), "\n") {
		say("   | %s", line)
	}

	invoke := func(name, input string) {
		out := s.Invoke(ctx, protocol.AudienceLLM, name, json.RawMessage(input))
		flush()
		b, _ := json.Marshal(out)
		say("   llm → %s %s ⇒ %s", name, input, b)
	}
	say("5. The LLM invokes capabilities:")
	invoke("platform.react", `{"emoji":"👍"}`)
	invoke("platform.react", `{"emoji":42}`)
	invoke("files.delete", `{"path":"build/"}`)
	invoke("files.delete", `{"path":"secrets/"}`)
	invoke("nope", `{}`)
	invoke(session.CapabilitiesListName, `{"prefix":"platform."}`)

	flush()
	say("6. A subscriber reconnecting after seq 3 replays what it missed:")
	late := s.Subscribe(3)
	defer late.Close()
	for seq := uint64(3); seq < s.LastSeq(); {
		ev, err := late.Next(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "demo:", err)
			return 1
		}
		seq = ev.Seq
		say("   seq %2d  %s", ev.Seq, ev.Msg.MessageType())
	}
	cancel()
	<-clientDone
	return 0
}

func must(stderr io.Writer, err error) {
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
	}
}
