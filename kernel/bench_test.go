package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/tool"
)

type echoIn struct {
	Text string `json:"text"`
}
type echoOut struct {
	Text string `json:"text"`
}

func echo(_ context.Context, in echoIn) (echoOut, error) { return echoOut(in), nil }

var echoTool = tool.New(tool.Spec{Name: "echo", Description: "Echo the text.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":1000}},"required":["text"],"additionalProperties":false}`)},
	func(ctx *tool.Context[tool.None, tool.None], in echoIn) (echoOut, error) { return echo(ctx, in) })

var echoInput = json.RawMessage(`{"text":"the quick brown fox jumps over the lazy dog"}`)

// BenchmarkInvokeNative: a native tool through kernel invoke — input
// validation, handles, JSON in and out, the Outcome.
func BenchmarkInvokeNative(b *testing.B) {
	e := kernel.New(nil)
	e.Setup(context.Background())
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: echoTool}); !rec.OK() {
		b.Fatal(rec.Failures)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := e.Invoke(ctx, "echo", kernel.Call{ID: "c", Input: echoInput}); !out.IsOK() {
			b.Fatal(out.Err)
		}
	}
}

// BenchmarkDirectGoCall: the tool's Go function called directly.
func BenchmarkDirectGoCall(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out, err := echo(ctx, echoIn{Text: "the quick brown fox jumps over the lazy dog"}); err != nil || out.Text == "" {
			b.Fatal(err)
		}
	}
}

// BenchmarkDirectJSONCall: the same function with JSON decoded and encoded
// around it, as the anchors' floor does.
func BenchmarkDirectJSONCall(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var in echoIn
		if err := json.Unmarshal(echoInput, &in); err != nil {
			b.Fatal(err)
		}
		out, _ := echo(ctx, in)
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}
