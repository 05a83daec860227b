package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
)

// runEnv is `brain env --kernel URL --session ID`: an environment as its
// own process — near the user's files — attached to a kernel elsewhere. It
// registers its tools in the session as agent-side capabilities and runs
// their calls.
func runEnv(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("env", "env --kernel URL --session ID --token TOKEN [--config FILE] [--data DIR]",
		`Runs an environment as its own process (near the user's files, in a container)
attached to one session of a kernel elsewhere: registers its tools there as
agent-side capabilities (with the config's policy) and runs their calls. It
needs a token of side "environment" in the kernel's tokens.json.`,
		`brain env --kernel http://127.0.0.1:7777 --session demo --token "$ENV_TOKEN" --config examples/env.yaml`)
	kernelURL := fs.String("kernel", "", "the kernel's base URL, e.g. http://127.0.0.1:7777 (required)")
	sessionID := fs.String("session", "", "the session to serve (required)")
	token := fs.String("token", "", "an environment token of the kernel (side \"environment\" in its tokens.json) (required)")
	config := fs.String("config", "", "environment config (docs/serve.md); default: the example tools over ./workspace")
	data := fs.String("data", "brain-env-data", "data directory (compiled code, default grants)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "env", fs.Args()); !ok {
		return code
	}
	if *kernelURL == "" || *sessionID == "" || *token == "" {
		return usageError(stderr, "env", "--kernel, --session and --token are required")
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := loadServeConfig(*config, *data)
	if err != nil {
		fmt.Fprintln(stderr, "brain env:", err)
		return 1
	}
	env, cleanup, err := buildEnvironment(ctx, cfg, *data, logger)
	if err != nil {
		fmt.Fprintln(stderr, "brain env:", err)
		return 1
	}
	defer cleanup()
	err = serveRemote(ctx, env, *kernelURL, *sessionID, *token, func() {
		fmt.Fprintf(stdout, "brain env: serving %v to session %s at %s\n", toolList(env), *sessionID, *kernelURL)
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "brain env:", err)
		return 1
	}
	return 0
}

// serveRemote connects to a kernel's session as its environment peer,
// registers env's tools and answers their calls until ctx ends or the
// connection does. ready is called once the tools are registered.
func serveRemote(ctx context.Context, env *kernel.Environment, base, sessionID, token string, ready func()) error {
	u := strings.Replace(strings.TrimRight(base, "/"), "http", "ws", 1) + "/v1/sessions/" + sessionID + "/ws"
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return fmt.Errorf("connect to %s: %w", u, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(protocol.MaxFrameBytes * 2)

	var wmu sync.Mutex
	send := func(m protocol.Message, id string) error {
		b, err := protocol.EncodeFrame(&protocol.Frame{ID: id, Msg: m})
		if err != nil {
			return err
		}
		wmu.Lock()
		defer wmu.Unlock()
		return conn.Write(ctx, websocket.MessageText, b)
	}
	mine := map[string]bool{}
	caps := env.Capabilities() // with the config's policy: the kernel's session enforces it
	for _, c := range caps {
		mine[c.Name] = true
	}
	if err := send(&protocol.CapabilityRegister{Capabilities: caps}, "register"); err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		running = map[string]context.CancelFunc{}
	)
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("connection: %w", err)
		}
		f, err := protocol.DecodeFrame(b)
		if err != nil {
			continue // the kernel sent something this version does not know
		}
		switch m := f.Msg.(type) {
		case *protocol.ErrorReply:
			if f.Ref == "register" {
				return fmt.Errorf("register tools: %s: %s", m.Code, m.Message)
			}
		case *protocol.Ack:
			if f.Ref == "register" && ready != nil {
				ready()
			}
		case *protocol.CapabilityInvoked:
			if !mine[m.Name] {
				continue
			}
			cctx, cancel := context.WithCancel(ctx)
			mu.Lock()
			running[m.CallID] = cancel
			mu.Unlock()
			go func() {
				out := env.Invoke(cctx, m.Name, kernel.Call{ID: m.CallID, Input: m.Input})
				mu.Lock()
				delete(running, m.CallID)
				mu.Unlock()
				cancel()
				_ = send(&protocol.CapabilityResult{CallID: m.CallID, Result: resultOf(out)}, "")
			}()
		case *protocol.CapabilityOutcome:
			// The kernel ended the call (timeout, cancel): stop the tool.
			mu.Lock()
			if cancel, ok := running[m.CallID]; ok {
				cancel()
			}
			mu.Unlock()
		}
	}
}

// resultOf turns an Outcome into a capability_result's result: the value,
// or the error envelope with the code extension.
func resultOf(out protocol.Outcome) json.RawMessage {
	if out.IsOK() {
		if len(out.Value) == 0 {
			return json.RawMessage("null")
		}
		return out.Value
	}
	b, _ := json.Marshal(struct {
		Error string        `json:"error"`
		Code  protocol.Code `json:"code"`
	}{out.Err.Message, out.Err.Code})
	return b
}
