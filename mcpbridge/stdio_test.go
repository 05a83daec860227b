package mcpbridge_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/mcpbridge"
	"github.com/brainrt/brain/tool"
)

type wordsIn struct {
	Text string `json:"text"`
}

type wordsOut struct {
	Words int `json:"words"`
}

// newEnvironment returns a set-up environment with two native tools:
// text.words (reports progress) and text.refuse (fails with a code).
func newEnvironment(t testing.TB) *kernel.Environment {
	t.Helper()
	env := kernel.New(nil)
	env.Setup(context.Background())
	words := tool.New(tool.Spec{Name: "text.words", Description: "Count the words of a text."},
		func(ctx *tool.Context[tool.None, tool.None], in wordsIn) (wordsOut, error) {
			ctx.Progress(1, 2, "counting")
			return wordsOut{Words: len(strings.Fields(in.Text))}, nil
		})
	refuse := tool.New(tool.Spec{Name: "text.refuse", Description: "Always refuses."},
		func(*tool.Context[tool.None, tool.None], struct{}) (wordsOut, error) {
			return wordsOut{}, tool.Errorf("quota_exceeded", "no more words today")
		})
	rec := env.Attach(context.Background(), kernel.Attachment{Tool: words}, kernel.Attachment{Tool: refuse})
	if !rec.OK() {
		t.Fatalf("attach: %+v", rec.Failures)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// serveStdio runs ServeEnvironmentStdio on a pair of pipes and connects a
// client to the other ends; the returned channel receives what
// ServeEnvironmentStdio returned.
func serveStdio(t *testing.T, ctx context.Context, env *kernel.Environment, opts *mcp.ClientOptions) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()   // client → server
	outR, outW := io.Pipe() // server → client
	served := make(chan error, 1)
	go func() {
		err := mcpbridge.ServeEnvironmentStdio(ctx, env, inR, outW)
		_ = outW.Close()
		served <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, opts).
		Connect(waitCtx(t), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	must(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs, served
}

func TestServeEnvironmentStdio(t *testing.T) {
	env := newEnvironment(t)
	progress := make(chan *mcp.ProgressNotificationParams, 4)
	cs, served := serveStdio(t, context.Background(), env, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params },
	})

	tools := toolNames(t, cs)
	if len(tools) != 2 || tools["text.words"] == nil || tools["text.refuse"] == nil {
		t.Fatalf("tools = %v", tools)
	}
	if d := tools["text.words"].Description; d != "Count the words of a text." {
		t.Errorf("description = %q", d)
	}

	cases := []struct {
		name, tool string
		args       any
		want       string
		wantError  bool
	}{
		{"value", "text.words", map[string]any{"text": "to be or not"}, `{"words":4}`, false},
		{"tool error code", "text.refuse", map[string]any{}, "quota_exceeded: no more words today", true},
		{"invalid input", "text.words", map[string]any{"text": 4}, "invalid_input: ", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			must(t, err)
			if got := text(t, res); !strings.HasPrefix(got, c.want) || res.IsError != c.wantError {
				t.Errorf("result = %q (isError %v), want %q (isError %v)", got, res.IsError, c.want, c.wantError)
			}
		})
	}

	t.Run("progress", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "text.words", Arguments: map[string]any{"text": "a b"}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(waitCtx(t), params)
		must(t, err)
		if got := text(t, res); got != `{"words":2}` {
			t.Errorf("result = %q", got)
		}
		p := recv(t, progress, "a progress notification")
		if p.ProgressToken != "p1" || p.Progress != 1 || p.Total != 2 || p.Message != "counting" {
			t.Errorf("progress = %+v", p)
		}
	})

	t.Run("client closes", func(t *testing.T) {
		must(t, cs.Close())
		if err := recv(t, served, "ServeEnvironmentStdio to return"); err != nil {
			t.Fatalf("ServeEnvironmentStdio = %v, want nil when the client closes", err)
		}
	})
}

func TestServeEnvironmentStdioCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, served := serveStdio(t, ctx, newEnvironment(t), nil)
	if len(toolNames(t, cs)) != 2 {
		t.Fatal("tools missing")
	}
	cancel()
	if err := recv(t, served, "ServeEnvironmentStdio to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeEnvironmentStdio = %v, want context.Canceled", err)
	}
}
