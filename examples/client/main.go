// Command client is a host platform in a few lines: it connects to one
// session of brain serve over WebSocket, registers ui.toast, answers its
// calls, and decides approval requests as -approve says. It prints every
// frame it sends (→) and receives (←), one JSON frame per line, and runs
// until interrupted. docs/serve.md walks through it.
//
//	go run ./examples/client -session demo -approve approved -decided-by ada
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/examples/internal/token"
	"github.com/brainrt/brain/protocol"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7777", "brain serve's address")
	sessionID := flag.String("session", "demo", "the session to join")
	tok := flag.String("token", "", "a client token (default: $BRAIN_TOKEN, else the client token in -data's tokens.json)")
	data := flag.String("data", "brain-data", "brain serve's data directory, to find the token")
	approve := flag.String("approve", "", `decide every approval request: "approved" or "rejected" (default: leave them pending)`)
	decidedBy := flag.String("decided-by", "ada", "who decides, as recorded in the session (decidedBy)")
	feedback := flag.String("feedback", "", "feedback sent with each decision (the model sees it on a rejection)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "client: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if *approve != "" && *approve != string(protocol.DecisionApproved) && *approve != string(protocol.DecisionRejected) {
		fmt.Fprintf(os.Stderr, "client: -approve %q: want approved or rejected\n", *approve)
		os.Exit(2)
	}
	t, err := token.Find(*tok, *data, "client")
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *sessionID, t, protocol.Decision(*approve), *decidedBy, *feedback); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, sessionID, tok string, decision protocol.Decision, decidedBy, feedback string) error {
	url := "ws://" + addr + "/v1/sessions/" + sessionID + "/ws"
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		if resp != nil && resp.StatusCode/100 == 4 { // the kernel's refusal says what to change
			var refusal struct{ Message string }
			if raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)); json.Unmarshal(raw, &refusal) == nil && refusal.Message != "" {
				return fmt.Errorf("connect to %s: %s: %s", url, resp.Status, refusal.Message)
			}
		}
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4 << 20)
	send := func(id string, m protocol.Message) error {
		b, err := protocol.EncodeFrame(&protocol.Frame{ID: id, Msg: m})
		if err != nil {
			return err
		}
		fmt.Printf("→ %s\n", b)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	toast := protocol.Capability{
		Name: "ui.toast", Description: "Show a toast.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Side:        protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
	}
	if err := send("r1", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{toast}}); err != nil {
		return err
	}
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("← %s\n", b)
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			continue // a message type this example does not know
		}
		switch m := f.Msg.(type) {
		case *protocol.Ack:
			if f.Ref != "" {
				fmt.Printf("ack %s\n", f.Ref)
			}
		case *protocol.CapabilityInvoked:
			if m.Name == "ui.toast" {
				if err := send("", &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`{"shown":true}`)}); err != nil {
					return err
				}
			}
		case *protocol.ApprovalRequested:
			if decision == "" {
				fmt.Printf("approval requested for %s %s: pending (run with -approve to decide)\n", m.Name, m.Input)
				continue
			}
			// Echo the digest: the decision is bound to exactly the input shown.
			d := &protocol.CapabilityApprove{CallID: m.CallID, Decision: decision, Feedback: feedback, DecidedBy: decidedBy, InputDigest: m.InputDigest}
			if err := send("", d); err != nil {
				return err
			}
		}
	}
}
