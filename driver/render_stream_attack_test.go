package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// hostileModel is a loopback model server whose answers are written by
// Go functions, one per request: a malicious provider, or a proxy in
// front of one, may send anything its protocol can carry. A request past
// the last answer gets a plain text answer.
type hostileModel struct {
	t     *testing.T
	srv   *httptest.Server
	hc    *http.Client
	mu    sync.Mutex
	steps []func(w *sse)
	n     int
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w   http.ResponseWriter
	ctx context.Context
}

func (s *sse) data(v string) {
	_, _ = io.WriteString(s.w, "data: "+v+"\n\n")
	s.w.(http.Flusher).Flush()
}

func (s *sse) event(typ, v string) {
	_, _ = io.WriteString(s.w, "event: "+typ+"\ndata: "+v+"\n\n")
	s.w.(http.Flusher).Flush()
}

func newHostile(t *testing.T, steps ...func(w *sse)) *hostileModel {
	h := &hostileModel{t: t, steps: steps}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		i := h.n
		h.n++
		h.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		s := &sse{w: w, ctx: r.Context()}
		if i < len(h.steps) {
			h.steps[i](s)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/messages") {
			anthropicText(s, "Done.")
		} else {
			openAIText(s, "Done.")
		}
	}))
	h.hc = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		h.hc.CloseIdleConnections()
		h.srv.Close()
	})
	return h
}

func (h *hostileModel) driver(t *testing.T, p provider) *driver.Driver {
	m, err := p.new(driver.ProviderOptions{BaseURL: p.base(h.srv.URL), APIKey: secretKey, Model: "stub-model", MaxRetries: -1, HTTPClient: h.hc})
	if err != nil {
		t.Fatal(err)
	}
	return driver.New(m, &driver.Options{System: "test", MaxSteps: 3})
}

// OpenAI Chat Completions chunks.

func openAIChunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1767225600,"model":"stub-model","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

// openAIToolDelta is one tool_calls delta: index, id and name as given
// (empty ones left out), arguments as the fragment.
func openAIToolDelta(index int, id, name, args string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{"tool_calls": []any{tc}})
	return openAIChunk(string(b), "")
}

func openAIText(s *sse, text string) {
	b, _ := json.Marshal(map[string]string{"role": "assistant", "content": text})
	s.data(openAIChunk(string(b), ""))
	s.data(openAIChunk(`{}`, "stop"))
	s.data("[DONE]")
}

func openAIEnd(s *sse) {
	s.data(openAIChunk(`{}`, "tool_calls"))
	s.data("[DONE]")
}

// Anthropic Messages events.

func anthropicStart(s *sse) {
	s.event("message_start", `{"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"stub-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`)
}

func anthropicTool(s *sse, index int, id, name string) {
	s.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, index, id, name))
}

func anthropicDelta(s *sse, index int, fragment string) {
	b, _ := json.Marshal(fragment)
	s.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, b))
}

func anthropicStop(s *sse, index int) {
	s.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

func anthropicEnd(s *sse, reason string) {
	s.event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+reason+`","stop_sequence":null},"usage":{"output_tokens":1}}`)
	s.event("message_stop", `{"type":"message_stop"}`)
}

func anthropicText(s *sse, text string) {
	anthropicStart(s)
	s.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	b, _ := json.Marshal(text)
	s.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
	anthropicStop(s, 0)
	anthropicEnd(s, "end_turn")
}

// attackSession is a session with note.show (streaming render) and
// card.show (render, not streaming), journaled.
func attackSession(t *testing.T) (*session.Session, *textJournal) {
	j := &textJournal{}
	s := session.New("attack", &session.Options{Journal: j})
	registerRenders(t, s)
	return s, j
}

func journalEvents(j *textJournal) []session.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]session.Event(nil), j.events...)
}

// streamReport checks what a turn left in the journal: every call id
// whose partials went out has exactly one outcome, no partial follows its
// call's final render_invoked, every call has one outcome, and it returns
// counts for the test to judge.
type streamReport struct {
	partials, partialBytes, calls, outcomes, streams int
}

func checkStreams(t *testing.T, s *session.Session, evs []session.Event) streamReport {
	t.Helper()
	var r streamReport
	type call struct {
		partials, outcomes int
		invoked, final     bool
	}
	byID := map[string]*call{}
	get := func(id string) *call {
		if byID[id] == nil {
			byID[id] = &call{}
		}
		return byID[id]
	}
	for _, ev := range evs {
		switch m := ev.Msg.(type) {
		case *protocol.RenderInvoked:
			c := get(m.CallID)
			if m.Partial {
				if c.final || c.invoked {
					t.Fatalf("call %s: a partial after the call started", m.CallID)
				}
				if !json.Valid(m.Props) || len(m.Props) == 0 || m.Props[0] != '{' {
					t.Fatalf("call %s: partial props %.80q are not a JSON object", m.CallID, m.Props)
				}
				c.partials++
				r.partials++
				r.partialBytes += len(m.Props)
			} else {
				c.final = true
			}
		case *protocol.CapabilityInvoked:
			get(m.CallID).invoked = true
			r.calls++
		case *protocol.CapabilityOutcome:
			get(m.CallID).outcomes++
			r.outcomes++
		}
	}
	for id, c := range byID {
		if c.partials > 0 {
			r.streams++
		}
		if (c.partials > 0 || c.invoked) && c.outcomes != 1 {
			t.Fatalf("call %s: %d partials, invoked %v, %d outcomes (want 1)", id, c.partials, c.invoked, c.outcomes)
		}
	}
	if n := s.PendingCalls(); n != 0 {
		t.Fatalf("%d calls left pending", n)
	}
	return r
}

// goroutines waits, bounded, for the goroutine count to come back to
// about base (the session's idle handler workers, which exit on their own
// after a while, not counted).
func goroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, stacks := liveGoroutines()
		if n <= base+3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before:\n%s", n, base, stacks)
		}
		time.Sleep(10 * time.Millisecond) // polling a count, not synchronising
	}
}

// liveGoroutines counts the goroutines that are not idle session workers.
func liveGoroutines() (int, string) { return testutil.BusyGoroutines() }

func attackCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAttackToolCallIndexes: tool-call indexes a model may send — many
// calls, sparse, huge, negative — and names that change mid-stream.
func TestAttackToolCallIndexes(t *testing.T) {
	note := func(i int) string { return fmt.Sprintf(`{"title":"n%d","body":"`, i) }
	for _, tc := range []struct {
		name    string
		step    func(s *sse)
		reason  protocol.TurnReason
		check   func(t *testing.T, r streamReport)
		errPart string
	}{
		{"128 streaming calls, all indexes interleaved, 7 KiB each", func(s *sse) {
			for i := range 128 {
				s.data(openAIToolDelta(i, fmt.Sprintf("call_%d", i), "note_show", note(i)))
			}
			for k := range 7 {
				for i := range 128 {
					s.data(openAIToolDelta(i, "", "", strings.Repeat(string(rune('a'+k)), 1<<10)))
				}
			}
			for i := range 128 {
				s.data(openAIToolDelta(i, "", "", `"}`))
			}
			openAIEnd(s)
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.streams > 8 {
				t.Fatalf("%d calls streamed partials at once, want at most 8", r.streams)
			}
			if r.calls != 128 || r.outcomes != 128 {
				t.Fatalf("%d calls, %d outcomes, want 128", r.calls, r.outcomes)
			}
		}, ""},
		{"sparse: index 127 alone", func(s *sse) {
			s.data(openAIToolDelta(127, "call_far", "note_show", note(127)+strings.Repeat("f", 700)))
			s.data(openAIToolDelta(127, "", "", `far"}`))
			openAIEnd(s)
		}, protocol.TurnError, func(t *testing.T, r streamReport) {
			if r.calls != 0 {
				t.Fatalf("%d calls, want none", r.calls)
			}
		}, "tool call 0 without a name"},
		{"index 128", func(s *sse) {
			s.data(openAIToolDelta(0, "call_0", "note_show", note(0)))
			s.data(openAIToolDelta(128, "call_x", "note_show", note(1)))
			openAIEnd(s)
		}, protocol.TurnError, nil, "tool call index 128"},
		{"a huge index", func(s *sse) {
			s.data(openAIToolDelta(0, "call_0", "note_show", note(0)))
			s.data(openAIToolDelta(1<<62, "call_x", "note_show", note(1)))
			openAIEnd(s)
		}, protocol.TurnError, nil, "tool call index"},
		{"a negative index", func(s *sse) {
			s.data(openAIToolDelta(0, "call_0", "note_show", note(0)))
			s.data(openAIToolDelta(-1, "call_x", "note_show", note(1)))
			openAIEnd(s)
		}, protocol.TurnError, nil, "tool call index -1"},
		{"a name that grows into another tool mid-stream", func(s *sse) {
			s.data(openAIToolDelta(0, "call_0", "note_show", note(0)+strings.Repeat("x", 700)))
			s.data(openAIToolDelta(0, "", "_and_delete", strings.Repeat("y", 700)+`"}`))
			openAIEnd(s)
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.calls != 0 || r.streams != 1 {
				t.Fatalf("%d calls, %d streams: want the stream ended and no call", r.calls, r.streams)
			}
		}, ""},
		{"a name that grows into a streaming tool after its arguments began", func(s *sse) {
			s.data(openAIToolDelta(0, "call_0", "card", `{"title":"`))
			s.data(openAIToolDelta(0, "", "_show", strings.Repeat("y", 700)+`"}`))
			openAIEnd(s)
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.streams != 0 || r.calls != 1 {
				t.Fatalf("%d streams, %d calls: want card.show called once, not streamed", r.streams, r.calls)
			}
		}, ""},
		{"the same call id on two calls", func(s *sse) {
			s.data(openAIToolDelta(0, "call_same", "note_show", note(0)+`a"}`))
			s.data(openAIToolDelta(1, "call_same", "note_show", note(1)+`b"}`))
			openAIEnd(s)
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.calls != 2 || r.streams != 2 {
				t.Fatalf("%d calls, %d streams, want 2 of each", r.calls, r.streams)
			}
		}, ""},
		{"8 MiB of arguments: cut off at 1 MiB", func(s *sse) {
			s.data(openAIToolDelta(0, "call_big", "note_show", note(0)))
			for range 128 {
				s.data(openAIToolDelta(0, "", "", strings.Repeat("z", 64<<10)))
			}
			s.data(openAIToolDelta(0, "", "", `"}`))
			openAIEnd(s)
		}, protocol.TurnError, func(t *testing.T, r streamReport) {
			if r.partials > 64 || r.partialBytes > 4<<20 || r.calls != 0 || r.streams != 1 {
				t.Fatalf("%d partials, %d bytes, %d calls", r.partials, r.partialBytes, r.calls)
			}
		}, "passed 1048576 bytes"},
		{"8 MiB of text", func(s *sse) {
			for range 128 {
				b, _ := json.Marshal(map[string]string{"content": strings.Repeat("t", 64<<10)})
				s.data(openAIChunk(string(b), ""))
			}
			openAIEnd(s)
		}, protocol.TurnError, nil, "passed 1048576 bytes"},
		{"deeply nested arguments", func(s *sse) {
			s.data(openAIToolDelta(0, "call_deep", "note_show", `{"title":"d","body":`+strings.Repeat("[", 20000)))
			s.data(openAIToolDelta(0, "", "", strings.Repeat("]", 20000)+`}`))
			openAIEnd(s)
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.calls != 0 && r.calls != 1 {
				t.Fatalf("%d calls", r.calls)
			}
		}, ""},
		{"raw invalid UTF-8 in the stream", func(s *sse) {
			s.data(openAIChunk(`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"note_show","arguments":"{\"title\":\"`+"\xff\xfe"+strings.Repeat("\xc3", 600)+`"}}]}`, ""))
			s.data(openAIChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+"\xed\xa0\x80"+`\"}"}}]}`, ""))
			openAIEnd(s)
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.calls != 0 || r.partials != 0 {
				t.Fatalf("%+v: want the call refused (invalid_input), no partial", r)
			}
		}, ""},
		{"lone surrogates and replacement characters", func(s *sse) {
			s.data(openAIToolDelta(0, "call_u", "note_show", note(0)+`\ud800 \udfff `))
			s.data(openAIToolDelta(0, "", "", "\ufffd"+strings.Repeat("é", 400)+`"}`))
			openAIEnd(s)
		}, protocol.TurnCompleted, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := liveGoroutines()
			h := newHostile(t, tc.step)
			s, j := attackSession(t)
			start := time.Now()
			_, err := h.driver(t, openAI).Turn(attackCtx(t), s, "go")
			t.Logf("turn: %v", time.Since(start))
			ended := lastEnded(t, j)
			if ended.Reason != tc.reason || (tc.errPart != "" && (err == nil || !strings.Contains(err.Error(), tc.errPart))) {
				t.Fatalf("turn ended %s (%v), want %s with %q", ended.Reason, err, tc.reason, tc.errPart)
			}
			r := checkStreams(t, s, journalEvents(j))
			if tc.check != nil {
				tc.check(t, r)
			}
			t.Logf("%+v", r)
			j.mu.Lock()
			for _, f := range j.frames {
				if !utf8.ValidString(f) {
					t.Errorf("a frame peers receive is not UTF-8: %.200q", f)
				}
			}
			j.mu.Unlock()
			h.hc.CloseIdleConnections()
			goroutines(t, base)
		})
	}
}

func lastEnded(t *testing.T, j *textJournal) *protocol.TurnEnded {
	t.Helper()
	evs := journalEvents(j)
	for i := len(evs) - 1; i >= 0; i-- {
		if e, ok := evs[i].Msg.(*protocol.TurnEnded); ok {
			return e
		}
	}
	t.Fatal("no turn_ended")
	return nil
}

// TestAttackAnthropicBlocks: thousands of tool_use blocks, deltas aimed
// at blocks that are not tool calls, and blocks out of order.
func TestAttackAnthropicBlocks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   func(s *sse)
		reason protocol.TurnReason
		check  func(t *testing.T, r streamReport)
	}{
		{"2000 streaming tool calls", func(s *sse) {
			anthropicStart(s)
			for i := range 2000 {
				anthropicTool(s, i, fmt.Sprintf("toolu_%d", i), "note_show")
				anthropicDelta(s, i, fmt.Sprintf(`{"title":"t%d","body":"`, i))
				anthropicDelta(s, i, strings.Repeat("b", 100)+`"}`)
				anthropicStop(s, i)
			}
			anthropicEnd(s, "tool_use")
		}, protocol.TurnCompleted, func(t *testing.T, r streamReport) {
			if r.streams > 8 {
				t.Fatalf("%d streams", r.streams)
			}
		}},
		{"input_json_delta on a text block", func(s *sse) {
			anthropicStart(s)
			s.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			anthropicDelta(s, 0, `{"title":"x`)
			anthropicStop(s, 0)
			anthropicTool(s, 1, "toolu_1", "note_show")
			anthropicDelta(s, 1, `{"title":"y"}`)
			anthropicStop(s, 1)
			anthropicEnd(s, "tool_use")
		}, "", nil},
		{"a block started twice", func(s *sse) {
			anthropicStart(s)
			anthropicTool(s, 0, "toolu_a", "note_show")
			anthropicDelta(s, 0, `{"title":"`+strings.Repeat("a", 700))
			anthropicTool(s, 0, "toolu_b", "card_show")
			anthropicDelta(s, 0, `"}`)
			anthropicStop(s, 0)
			anthropicEnd(s, "tool_use")
		}, protocol.TurnError, nil},
		{"a tool_use without a name", func(s *sse) {
			anthropicStart(s)
			anthropicTool(s, 0, "toolu_a", "")
			anthropicDelta(s, 0, `{"title":"x"}`)
			anthropicStop(s, 0)
			anthropicEnd(s, "tool_use")
		}, protocol.TurnError, nil},
		{"8 MiB of arguments", func(s *sse) {
			anthropicStart(s)
			anthropicTool(s, 0, "toolu_a", "note_show")
			anthropicDelta(s, 0, `{"title":"`)
			for range 128 {
				anthropicDelta(s, 0, strings.Repeat("z", 64<<10))
			}
			anthropicDelta(s, 0, `"}`)
			anthropicStop(s, 0)
			anthropicEnd(s, "tool_use")
		}, protocol.TurnError, func(t *testing.T, r streamReport) {
			if r.calls != 0 || r.streams != 1 {
				t.Fatalf("%+v: want the stream ended, no call", r)
			}
		}},
		{"a delta for a block that never started", func(s *sse) {
			anthropicStart(s)
			anthropicTool(s, 0, "toolu_a", "note_show")
			anthropicDelta(s, 0, `{"title":"`+strings.Repeat("a", 700))
			anthropicDelta(s, 5, `"}`)
			anthropicEnd(s, "tool_use")
		}, protocol.TurnError, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := liveGoroutines()
			h := newHostile(t, tc.step)
			s, j := attackSession(t)
			_, _ = h.driver(t, anthropic).Turn(attackCtx(t), s, "go")
			ended := lastEnded(t, j)
			if tc.reason != "" && ended.Reason != tc.reason {
				t.Fatalf("turn ended %s (%s), want %s", ended.Reason, ended.Error, tc.reason)
			}
			r := checkStreams(t, s, journalEvents(j))
			if tc.check != nil {
				tc.check(t, r)
			}
			t.Logf("%s: %+v", ended.Reason, r)
			h.hc.CloseIdleConnections()
			goroutines(t, base)
		})
	}
}

// TestAttackRegistryMidStream: the capability a call streams into is
// deregistered, or registered again by another app, while the model is
// still writing its arguments; or it requires approval, or is not
// offered to the model at all.
func TestAttackRegistryMidStream(t *testing.T) {
	chart := func(app string, approval bool) protocol.Capability {
		c := agentCap("app.chart", `{"type":"object","properties":{"title":{"type":"string"}}}`)
		c.Kind, c.Side, c.Origin = protocol.KindRender, protocol.SideApp, protocol.Origin{Kind: protocol.OriginApp, ID: app}
		c.RequiresApproval = approval
		c.Render = &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://r.example/c.html"},
			Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "chart", Streaming: true}
		return c
	}
	for _, p := range []provider{openAI, anthropic} {
		for _, tc := range []struct {
			name   string
			change func(t *testing.T, s *session.Session)
			owner  string // the app that must see the call, "" for none
		}{
			{"deregistered", func(t *testing.T, s *session.Session) {
				if err := s.Deregister(session.App("a"), "app.chart"); err != nil {
					t.Error(err)
				}
			}, ""},
			{"registered again by another app", func(t *testing.T, s *session.Session) {
				if err := s.Deregister(session.App("a"), "app.chart"); err != nil {
					t.Error(err)
				}
				if err := s.Register(session.App("b"), chart("b", false)); err != nil {
					t.Error(err)
				}
			}, "b"},
			{"registered again requiring approval", func(t *testing.T, s *session.Session) {
				if err := s.Register(session.App("a"), chart("a", true)); err != nil {
					t.Error(err)
				}
			}, "a"},
		} {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				s, j := attackSession(t)
				if err := s.Register(session.App("a"), chart("a", false)); err != nil {
					t.Fatal(err)
				}
				answerApps(t, s)
				step := func(w *sse) {
					first := `{"title":"` + strings.Repeat("q", 700)
					rest := strings.Repeat("r", 700) + `"}`
					if p.name == "openai" {
						w.data(openAIToolDelta(0, "call_c", "app_chart", first))
						waitPartial(t, s)
						tc.change(t, s)
						w.data(openAIToolDelta(0, "", "", rest))
						openAIEnd(w)
						return
					}
					anthropicStart(w)
					anthropicTool(w, 0, "toolu_c", "app_chart")
					anthropicDelta(w, 0, first)
					waitPartial(t, s)
					tc.change(t, s)
					anthropicDelta(w, 0, rest)
					anthropicStop(w, 0)
					anthropicEnd(w, "tool_use")
				}
				h := newHostile(t, step)
				_, _ = h.driver(t, p).Turn(attackCtx(t), s, "chart it")
				evs := journalEvents(j)
				checkStreams(t, s, evs)
				// Every event of one call id goes to one owner.
				owners := map[string]session.Peer{}
				for _, ev := range allSessionEvents(t, s) {
					id := protocol.CallIDOf(ev.Msg)
					if id == "" {
						continue
					}
					if o, ok := owners[id]; ok && !o.Same(ev.Owner) {
						t.Fatalf("call %s: %s owned by %v after events owned by %v", id, ev.Msg.MessageType(), ev.Owner, o)
					}
					owners[id] = ev.Owner
					if inv, ok := ev.Msg.(*protocol.CapabilityInvoked); ok && (tc.owner == "" || !ev.Owner.Same(session.App(tc.owner))) {
						t.Fatalf("call %s made to %v, want app %q", inv.CallID, ev.Owner, tc.owner)
					}
				}
			})
		}
	}

	t.Run("approval required or not offered: no partials", func(t *testing.T) {
		for _, mod := range []func(c *protocol.Capability){
			func(c *protocol.Capability) { c.RequiresApproval = true },
			func(c *protocol.Capability) { c.Audience = []protocol.Audience{protocol.AudienceUser} },
		} {
			s, j := attackSession(t)
			c := chart("a", false)
			mod(&c)
			if err := s.Register(session.App("a"), c); err != nil {
				t.Fatal(err)
			}
			answerApps(t, s)
			h := newHostile(t, func(w *sse) {
				w.data(openAIToolDelta(0, "call_c", "app_chart", `{"title":"`+strings.Repeat("q", 2000)))
				w.data(openAIToolDelta(0, "", "", strings.Repeat("q", 2000)+`"}`))
				openAIEnd(w)
			})
			_, _ = h.driver(t, openAI).Turn(attackCtx(t), s, "chart it")
			if r := checkStreams(t, s, journalEvents(j)); r.partials != 0 {
				t.Fatalf("%d partials for a capability that requires approval or is hidden from the model", r.partials)
			}
		}
	})
}

// answerApps answers every call to an app-side capability, as its owner,
// and rejects every call that asks for approval.
func answerApps(t *testing.T, s *session.Session) {
	sub := s.Subscribe(s.LastSeq())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := sub.Next(context.Background())
			if err != nil {
				return
			}
			switch m := ev.Msg.(type) {
			case *protocol.CapabilityInvoked:
				if ev.Owner.Side == session.SideApp {
					_ = s.Result(ev.Owner, &protocol.CapabilityResult{CallID: m.CallID, Result: json.RawMessage(`{"shown":true}`)})
				}
			case *protocol.ApprovalRequested:
				_ = s.Approve(session.Client, &protocol.CapabilityApprove{CallID: m.CallID, Decision: protocol.DecisionRejected, DecidedBy: "t"})
			}
		}
	}()
	t.Cleanup(func() { sub.Close(); <-done })
}

// waitPartial waits for the session's first partial render_invoked.
func waitPartial(t *testing.T, s *session.Session) {
	sub := s.Subscribe(0)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Errorf("no partial: %v", err)
			return
		}
		if m, ok := ev.Msg.(*protocol.RenderInvoked); ok && m.Partial {
			return
		}
	}
}

func allSessionEvents(t *testing.T, s *session.Session) []session.Event {
	t.Helper()
	sub := s.Subscribe(0)
	defer sub.Close()
	var out []session.Event
	ctx := attackCtx(t)
	for last := s.LastSeq(); len(out) == 0 || out[len(out)-1].Seq < last; {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestAttackStreamLeftOpen: the model stops mid-arguments and hangs; the
// turn is cancelled. The stream ends (one cancelled outcome), no call is
// made, and no goroutine is left.
func TestAttackStreamLeftOpen(t *testing.T) {
	for _, p := range []provider{openAI, anthropic} {
		t.Run(p.name, func(t *testing.T) {
			base, _ := liveGoroutines()
			s, j := attackSession(t)
			hung := make(chan struct{})
			h := newHostile(t, func(w *sse) {
				if p.name == "openai" {
					w.data(openAIToolDelta(0, "call_h", "note_show", `{"title":"`+strings.Repeat("h", 700)))
				} else {
					anthropicStart(w)
					anthropicTool(w, 0, "toolu_h", "note_show")
					anthropicDelta(w, 0, `{"title":"`+strings.Repeat("h", 700))
				}
				close(hung)
				<-w.ctx.Done()
			})
			d := h.driver(t, p)
			ctx, cancel := context.WithCancel(attackCtx(t))
			done := make(chan protocol.TurnReason, 1)
			go func() { r, _ := d.Turn(ctx, s, "go"); done <- r }()
			<-hung
			waitPartial(t, s)
			cancel()
			select {
			case r := <-done:
				if r != protocol.TurnCancelled {
					t.Fatalf("turn ended %s", r)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the turn did not end after its context was cancelled")
			}
			r := checkStreams(t, s, journalEvents(j))
			if r.streams != 1 || r.calls != 0 {
				t.Fatalf("%+v: want one stream ended, no call", r)
			}
			h.hc.CloseIdleConnections()
			goroutines(t, base)
		})
	}
}
