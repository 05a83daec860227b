package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// scriptModel is the model of the conversation tests: each Step runs the
// next step the test queued, with the driver's request and text callback,
// so that the test decides what the model streams and when.
type scriptModel struct{ steps chan step }

type step func(ctx context.Context, req *driver.Request, onText func(string)) (*driver.Reply, error)

func newScriptModel() *scriptModel { return &scriptModel{steps: make(chan step, 16)} }

func (m *scriptModel) Step(ctx context.Context, req *driver.Request, onText func(string)) (*driver.Reply, error) {
	select {
	case f := <-m.steps:
		return f(ctx, req, onText)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(wait):
		return nil, errors.New("the test queued no model step")
	}
}

// answer is a step that says text, in one piece, with usage.
func answer(text string, usage *protocol.Usage) step {
	return func(_ context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
		onText(text)
		return &driver.Reply{Text: text, Usage: usage}, nil
	}
}

// call is a step that calls one tool.
func call(id, name, input string) step {
	return func(_ context.Context, req *driver.Request, _ func(string)) (*driver.Reply, error) {
		return &driver.Reply{ToolCalls: []protocol.ToolCall{{ID: id, Name: req.ToolName(name), Input: json.RawMessage(input)}}}, nil
	}
}

const (
	xssUser      = `<img src=x onerror="window.__xss=10"> what do my notes say?`
	xssAssistant = "Let me look at **notes** <img src=x onerror=\"window.__xss=11\"> [x](javascript:window.__xss=11) [far](//evil.invalid/p) [near](notes.txt)"
)

// talkCaps registers the conversation tests' capabilities: fs.read (which
// waits for release when it is closed... or answers at once when nil),
// fs.delete (needs approval; its result carries a payload) and
// chart.inline (a streaming render drawn in the chat, as its markdown
// fallback).
func talkCaps(t *testing.T, s *session.Session, release chan struct{}) {
	t.Helper()
	agent := protocol.Origin{Kind: protocol.OriginAgent}
	for _, c := range []struct {
		cap protocol.Capability
		h   session.Handler
	}{
		{protocol.Capability{Name: "fs.read", DisplayName: "Read a file", Description: "Read a file of the workspace.", Kind: protocol.KindQuery,
			InputSchema: obj(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Side: protocol.SideAgent, Origin: agent},
			session.HandlerFunc(func(ctx context.Context, c *session.Call) (json.RawMessage, error) {
				if release != nil {
					select {
					case <-release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				var in struct{ Path string }
				_ = json.Unmarshal(c.Input, &in)
				return json.Marshal(map[string]string{"text": "contents of " + in.Path})
			})},
		{protocol.Capability{Name: "fs.delete", Description: "Delete a file.", RequiresApproval: true, Kind: protocol.KindEffect,
			InputSchema: obj(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Side: protocol.SideAgent, Origin: agent},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) {
				return json.Marshal(map[string]any{"deleted": true, "note": xssResult})
			})},
		{protocol.Capability{Name: "chart.inline", DisplayName: "Chart", Description: "Draw a chart in the chat.", Kind: protocol.KindRender,
			InputSchema: obj(`{"type":"object","properties":{"title":{"type":"string"},"points":{"type":"array"},"note":{"type":"string"}}}`), Side: protocol.SideAgent, Origin: agent,
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://widgets.example.com/chart.js", TagName: "x-chart"},
				Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "### {{title}}\n\npoints: {{points}}", Streaming: true}},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return obj(`{"shown":true}`), nil })},
	} {
		if err := s.RegisterAgent(c.cap, c.h); err != nil {
			t.Fatalf("register %s: %v", c.cap.Name, err)
		}
	}
}

// noHorizontalScroll fails when the page is wider than its viewport.
func noHorizontalScroll(t *testing.T, b tab, where string) {
	t.Helper()
	got := eval[string](b, `(() => {
		const d = document.documentElement, w = window.innerWidth;
		if (d.scrollWidth <= w) return 'ok';
		const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w + 1 && getComputedStyle(e).position !== 'fixed')
			.slice(0, 4).map(e => e.tagName.toLowerCase() + '.' + [...e.classList].join('.') + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ');
		return 'page ' + d.scrollWidth + ' px wide in a ' + w + ' px viewport: ' + wide;
	})()`)
	if got != "ok" {
		t.Errorf("%s: %s", where, got)
	}
}

// TestConsoleConversation: a person talks to the agent in the console,
// against a kernel whose turns run on a scripted model — types a message,
// sees the assistant's text stream in (painted in the frame after its
// event), a tool call's card go from running to its outcome, approves and
// rejects calls inline, sees a render drawn inline as its props stream,
// cancels a running turn, finds the turns as a trace, reloads and finds
// the same conversation; hostile text in every part stays text; the same
// pages fit a phone (390×844) and a desktop (1280×800) without sideways
// scrolling. Screenshots: conversation, conversation-phone,
// conversation-approval, conversation-render.
func TestConsoleConversation(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model", dir: t.TempDir()})
	s := k.session("talk")
	release := make(chan struct{})
	talkCaps(t, s, release)
	endTurnAtCleanup(t, s)
	b := tab{t, browser(t)}
	signIn(b, k)
	b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/talk"))
	b.until("the conversation, live, with its message box", `document.querySelector('#conversation .msg-input')?.disabled === false && brainConsole.session()?.conn?.state === 'live'`)
	if note := eval[string](b, `document.querySelector('.box-note').textContent`); !strings.Contains(note, "scripted-model") {
		t.Fatalf("the box's note %q does not name the model", note)
	}
	run := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	turnEnded := func(b tab, n int, reason string) {
		b.t.Helper()
		b.until(fmt.Sprintf("turn %d %s", n, reason), fmt.Sprintf(`document.querySelector('.turn[data-turn="%d"]')?.dataset.reason === %s && document.querySelector('#conversation').dataset.running === 'false'`, n, js(reason)))
	}
	send := func(b tab, text string) {
		b.t.Helper()
		b.do("type and press Enter", chromedp.SendKeys(chromedp.CSS(".msg-input"), text), chromedp.KeyEvent("\r"))
	}

	var paint map[string]float64
	run("type a message; the text streams in; a tool call goes from running to its outcome", func(t *testing.T) {
		b := tab{t, b.ctx}
		gate := make(chan struct{})
		m.steps <- func(_ context.Context, req *driver.Request, onText func(string)) (*driver.Reply, error) {
			for _, piece := range []string{"Let me ", "look at **notes** ", `<img src=x onerror="window.__xss=11"> `, "[x](javascript:window.__xss=11)"} {
				onText(piece)
				<-gate // the test looks at the page between pieces
			}
			return &driver.Reply{Text: xssAssistant, Usage: &protocol.Usage{InputTokens: 120, OutputTokens: 12},
				ToolCalls: []protocol.ToolCall{{ID: "t1", Name: req.ToolName("fs.read"), Input: json.RawMessage(`{"path":"notes.txt"}`)}}}, nil
		}
		m.steps <- answer("notes.txt says *hello*.", &protocol.Usage{InputTokens: 180, OutputTokens: 7, CachedInputTokens: 128})
		// The paint probe: at each assistant_delta's arrival, before the
		// console handles it, a frame callback is registered; when that
		// frame comes (before it is painted), the streaming message must
		// hold the text it held at the arrival and the delta after it — or
		// have been replaced already by the step's final message.
		b.do("install the paint probe", chromedp.Evaluate[chromedp.Void](`(() => {
			window.__paint = [];
			const c = brainConsole.session().conn, orig = c.onFrame.bind(c);
			const streaming = () => document.querySelector('.msg.assistant.streaming .text');
			c.onFrame = (data) => { // what the connection's socket calls with each frame, before anything else
				let f; try { f = JSON.parse(data); } catch {}
				if (f && f.msg && f.msg.type === 'assistant_delta') {
					const t0 = performance.now(), seq = f.seq, expect = (streaming()?.textContent || '') + f.msg.text;
					requestAnimationFrame(() => {
						const el = streaming();
						const final = [...document.querySelectorAll('#conversation .msg.assistant:not(.streaming)')].some(e => Number(e.dataset.seq) > seq);
						window.__paint.push({ms: performance.now() - t0, shown: el ? el.textContent.startsWith(expect) : final, seen: el ? el.textContent : final ? 'replaced by the final message' : 'nothing'});
					});
				}
				orig(data);
			};
		})()`))
		send(b, xssUser)
		b.until("the user's message", `[...document.querySelectorAll('.msg.user .text')].some(e => e.textContent === `+js(xssUser)+`)`)
		if got := eval[string](b, `(document.activeElement === document.querySelector('.msg-input')) + ' ' + JSON.stringify(document.querySelector('.msg-input').value)`); got != `true ""` {
			t.Fatalf("after sending: focus on the box, box %s", got)
		}
		b.until("the first piece streaming", `document.querySelector('.msg.assistant.streaming .text')?.textContent === 'Let me '`)
		b.until("the running state", `document.querySelector('#conversation').dataset.running === 'true' && !document.querySelector('.msg-box .cancel').hidden && document.querySelector('.msg-box .send').disabled`)
		gate <- struct{}{}
		b.until("the second piece in place", `document.querySelector('.msg.assistant.streaming .text')?.textContent === 'Let me look at **notes** '`)
		if n := eval[int](b, `document.querySelectorAll('.msg.assistant').length`); n != 1 {
			t.Fatalf("%d assistant messages while streaming, want the one growing in place", n)
		}
		gate <- struct{}{}
		b.until("the third piece", `document.querySelector('.msg.assistant.streaming .text')?.textContent.endsWith('window.__xss=11"> ')`)
		gate <- struct{}{}
		b.until("the fourth piece", `document.querySelector('.msg.assistant.streaming .text')?.textContent.endsWith('(javascript:window.__xss=11)')`)
		gate <- struct{}{}
		b.until("the final message, as markdown", `document.querySelector('.msg.assistant[data-step="1"] .md strong')?.textContent === 'notes'`)
		b.until("the call running, with a spinner", `(() => { const c = document.querySelector('.card.tool[data-name="fs.read"]'); return c && c.dataset.state === 'running' && c.querySelector('.spinner') && c.dataset.call; })()`)
		if got := eval[string](b, `document.querySelector('.card.tool[data-name="fs.read"] .card-head').textContent`); !strings.Contains(got, "Read a file") || !strings.Contains(got, "fs.read") {
			t.Fatalf("the card's head %q lacks the displayName and the name", got)
		}
		close(release)
		b.until("the outcome", `(() => { const c = document.querySelector('.card.tool[data-name="fs.read"]'); return c.dataset.state === 'ok' && c.querySelector('.outcome.ok').textContent.includes('contents of notes.txt'); })()`)
		b.until("the answer", `document.querySelector('.msg.assistant[data-step="2"] .md em')?.textContent === 'hello'`)
		turnEnded(b, 1, "completed")
		if link := eval[string](b, `document.querySelector('.card.tool[data-name="fs.read"] .call-link').getAttribute('href')`); !strings.HasPrefix(link, "#/s/talk/call/") {
			t.Fatalf("the card's call link %q", link)
		}
		// The probe records at the frame after each delta: the last one's
		// frame may come after the final message is drawn.
		b.until("the probe's record of the five deltas", `window.__paint.length >= 5`)
		paint = eval[map[string]float64](b, `(() => {
			const p = window.__paint, ms = p.map(x => x.ms).sort((a, b) => a - b);
			return {n: p.length, shown: p.filter(x => x.shown).length, median: ms[ms.length >> 1] || 0, max: ms[ms.length - 1] || 0, reconnects: brainConsole.session().conn.reconnects};
		})()`)
		t.Logf("streamed text: %v deltas; at the frame after each delta's arrival, %v already shown; arrival to that frame: median %.1f ms, max %.1f ms (%v reconnects)", paint["n"], paint["shown"], paint["median"], paint["max"], paint["reconnects"])
		if paint["n"] < 5 || paint["shown"] != paint["n"] {
			t.Fatalf("the streamed text was not painted in the frame after its event: %v\n%s", paint, eval[string](b, `JSON.stringify(window.__paint)`))
		}
	})

	run("approve a call inline; it runs", func(t *testing.T) {
		b := tab{t, b.ctx}
		m.steps <- call("t2", "fs.delete", `{"path":`+js(xssInput)+`}`)
		m.steps <- answer("Deleted.", nil)
		send(b, "delete that folder")
		card := `document.querySelector('.card.tool[data-name="fs.delete"]')`
		b.until("the approval in the card", card+`?.dataset.state === 'awaiting_approval' && `+card+`.querySelector('.approval:not([hidden]) .approve') !== null`)
		if got := eval[string](b, card+`.querySelector('.approval-input').textContent`); !strings.Contains(got, jsonText(xssInput)) {
			t.Fatalf("the approval shows %q, want the input", got)
		}
		b.until("the header counts it", `document.querySelector('#session-status').dataset.awaiting === '1' && document.querySelector('#inbox-count')?.textContent === '1'`)
		b.do("scroll to the card", chromedp.ScrollIntoView(chromedp.CSS(`.card.tool[data-name="fs.delete"]`)))
		b.screenshot("conversation-approval")
		b.do("approve", chromedp.Click(chromedp.CSS(`.card.tool[data-name="fs.delete"] .approve`)))
		b.until("it ran", card+`.dataset.state === 'ok' && `+card+`.querySelector('.outcome.ok').textContent.includes('deleted')`)
		turnEnded(b, 2, "completed")
		b.until("the header and the badge count no approval", `document.querySelector('#session-status').dataset.awaiting === '0' && getComputedStyle(document.querySelector('#inbox-count')).display === 'none'`)
	})

	run("reject a call inline with feedback; the model reads it", func(t *testing.T) {
		b := tab{t, b.ctx}
		read := make(chan string, 1)
		m.steps <- call("t3", "fs.delete", `{"path":"secret/"}`)
		m.steps <- func(_ context.Context, req *driver.Request, onText func(string)) (*driver.Reply, error) {
			last := req.Messages[len(req.Messages)-1]
			b, _ := json.Marshal(last.Outcome)
			read <- string(b)
			onText("Understood.")
			return &driver.Reply{Text: "Understood."}, nil
		}
		b.do("type two lines: Shift-Enter is a new line, Enter sends", chromedp.SendKeys(chromedp.CSS(".msg-input"), "and the secret one"),
			chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)), chromedp.SendKeys(chromedp.CSS(".msg-input"), "too"), chromedp.KeyEvent("\r"))
		b.until("one message of two lines", `[...document.querySelectorAll('.msg.user .text')].some(e => e.textContent === 'and the secret one\ntoo')`)
		card := `document.querySelectorAll('.card.tool[data-name="fs.delete"]')[1]`
		b.until("the approval", card+`?.dataset.state === 'awaiting_approval'`)
		b.do("write feedback and reject", chromedp.SendKeys(chromedp.CSS(`.card.tool[data-tool-call="t3"] .feedback`), xssFeedback),
			chromedp.Click(chromedp.CSS(`.card.tool[data-tool-call="t3"] .reject`)))
		b.until("the rejection with its feedback", card+`.dataset.state === 'error' && `+card+`.querySelector('.outcome.err').textContent.includes('not that folder')`)
		select {
		case got := <-read:
			if !strings.Contains(got, `"rejected"`) || !strings.Contains(got, "not that folder") {
				t.Fatalf("the model read %s", got)
			}
		case <-time.After(wait):
			t.Fatal("the model never read the outcome")
		}
		turnEnded(b, 3, "completed")
	})

	run("a render drawn inline as its props stream", func(t *testing.T) {
		b := tab{t, b.ctx}
		gate := make(chan struct{})
		pad := strings.Repeat("more words ", 60) // each piece passes the stream's byte step
		m.steps <- func(_ context.Context, req *driver.Request, onText func(string)) (*driver.Reply, error) {
			wire := req.ToolName("chart.inline")
			onText("Here is the chart.")
			req.ToolCallDelta(0, wire, `{"note":"`+pad+`","title":"Q3 <img src=x onerror=\"window.__xss=12\">`)
			<-gate
			req.ToolCallDelta(0, wire, ` revenue","points":[1,2`)
			req.ToolCallDelta(0, wire, `,3],"more":"`+pad+`"}`)
			<-gate
			return &driver.Reply{Text: "Here is the chart.", ToolCalls: []protocol.ToolCall{{ID: "t4", Name: wire,
				Input: json.RawMessage(`{"title":"Q3 revenue","points":[1,2,3,4]}`)}}}, nil
		}
		m.steps <- answer("Drawn.", nil)
		send(b, "chart the quarter")
		inline := `document.querySelector('.msg.assistant .inline-render .surface, .msg.assistant.streaming .cards .surface')`
		b.until("the partial props drawn in the chat", inline+`?.querySelector('.md h3')?.textContent === 'Q3 <img src=x onerror="window.__xss=12">' && `+inline+`.dataset.partial === 'true'`)
		gate <- struct{}{}
		b.until("the later props in place", inline+`.querySelector('.md').textContent.includes('points: [1,2,3]')`)
		b.do("scroll to the render", chromedp.ScrollIntoView(chromedp.CSS(`.surface .md`)))
		b.screenshot("conversation-render")
		gate <- struct{}{}
		card := `document.querySelector('.card.tool[data-tool-call="t4"]')`
		b.until("the card with the final props, the marker gone", card+` && `+card+`.querySelector('.surface')?.dataset.partial === 'false' && `+card+`.querySelector('.surface .md').textContent.includes('points: [1,2,3,4]') && `+card+`.dataset.state === 'ok'`)
		if n := eval[int](b, `document.querySelectorAll('#conversation .surface').length`); n != 1 {
			t.Fatalf("%d surfaces in the conversation, want the one redrawn in place", n)
		}
		turnEnded(b, 4, "completed")
	})

	run("cancel a running turn", func(t *testing.T) {
		b := tab{t, b.ctx}
		m.steps <- func(ctx context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
			onText("Thinking about it")
			<-ctx.Done()
			return &driver.Reply{Text: "Thinking about it"}, ctx.Err()
		}
		send(b, "think hard")
		b.until("the text, and Cancel", `document.querySelector('.msg.assistant.streaming .text')?.textContent === 'Thinking about it' && !document.querySelector('.msg-box .cancel').hidden`)
		b.do("cancel", chromedp.Click(chromedp.CSS(".msg-box .cancel")))
		turnEnded(b, 5, "cancelled")
		b.until("the box back", `!document.querySelector('.msg-box .send').disabled && document.querySelector('.msg-box .cancel').hidden && document.activeElement === document.querySelector('.msg-input')`)
		if got := eval[string](b, `document.querySelector('.turn[data-turn="5"] .turn-end').textContent`); !strings.Contains(got, "cancelled") || !strings.Contains(got, "ada") {
			t.Fatalf("turn 5 ends %q, want cancelled by the operator", got)
		}
	})

	run("the turns as a trace", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the trace", chromedp.Navigate(k.console.URL+"/#/s/talk/trace"))
		b.until("turn 1's steps", `document.querySelectorAll('.trace-turn[data-turn="1"] .trace-step').length === 2`)
		got := eval[string](b, `document.querySelector('.trace-turn[data-turn="1"]').innerText`)
		for _, want := range []string{"completed", "120 in / 12 out", "180 in / 7 out (128 cached)", "fs.read", "300 in / 19 out tokens"} {
			if !strings.Contains(got, want) {
				t.Fatalf("turn 1's trace lacks %q:\n%s", want, got)
			}
		}
		if got := eval[string](b, `document.querySelector('.trace-turn[data-turn="5"] h3').textContent`); !strings.Contains(got, "cancelled") {
			t.Fatalf("turn 5: %q", got)
		}
		b.screenshot("trace")
	})

	run("reload: the same conversation, no message twice", func(t *testing.T) {
		b := tab{t, b.ctx}
		summary := `[...document.querySelectorAll('#conversation .msg, #conversation .card.tool, #conversation .turn-end:not([hidden])')].map(e => e.className + ':' + (e.dataset.state || '') + ':' + (e.querySelector('.text, .md, .card-head') || e).textContent.trim().slice(0, 60)).join('\n')`
		b.do("open the conversation", chromedp.Navigate(k.console.URL+"/#/s/talk/conversation"))
		b.until("drawn", `document.querySelectorAll('.turn-end:not([hidden])').length === 5 && brainConsole.session()?.conn?.state === 'live' && brainConsole.session().conn.lastSeq === `+fmt.Sprint(s.LastSeq()))
		before := eval[string](b, summary)
		b.do("reload", chromedp.Reload())
		b.until("drawn again", `document.querySelectorAll('.turn-end:not([hidden])').length === 5 && brainConsole.session()?.conn?.state === 'live' && brainConsole.session().conn.lastSeq === `+fmt.Sprint(s.LastSeq()))
		after := eval[string](b, summary)
		if before != after {
			t.Fatalf("after a reload the conversation reads\n%s\nbefore it read\n%s", after, before)
		}
		users, assistants := 0, 0
		for _, e := range s.Conversation() {
			switch e.Message.Role {
			case protocol.RoleUser:
				users++
			case protocol.RoleAssistant:
				assistants++
			}
		}
		if got, want := eval[string](b, `document.querySelectorAll('.msg.user').length + ' ' + document.querySelectorAll('.msg.assistant').length`), fmt.Sprintf("%d %d", users, assistants); got != want {
			t.Fatalf("user and assistant messages drawn: %s, the conversation has %s", got, want)
		}
		b.screenshot("conversation")
	})

	run("hostile text in user and assistant text, inputs, outcomes and feedback stays text", func(t *testing.T) {
		b := tab{t, b.ctx}
		text := eval[string](b, `document.querySelector('#conversation').textContent`)
		for _, p := range []string{xssUser, `<img src=x onerror="window.__xss=11">`, xssFeedback} { // the partial props' payload was checked as it streamed
			if !strings.Contains(text, p) {
				t.Errorf("the payload %q is not shown as text", p)
			}
		}
		b.do("open every card's input and outcome", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('#conversation details').forEach(d => d.open = true)`))
		if got := eval[string](b, `document.querySelector('#conversation').textContent`); !strings.Contains(got, jsonText(xssInput)) || !strings.Contains(got, jsonText(xssResult)) {
			t.Errorf("the hostile input or result is not shown as text")
		}
		// A relative or protocol-relative link has no base a peer chose:
		// text, not an <a> without href that looks like a link.
		if got := eval[string](b, `String(window.__xss) + ' imgs=' + document.querySelectorAll('main img, main script').length + ' js-links=' + document.querySelectorAll('a[href^="javascript"]').length + ' relative-links=' + document.querySelectorAll('a[href*="invalid"]').length + ' hrefless-links=' + document.querySelectorAll('#conversation a:not([href])').length`); got != "undefined imgs=0 js-links=0 relative-links=0 hrefless-links=0" {
			t.Fatalf("a payload ran or became an element: %s", got)
		}
	})

	run("every page fits a phone and a desktop", func(t *testing.T) {
		b := tab{t, b.ctx}
		// A call waiting for approval, so that the inbox and the card have
		// one to show.
		go s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", obj(`{"path":"`+strings.Repeat("very/long/path/", 12)+`"}`))
		t.Cleanup(func() {
			for _, c := range s.Snapshot().PendingCalls {
				_ = s.Cancel(c.CallID, "the test ended")
			}
		})
		callID := eval[string](b, `document.querySelector('.card.tool[data-name="fs.read"]').dataset.call`)
		if got := eval[string](b, `[document.querySelector('.card.tool').tabIndex, document.querySelector('.msg.assistant').tabIndex].join(',')`); got != "0,0" {
			t.Errorf("cards and messages are not focusable: tabIndex %s", got)
		}
		pages := []string{"#/sessions", "#/s/talk/conversation", "#/s/talk/trace", "#/s/talk/registry", "#/s/talk/events", "#/s/talk/call/" + callID, "#/approvals"}
		for _, vp := range []struct {
			w, h   int64
			mobile bool
		}{{390, 844, true}, {360, 740, true}, {1280, 800, false}} {
			opts := []chromedp.EmulateViewportOption{}
			if vp.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			b.do(fmt.Sprintf("a %d×%d viewport", vp.w, vp.h), chromedp.EmulateViewport(vp.w, vp.h, opts...))
			for _, p := range pages {
				b.do("open "+p, chromedp.Navigate(k.console.URL+"/"+p))
				b.until(p+" drawn", `document.querySelector('main h1') !== null && (!location.hash.startsWith('#/s/') || brainConsole.session()?.conn?.state === 'live')`)
				if strings.HasSuffix(p, "/registry") {
					b.do("open every capability", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('#registry .cap-row').forEach(b => b.click())`))
				}
				if p == "#/approvals" {
					b.until("the pending approval", `document.querySelector('#inbox tr[data-call]') !== null`)
				}
				noHorizontalScroll(t, b, fmt.Sprintf("%s at %d×%d", p, vp.w, vp.h))
				if text := eval[string](b, `document.querySelector('main').innerText`); regexp.MustCompile(`\bnull\b`).MatchString(text) {
					t.Errorf("%s: a stray null in the page:\n%s", p, text)
				}
				if strings.HasSuffix(p, "/events") {
					b.until("timeline rows, focusable", `document.querySelector('.t-row:not([hidden]) .c-msg') !== null && document.querySelector('.t-row').tabIndex === 0`)
					if w := eval[float64](b, `document.querySelector('.t-row:not([hidden]) .c-msg').getBoundingClientRect().width`); w < 100 {
						t.Errorf("the timeline's message column is %.0f px wide at %d×%d", w, vp.w, vp.h)
					}
				}
				if vp.mobile && p == "#/s/talk/conversation" {
					b.until("the whole conversation", `brainConsole.session().conversation.complete`)
					b.do("to its end", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.documentElement.scrollHeight)`))
					b.screenshot("conversation-phone")
				}
			}
			b.do("open the palette", chromedp.Navigate(k.console.URL+"/#/s/talk/registry"))
			b.until("live", `brainConsole.session()?.conn?.state === 'live'`)
			b.do("Ctrl-K", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
			b.until("the palette", `document.querySelector('.palette-search') !== null`)
			noHorizontalScroll(t, b, fmt.Sprintf("the palette at %d×%d", vp.w, vp.h))
			b.do("close", chromedp.KeyEvent("\x1b"))
		}
		b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))
	})
}

// TestConsoleLongConversation: the first view of a conversation of 500
// messages (200 turns, each a user message and an answer, every second
// one with a tool call before it: 200 user and 300 assistant messages
// drawn, and 100 tool results in cards), opened from the sessions list,
// shows its end under 300 ms (on a loaded machine, under four first views
// of a one-message session measured beside it); all of it is drawn after that, every card
// bound to its call by the replayed events, and the view stays at the
// end.
func TestConsoleLongConversation(t *testing.T) {
	k := newKernelWith(t, kernelOptions{model: newScriptModel(), modelName: "scripted-model"})
	s := k.session("long")
	talkCaps(t, s, nil)
	s.SetTurnRunner(nil) // the turns below are written by the test
	messages := 0
	for i := range 200 {
		n, err := s.StartTurn(session.Runtime, fmt.Sprintf("question %d: what is in file %d?", i, i))
		if err != nil {
			t.Fatal(err)
		}
		messages++
		if i%2 == 0 {
			// As the driver does it: the assistant's message, then the
			// call, then its result.
			tc := protocol.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "fs.read", Input: obj(fmt.Sprintf(`{"path":"file%d.txt"}`, i))}
			if err := s.AppendMessage(n, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "Let me read it.", ToolCalls: []protocol.ToolCall{tc}, DurationMs: 420,
				Usage: &protocol.Usage{InputTokens: 900, OutputTokens: 20}}); err != nil {
				t.Fatal(err)
			}
			messages++
			out := s.Invoke(context.Background(), protocol.AudienceLLM, "fs.read", tc.Input)
			if err := s.AppendMessage(n, protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Outcome: &out, DurationMs: 3}); err != nil {
				t.Fatal(err)
			}
		}
		text := fmt.Sprintf("File %d holds **%d lines** of notes:\n\n- one point\n- another point with `code`\n\nand a [link](https://example.com/%d).", i, i*3, i)
		if err := s.AppendMessage(n, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: text, DurationMs: 800, Usage: &protocol.Usage{InputTokens: 1000, OutputTokens: 40}}); err != nil {
			t.Fatal(err)
		}
		messages++
		s.EndTurn(protocol.TurnCompleted, "")
	}
	conv := s.Conversation()
	last := conv[len(conv)-1].Seq
	if messages != 500 || len(conv) != 600 {
		t.Fatalf("%d messages drawn, %d in the conversation; want 500 and 600", messages, len(conv))
	}
	// A one-message session beside it, opened the same way: the baseline
	// of a first view on this machine at this moment.
	short := k.session("short")
	talkCaps(t, short, nil)
	short.SetTurnRunner(nil)
	if _, err := short.StartTurn(session.Runtime, "one question"); err != nil {
		t.Fatal(err)
	}
	short.EndTurn(protocol.TurnCompleted, "")
	shortLast := short.Conversation()[len(short.Conversation())-1].Seq
	b := tab{t, browser(t)}
	signIn(b, k)
	// The first view: the frame in which the conversation's last message
	// is in the page (the view opens at the end).
	probeFor := func(last uint64) string {
		return fmt.Sprintf(`(() => {
		window.__shown = 0;
		const check = () => { if (document.querySelector('#conversation .msg[data-seq="%d"]')) { window.__shown = performance.now(); return; } requestAnimationFrame(check); };
		window.__start = performance.now();
		// From the click itself (not from the test's commands before it).
		document.addEventListener('click', () => { window.__start = performance.now(); requestAnimationFrame(check); }, {capture: true, once: true});
		if (location.hash !== '#/sessions') requestAnimationFrame(check);
	})()`, last)
	}
	probe := probeFor(last)
	all := `document.querySelectorAll('#conversation .msg').length === 500 && document.querySelectorAll('#conversation .card.tool[data-state="ok"]').length === 100 && document.querySelectorAll('#conversation .card.tool[data-call]').length === 100`
	// Three times, the median: the machine is shared, and one load spike
	// must not decide.
	firstViews := func(id, probe string) []float64 {
		var views []float64
		for range 3 {
			b.do("open the sessions", chromedp.Navigate(k.console.URL+"/#/sessions"))
			b.until("the session listed", `document.querySelector('tr[data-session="`+id+`"] a') !== null`)
			b.do("click it", chromedp.Evaluate[chromedp.Void](probe), chromedp.Click(chromedp.CSS(`tr[data-session="`+id+`"] a`)))
			b.until("the first view", `window.__shown > 0`)
			views = append(views, eval[float64](b, `window.__shown - window.__start`))
		}
		slices.Sort(views)
		return views
	}
	baseline := firstViews("short", probeFor(shortLast))[1]
	views := firstViews("long", probe)
	fromList := views[1]
	b.until("all 500 messages, every card bound to its call by the replayed events", all+` && brainConsole.session()?.conversation.complete && brainConsole.session().conn?.lastSeq === `+fmt.Sprint(s.LastSeq()))
	complete := eval[float64](b, `performance.getEntriesByName('brain:conversation-complete').pop().startTime - window.__start`)
	if at := eval[float64](b, `window.scrollY + window.innerHeight - document.documentElement.scrollHeight`); at < -80 {
		t.Errorf("the view is %.0f px above the conversation's end after the history was drawn", -at)
	}

	b.do("leave", chromedp.Navigate("about:blank"))
	b.do("a fresh load of its address", chromedp.Navigate(k.console.URL+"/#/s/long"))
	b.do("probe", chromedp.Evaluate[chromedp.Void](probe))
	b.until("the first view", `window.__shown > 0`)
	fresh := eval[map[string]float64](b, `(() => {
		const r = performance.getEntriesByType('resource');
		return {shown: window.__shown, conversation: (r.find(e => e.name.endsWith('/conversation')) || {}).duration || 0};
	})()`)
	b.until("all 500 again", all)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("first view of 500 messages (600 with the tool results): %.0f ms median (%.0f, %.0f, %.0f) from the click in the sessions list to the frame showing the conversation's end (all 500 drawn and %d events replayed %.0f ms after the click); a one-message session's %.0f ms; %.0f ms from a fresh load's navigation start (its GET of the conversation took %.0f ms); load average %s",
		fromList, views[0], views[1], views[2], s.LastSeq(), complete, baseline, fresh["shown"], fresh["conversation"], strings.Join(strings.Fields(string(load))[:3], " "))
	// 300 ms on a quiet machine; on a loaded one, four first views of a
	// one-message session measured the same way in this test (at load 10
	// under the race detector: 154 ms for it, 266 ms for the 500): drawing
	// 500 messages must not cost more than a few views of one, whatever
	// the machine's load.
	bound := max(300, 4*baseline)
	if fromList >= bound {
		t.Errorf("the first view of 500 messages took %.0f ms from the click, want < %.0f (a one-message session's took %.0f)", fromList, bound, baseline)
	}
}

// jsonText is s as it reads inside a JSON string the console shows.
func jsonText(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }

// TestConsoleWorkspace: a new session from the sessions list opens an
// empty conversation in which a turn runs; Escape gives the focus back to
// where it was; a restart of the kernel's console (a new console on the
// same data directory) leaves the open conversation and the inbox to
// reconnect by themselves, still signed in; a restart without the
// operator token in the tokens ends the sign-in.
func TestConsoleWorkspace(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model", dir: t.TempDir()})
	b := tab{t, browser(t)}
	signIn(b, k)
	run := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	var id string
	run("a new session opens an empty conversation, and a turn runs in it", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the sessions", chromedp.Navigate(k.console.URL+"/#/sessions"))
		b.until("the button", `document.querySelector('.new-session') !== null`)
		b.do("new session", chromedp.Click(chromedp.CSS(".new-session")))
		b.until("an empty conversation, live, its box enabled", `/^#\/s\/[^/]+\/conversation$/.test(location.hash) && document.querySelector('.conv-empty') !== null && document.querySelector('.msg-input')?.disabled === false && brainConsole.session()?.conn?.state === 'live'`)
		id = eval[string](b, `brainConsole.session().id`)
		if _, release, err := k.mgr.Lookup(context.Background(), id); err != nil { // Lookup creates nothing
			t.Fatalf("the new session %q: %v", id, err)
		} else {
			release()
		}
		m.steps <- answer("Hello there.", &protocol.Usage{InputTokens: 5, OutputTokens: 3})
		b.do("type", chromedp.SendKeys(chromedp.CSS(".msg-input"), "hi"), chromedp.KeyEvent("\r"))
		b.until("the answer, the turn completed", `document.querySelector('.msg.assistant .md')?.textContent === 'Hello there.' && document.querySelector('.turn[data-turn="1"]')?.dataset.reason === 'completed' && document.querySelector('.conv-empty') === null`)
		m.steps <- func(context.Context, *driver.Request, func(string)) (*driver.Reply, error) {
			return nil, errors.New("the model server answered 503")
		}
		b.do("type", chromedp.SendKeys(chromedp.CSS(".msg-input"), "and now?"), chromedp.KeyEvent("\r"))
		b.until("the turn failed, with its error", `document.querySelector('.turn[data-turn="2"]')?.dataset.reason === 'error' && document.querySelector('.turn[data-turn="2"] .turn-end').textContent.includes('the model server answered 503')`)
	})

	run("Escape gives the focus back", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("focus the box", chromedp.Focus(chromedp.CSS(".msg-input")))
		b.do("Ctrl-K", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		b.until("the palette's search focused", `document.activeElement === document.querySelector('.palette-search')`)
		b.do("Escape", chromedp.KeyEvent("\x1b"))
		b.until("the focus back in the box", `document.querySelector('#overlay').hidden && document.activeElement === document.querySelector('.msg-input')`)
		b.do("focus a card", chromedp.Evaluate[chromedp.Void](`document.querySelector('.msg.assistant').focus()`))
		b.do("Ctrl-K", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		b.until("the palette", `document.activeElement === document.querySelector('.palette-search')`)
		b.do("Escape", chromedp.KeyEvent("\x1b"))
		b.until("the focus back on the message", `document.activeElement === document.querySelector('.msg.assistant')`)
	})

	run("a restart: the conversation and the inbox reconnect, still signed in", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.until("live", `brainConsole.session()?.conn?.state === 'live' && brainConsole.feed()?.state === 'live'`)
		k.restartConsole(k.tokens)
		b.until("reconnected by itself", `brainConsole.session()?.conn?.reconnects >= 1 && brainConsole.session().conn.state === 'live' && brainConsole.feed().state === 'live' && document.querySelector('#token') === null`)
		m.steps <- answer("Still here.", nil)
		b.do("type", chromedp.SendKeys(chromedp.CSS(".msg-input"), "are you there?"), chromedp.KeyEvent("\r"))
		b.until("the answer after the restart", `document.querySelector('.turn[data-turn="3"]')?.dataset.reason === 'completed'`)
		if got := eval[string](b, `document.querySelectorAll('.msg.user').length + ' ' + document.querySelectorAll('.msg.assistant').length + ' ' + brainConsole.session().conn.gaps + ' ' + brainConsole.session().conn.duplicates`); got != "3 2 0 0" {
			t.Fatalf("after the reconnect: user, assistant messages, gaps, duplicates = %s, want 3 2 0 0", got)
		}
		b.do("open the inbox", chromedp.Navigate(k.console.URL+"/#/approvals"))
		b.until("the inbox live, no sign-in", `document.querySelector('main h1 .conn-state')?.textContent === 'live' && document.querySelector('#token') === null`)
	})

	run("a restart without the operator token ends the sign-in", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the conversation", chromedp.Navigate(k.console.URL+"/#/s/"+id))
		b.until("live", `brainConsole.session()?.conn?.state === 'live'`)
		revoked, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Name: "web", Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		k.restartConsole(revoked)
		b.until("the sign-in form", `document.querySelector('#token') !== null && document.querySelector('#signin-error').textContent.includes('sign in again')`)
	})
}
