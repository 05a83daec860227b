package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// The XSS payloads: each would set window.__xss (and leave an <img> in the
// page) if any string reached the DOM as HTML.
const (
	xssName     = `x<img/src=x/onerror=window.__xss=1>`
	xssDesc     = `<img src=x onerror="window.__xss=2">a hostile description`
	xssInput    = `<img src=x onerror="window.__xss=3">/etc`
	xssResult   = `<img src=x onerror="window.__xss=4">`
	xssFeedback = `not that folder <img src=x onerror="window.__xss=5">`
	xssFallback = "# {{title}}\n\n<script>window.__xss=6</script><img src=x onerror=\"window.__xss=6\"> [a link](javascript:window.__xss=6) and **{{body}}**"
)

func obj(s string) json.RawMessage { return json.RawMessage(s) }

func registerDemo(t *testing.T, s *session.Session, frames string) {
	t.Helper()
	echo := session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })
	agent := protocol.Origin{Kind: protocol.OriginAgent}
	timeout := int64(30000)
	for _, c := range []struct {
		cap protocol.Capability
		h   session.Handler
	}{
		{protocol.Capability{Name: "fs.delete", Description: "Delete a file.", RequiresApproval: true, Kind: protocol.KindEffect,
			InputSchema: obj(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Side: protocol.SideAgent, Origin: agent, CallTimeoutMs: &timeout},
			session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) {
				return json.Marshal(map[string]any{"deleted": true, "note": xssResult})
			})},
		{protocol.Capability{Name: "tickets.create", DisplayName: "Create ticket", Description: "Open a ticket.", Kind: protocol.KindEffect,
			Audience: []protocol.Audience{protocol.AudienceUser, protocol.AudienceLLM},
			InputSchema: obj(`{"type":"object","required":["title","priority","owner"],"properties":{
				"title":{"type":"string","minLength":1,"description":"What is wrong"},
				"priority":{"type":"string","enum":["low","normal","high"],"default":"normal"},
				"estimate":{"type":"integer","minimum":0},
				"urgent":{"type":"boolean"},
				"tags":{"type":"array","items":{"type":"string"}},
				"owner":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"email":{"type":"string","format":"email"}}},
				"due":{"oneOf":[{"title":"a date","type":"string","format":"date"},{"title":"in days","type":"integer"}]}}}`),
			Side: protocol.SideAgent, Origin: agent}, echo},
		{protocol.Capability{Name: "chart.show", Description: "Draw a chart.", Kind: protocol.KindRender,
			InputSchema: obj(`{"type":"object","properties":{"title":{"type":"string"},"points":{"type":"array"}}}`), Side: protocol.SideAgent, Origin: agent,
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: frames + "/frame.html"}, Targets: []protocol.RenderTarget{protocol.TargetPreview},
				Fallback: "Chart **{{title}}**", Streaming: true}},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return obj(`{"shown":true}`), nil })},
		{protocol.Capability{Name: "card.show", Description: "Show a card.", Kind: protocol.KindRender,
			InputSchema: obj(`{"type":"object"}`), Side: protocol.SideAgent, Origin: agent,
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: frames + "/card.js", TagName: "brain-card"},
				Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "card {{x}}"}},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return obj(`{"shown":true}`), nil })},
		{protocol.Capability{Name: "note.show", Description: "Show a note.", Kind: protocol.KindRender,
			InputSchema: obj(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}}}`), Side: protocol.SideAgent, Origin: agent,
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://widgets.example.com/note.js", TagName: "note-card"},
				Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: xssFallback}},
			session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return obj(`{"shown":true}`), nil })},
	} {
		if err := s.RegisterAgent(c.cap, c.h); err != nil {
			t.Fatalf("register %s: %v", c.cap.Name, err)
		}
	}
}

// TestConsole drives the console in headless Chromium against a real
// kernel on 127.0.0.1: every "Must show" of the console's issue, with a
// screenshot of each view (go test -run TestConsole ./console -update
// rewrites docs/console/*.png).
func TestConsole(t *testing.T) {
	k := newKernel(t)
	b := tab{t, browser(t)}

	demo := k.session("demo")
	registerDemo(t, demo, k.frames.URL)
	k.connectClient("demo", protocol.Capability{Name: xssName, Description: xssDesc, Audience: []protocol.Audience{protocol.AudienceUser},
		InputSchema: obj(`{"type":"object"}`), Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}})

	run := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow() // the later steps build on this one
		}
	}
	run("sign in", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the console", chromedp.Navigate(k.console.URL+"/"))
		b.until("the sign-in form", `document.querySelector('#token') !== null`)
		b.screenshot("signin")
		b.do("type a client token", chromedp.SendKeys(chromedp.CSS("#token"), clientToken), chromedp.Click(chromedp.CSS(".signin button[type=submit]")))
		b.until("the refusal of a client token", `document.querySelector('#signin-error').textContent.includes('operator token')`)
		b.do("type the operator token", chromedp.Evaluate[chromedp.Void](`document.querySelector('#token').value = ''`), chromedp.SendKeys(chromedp.CSS("#token"), operatorToken), chromedp.Click(chromedp.CSS(".signin button[type=submit]")))
		b.until("the operator's name", `document.querySelector('#operator-name')?.textContent === 'ada'`)

		ctx, cancel := context.WithTimeout(b.ctx, wait)
		defer cancel()
		cookies, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
			return chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{k.console.URL}})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(cookies.Cookies) != 1 || !cookies.Cookies[0].HTTPOnly || cookies.Cookies[0].SameSite != network.CookieSameSiteStrict || strings.Contains(cookies.Cookies[0].Value, operatorToken) {
			t.Fatalf("cookies = %+v", cookies.Cookies)
		}
		leaks := eval[string](b, `[location.href, JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.cookie, document.body.innerHTML].join('\n')`)
		if strings.Contains(leaks, operatorToken) || strings.Contains(leaks, "brain_console") {
			t.Fatalf("the token or the cookie is readable by the page:\n%s", leaks)
		}
	})

	run("sessions list", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the list", chromedp.Navigate(k.console.URL+"/#/sessions"))
		b.until("the demo row with its client", `(document.querySelector('tr[data-session="demo"]')?.innerText || '').includes('client 1')`)
		b.screenshot("sessions")
	})

	mc := k.mcpClient("demo")
	t.Cleanup(func() { // a failed step must not leave an MCP call waiting for its approval
		for _, c := range demo.Snapshot().PendingCalls {
			_ = demo.Cancel(c.CallID, "the test ended")
		}
	})
	callTool := func(name string, args map[string]any) chan *mcp.CallToolResult {
		ch := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := mc.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "transport: " + err.Error()}}}
			}
			ch <- res
		}()
		return ch
	}
	resultText := func(ch chan *mcp.CallToolResult) (string, bool) {
		t.Helper()
		select {
		case res := <-ch:
			var parts []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					parts = append(parts, tc.Text)
				}
			}
			return strings.Join(parts, "\n"), res.IsError
		case <-time.After(wait):
			t.Fatal("the MCP caller got no result")
			return "", false
		}
	}
	var approvedCall, rejectedCall string

	run("approve from the inbox; the MCP caller gets the result", func(t *testing.T) {
		b := tab{t, b.ctx}
		res := callTool("fs.delete", map[string]any{"path": xssInput})
		b.do("open the inbox", chromedp.Navigate(k.console.URL+"/#/approvals"))
		b.until("the pending approval", `document.querySelector('#inbox tr[data-call]')?.innerText.includes('fs.delete')`)
		approvedCall = eval[string](b, `document.querySelector('#inbox tr[data-call]').dataset.call`)
		b.screenshot("approvals")
		b.do("approve", chromedp.Click(chromedp.CSS("#inbox tr[data-call] .approve")))
		text, isErr := resultText(res)
		if isErr || !strings.Contains(text, `"deleted":true`) {
			t.Fatalf("MCP result %q (isError %v)", text, isErr)
		}
		b.until("the row to go", `document.querySelector('#inbox tr[data-call]') === null`)
	})

	run("a rejection's feedback reaches the MCP caller", func(t *testing.T) {
		b := tab{t, b.ctx}
		res := callTool("fs.delete", map[string]any{"path": "secret/"})
		b.until("the pending approval", `document.querySelector('#inbox tr[data-call]') !== null`)
		rejectedCall = eval[string](b, `document.querySelector('#inbox tr[data-call]').dataset.call`)
		b.do("write feedback", chromedp.SendKeys(chromedp.CSS("#inbox tr[data-call] .feedback"), xssFeedback))
		b.do("reject", chromedp.Click(chromedp.CSS("#inbox tr[data-call] .reject")))
		text, isErr := resultText(res)
		if !isErr || !strings.Contains(text, "rejected") || !strings.Contains(text, xssFeedback) {
			t.Fatalf("MCP result %q (isError %v), want the rejection with the feedback", text, isErr)
		}
		b.until("the row to go", `document.querySelector('#inbox tr[data-call]') === null`)
	})

	run("a decision made elsewhere leaves every inbox at once", func(t *testing.T) {
		b := tab{t, b.ctx}
		res := callTool("fs.delete", map[string]any{"path": "elsewhere"})
		b.until("the pending approval", `document.querySelector('#inbox tr[data-call]') !== null`)
		pending := demo.Snapshot().PendingCalls // the row is there: so is the call
		if len(pending) != 1 {
			t.Fatalf("pending = %+v", pending)
		}
		if err := demo.Approve(session.Client, &protocol.CapabilityApprove{CallID: pending[0].CallID, Decision: protocol.DecisionApproved,
			DecidedBy: "someone at the client", InputDigest: pending[0].InputDigest}); err != nil {
			t.Fatal(err)
		}
		b.until("the row to go", `document.querySelector('#inbox tr[data-call]') === null`)
		if _, isErr := resultText(res); isErr {
			t.Fatal("the call approved by the client failed")
		}
	})

	run("palette invocation through the generated form", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the session's registry", chromedp.Navigate(k.console.URL+"/#/s/demo/registry"))
		b.until("the registry", `document.querySelector('#registry li[data-name="tickets.create"]') !== null`)
		b.do("open tickets.create's details", chromedp.Click(chromedp.CSS(`#registry li[data-name="tickets.create"] .cap-row`)))
		b.until("its description, schema and Try it", `(() => { const d = document.querySelector('#registry li[data-name="tickets.create"] .cap-detail'); return !d.hidden && d.textContent.includes('Open a ticket.') && d.querySelector('.cap-schema') && d.querySelector('.try') && !/\bnull\b/.test(d.textContent); })()`)
		// Audience as the kernel enforces it: fs.delete (no audience, agent
		// origin) is llm by default and not user-invokable, so no Try it.
		if got := eval[string](b, `document.querySelector('#registry li[data-name="fs.delete"] .cap-row').textContent + ' try=' + !!document.querySelector('#registry li[data-name="fs.delete"] .try')`); !strings.Contains(got, "llm (default)") || strings.Contains(got, "user") || !strings.HasSuffix(got, "try=false") {
			t.Fatalf("fs.delete's row: %q", got)
		}
		b.screenshot("registry")
		b.do("Try it", chromedp.Click(chromedp.CSS(`#registry li[data-name="tickets.create"] .try`)))
		b.until("its form", `document.querySelector('.palette-form input[name="/title"]') !== null`)
		b.do("close", chromedp.KeyEvent("\x1b"))
		b.until("closed, the focus back on Try it", `document.querySelector('#overlay').hidden && document.activeElement === document.querySelector('#registry li[data-name="tickets.create"] .try')`)
		b.do("press Ctrl-K", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		b.until("the palette", `document.querySelector('.palette-search') !== null`)
		if sel := eval[string](b, `[...document.querySelectorAll('.palette-list li[role=option]')].map(li => li.getAttribute('aria-selected')).join(',')`); !strings.HasPrefix(sel, "true") || strings.Count(sel, "true") != 1 {
			t.Fatalf("the options' aria-selected: %q, want the first one selected", sel)
		}
		names := eval[[]string](b, `[...document.querySelectorAll('.palette-list li[data-name]')].map(li => li.dataset.name)`)
		for _, n := range names {
			if n == "fs.delete" || n == "chart.show" {
				t.Fatalf("the palette lists %s, which is not user-invokable: %v", n, names)
			}
		}
		b.do("search", chromedp.SendKeys(chromedp.CSS(".palette-search"), "ticket"))
		b.until("the match", `document.querySelectorAll('.palette-list li[data-name]').length === 1`)
		b.do("choose it", chromedp.Click(chromedp.CSS(`.palette-list li[data-name="tickets.create"]`)))
		b.until("the form", `document.querySelector('input[name="/title"]') !== null && document.querySelector('select[name="/priority"]') !== null && document.querySelector('input[name="/owner/name"]') !== null`)
		drawn := eval[string](b, `[
			document.querySelector('select[name="/priority"]').selectedOptions[0].textContent, // the default
			document.querySelector('input[name="/estimate"]').type + ':' + document.querySelector('input[name="/estimate"]').step,
			document.querySelector('input[name="/urgent"]').type,
			document.querySelector('input[name="/owner/email"]').type,
			document.querySelector('select[name="/due#choice"]').options.length,
			document.querySelector('fieldset.array[data-pointer="/tags"] button') !== null,
			document.querySelectorAll('fieldset.object[data-pointer="/owner"] .req').length,
			document.querySelector('.schema-form .desc').textContent,
		].join('|')`)
		if drawn != "normal|number:1|checkbox|email|2|true|2|What is wrong" {
			t.Fatalf("the form drew %q", drawn)
		}
		// Submit with the required title and owner name empty: the form
		// refuses them itself, at their fields, and sends nothing.
		before := demo.LastSeq()
		b.do("submit empty", chromedp.Click(chromedp.CSS(".palette-form button[type=submit]")))
		b.until("the errors at the title and owner name fields", `(document.querySelector('[data-error-for="/title"]')?.textContent || '').includes('required') && (document.querySelector('[data-error-for="/owner/name"]')?.textContent || '').includes('required')`)
		if demo.LastSeq() != before {
			t.Fatal("the form sent a call with empty required fields")
		}
		// A value the form lets through and the schema refuses: the
		// kernel's invalid_input lands on its field.
		b.do("fill the form with an estimate below the minimum",
			chromedp.SendKeys(chromedp.CSS(`input[name="/title"]`), "Login fails"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('select[name="/priority"]').value = '2'`), // "high"
			chromedp.SendKeys(chromedp.CSS(`input[name="/owner/name"]`), "Ada"),
			chromedp.SendKeys(chromedp.CSS(`input[name="/owner/email"]`), "ada@example.com"),
			chromedp.SendKeys(chromedp.CSS(`input[name="/estimate"]`), "-1"))
		b.do("submit", chromedp.Click(chromedp.CSS(".palette-form button[type=submit]")))
		b.until("the kernel's error at the estimate field", `(document.querySelector('[data-error-for="/estimate"]')?.textContent || '').length > 0`)
		b.do("fix the estimate", chromedp.Evaluate[chromedp.Void](`document.querySelector('input[name="/estimate"]').value = ''`), chromedp.SendKeys(chromedp.CSS(`input[name="/estimate"]`), "3"))
		b.do("submit", chromedp.Click(chromedp.CSS(".palette-form button[type=submit]")))
		b.until("the outcome", `document.querySelector('.palette-status .outcome.ok') !== null`)
		out := eval[string](b, `document.querySelector('.palette-status .outcome.ok pre').textContent`)
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("outcome %q: %v", out, err)
		}
		owner, _ := got["owner"].(map[string]any)
		if got["title"] != "Login fails" || got["priority"] != "high" || got["estimate"] != 3.0 || owner["name"] != "Ada" || owner["email"] != "ada@example.com" {
			t.Fatalf("the call received %v", got)
		}
		for _, untouched := range []string{"urgent", "tags", "due"} { // optional, never touched: not sent
			if _, ok := got[untouched]; ok {
				t.Fatalf("the call received %q, which nobody touched: %v", untouched, got)
			}
		}
		b.screenshot("palette")
		b.do("close", chromedp.KeyEvent("\x1b"))
	})

	run("an iframe render and a markdown fallback", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the session's events", chromedp.Navigate(k.console.URL+"/#/s/demo/events"))
		b.until("live", `document.querySelector('#conn-state')?.textContent === 'live'`)
		go demo.Invoke(context.Background(), protocol.AudienceLLM, "chart.show", obj(`{"title":"Q3","points":[1,2,3]}`))
		go demo.Invoke(context.Background(), protocol.AudienceLLM, "note.show", obj(`{"title":"Release notes","body":"<img src=x onerror=\"window.__xss=7\">"}`))
		b.until("the iframe", `document.querySelector('.surface iframe') !== null`)
		sandbox := eval[string](b, `document.querySelector('.surface iframe').getAttribute('sandbox')`)
		if sandbox != "allow-scripts" {
			t.Fatalf("iframe sandbox = %q", sandbox)
		}
		select {
		case got := <-k.seen:
			if !strings.Contains(got, `"title":"Q3"`) {
				t.Fatalf("the iframe received %s", got)
			}
		case <-time.After(wait):
			t.Fatal("the iframe never received its props")
		}
		b.until("the fallback", `document.querySelector('.fallback .md h1')?.textContent === 'Release notes'`)
		md := eval[string](b, `document.querySelector('.fallback .md').innerHTML`)
		if n := eval[int](b, `document.querySelectorAll('.fallback .md *:not(h1):not(p):not(strong)').length`); n != 0 || !strings.Contains(md, "<strong>") {
			t.Fatalf("the fallback holds %d elements beyond the markdown's own (or no markdown at all): %s", n, md)
		}
		if !strings.Contains(eval[string](b, `document.querySelector('.fallback .md').textContent`), `<img src=x onerror="window.__xss=7">`) {
			t.Fatal("the fallback does not show the prop as text")
		}
		go demo.Invoke(context.Background(), protocol.AudienceLLM, "card.show", obj(`{"x":"from an allowed origin"}`))
		b.until("the web component from the allowed origin", `(document.querySelector('.surface brain-card')?.textContent || '').includes('from an allowed origin')`)
		b.do("scroll to the renders", chromedp.ScrollIntoView(chromedp.CSS(".surfaces")))
		b.screenshot("renders")
	})

	run("call page with decision and timings", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the approved call", chromedp.Navigate(k.console.URL+"/#/s/demo/call/"+url.PathEscape(approvedCall)))
		b.until("the decision", `(document.querySelector('.decision')?.textContent || '').includes('ada')`)
		b.until("the timings", `document.querySelectorAll('.timings tbody tr').length >= 4`)
		b.until("the outcome", `(document.querySelector('.call-outcome')?.textContent || '').includes('deleted')`)
		b.screenshot("call")
		if text := eval[string](b, `document.querySelector('main').innerText`); regexp.MustCompile(`\bnull\b`).MatchString(text) {
			t.Fatalf("a stray null on the call page (it has no render):\n%s", text)
		}
		b.do("open the rejected call", chromedp.Navigate(k.console.URL+"/#/s/demo/call/"+url.PathEscape(rejectedCall)))
		b.until("the feedback", `(document.querySelector('.feedback-shown')?.textContent || '').includes('not that folder')`)
	})

	run("a dropped WebSocket resumes without gap or duplicate", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/demo"))
		b.until("live", `document.querySelector('#conn-state')?.textContent === 'live' && brainConsole.session().conn.lastSeq === `+fmt.Sprint(demo.LastSeq()))
		k.drop.down.Store(true)
		k.drop.dropAll()
		b.until("reconnecting shown", `document.querySelector('#conn-state')?.textContent === 'reconnecting'`)
		for i := range 5 { // events the console misses while down
			if out := demo.Invoke(context.Background(), protocol.AudienceUser, "tickets.create",
				obj(fmt.Sprintf(`{"title":"while down %d","priority":"low","owner":{"name":"x"}}`, i))); out.Err != nil {
				t.Fatal(out.Err)
			}
		}
		b.screenshot("reconnecting")
		k.drop.down.Store(false)
		last := demo.LastSeq()
		b.until("resumed to the last seq", fmt.Sprintf(`document.querySelector('#conn-state')?.textContent === 'live' && brainConsole.session().conn.lastSeq === %d`, last))
		check := eval[string](b, `(() => {
			const v = brainConsole.session(), c = v.conn;
			const seqs = v.timeline.all.filter(e => e.type !== 'snapshot').map(e => e.seq);
			for (let i = 1; i < seqs.length; i++) if (seqs[i] !== seqs[i-1] + 1) return 'not contiguous at ' + seqs[i-1] + ' -> ' + seqs[i];
			if (seqs[0] !== 1) return 'starts at ' + seqs[0];
			return 'ok ' + seqs.length + ' gaps=' + c.gaps + ' dups=' + c.duplicates + ' reconnects=' + c.reconnects + ' states=' + c.states.join(',');
		})()`)
		if !strings.HasPrefix(check, fmt.Sprintf("ok %d gaps=0 dups=0", last)) || !strings.Contains(check, "reconnecting") {
			t.Fatalf("after the resume: %s (last seq %d)", check, last)
		}
		t.Logf("resume: %s", check)
		b.do("scroll up", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		b.screenshot("session")
	})

	run("hostile strings never execute", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the session's registry", chromedp.Navigate(k.console.URL+"/#/s/demo/registry"))
		b.until("the hostile name shown as text", `(document.querySelector('#registry')?.textContent || '').includes(`+js(xssName)+`)`)
		b.do("open every capability's details", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('#registry .cap-row').forEach(b => b.click())`))
		b.until("the hostile description shown as text", `(document.querySelector('#registry')?.textContent || '').includes('a hostile description')`)
		b.do("open the palette", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		b.until("the hostile name in the palette", `(document.querySelector('.palette-list')?.textContent || '').includes(`+js(xssName)+`)`)
		b.do("close", chromedp.KeyEvent("\x1b"))
		for _, view := range []string{"/#/s/demo/call/" + url.PathEscape(approvedCall), "/#/s/demo/call/" + url.PathEscape(rejectedCall), "/#/s/demo/events", "/#/s/demo/registry", "/#/s/demo/conversation", "/#/s/demo/trace", "/#/approvals"} {
			b.do("open "+view, chromedp.Navigate(k.console.URL+view))
			b.until("the view", `document.querySelector('main h1') !== null`)
			got := eval[string](b, `String(window.__xss) + ' imgs=' + document.querySelectorAll('img, script:not([src])').length`)
			if got != "undefined imgs=0" {
				t.Fatalf("%s: a payload ran or became an element: %s", view, got)
			}
		}
		text := eval[string](b, `fetch('/v1/sessions/demo', {headers: {'X-Brain-Csrf': localStorage.getItem('brain.csrf')}}).then(r => r.text())`)
		for _, p := range []string{xssName, xssDesc, xssFallback} {
			if !strings.Contains(text, strings.ReplaceAll(strings.ReplaceAll(js(p)[1:len(js(p))-1], "<", `\u003c`), ">", `\u003e`)) {
				t.Fatalf("the payload %q is not in the session at all; the test proves nothing", p)
			}
		}
	})

	run("10,000 events: the timeline scrolls and filters under 100 ms", func(t *testing.T) {
		b := tab{t, b.ctx}
		echo := protocol.Capability{Name: "echo", Description: "echo", InputSchema: obj(`{"type":"object"}`),
			Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}}
		// fill registers echo in session id, calls it calls times (two
		// events a call) and returns the session's last seq.
		fill := func(id string, calls int) uint64 {
			s := k.session(id)
			if err := s.RegisterAgent(echo, session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil })); err != nil {
				t.Fatal(err)
			}
			for i := range calls {
				if out := s.Invoke(context.Background(), protocol.AudienceLLM, "echo", obj(fmt.Sprintf(`{"i":%d}`, i))); out.Err != nil {
					t.Fatal(out.Err)
				}
			}
			return s.LastSeq()
		}
		// open shows a session's timeline with every event and measures
		// each action on it: the synchronous work (JavaScript, style and
		// layout, forced) and the time to the next frame, each the median
		// of 5 runs (21 for the idle frame and the scroll); the max is
		// reported too. Medians keep someone else's load spike out.
		open := func(id string, last uint64) (map[string]float64, time.Duration) {
			start := time.Now()
			b.do("open "+id, chromedp.Navigate(k.console.URL+"/#/s/"+id))
			b.until("every event of "+id, fmt.Sprintf(`brainConsole.session()?.timeline.all.length === %d && document.querySelector('.t-count')?.textContent.startsWith('%d of')`, last, last))
			loaded := time.Since(start)
			return eval[map[string]float64](b, fmt.Sprintf(`(async () => {
				const last = %d;
				const tl = brainConsole.session().timeline;
				const frame = () => new Promise(r => requestAnimationFrame(() => r()));
				const once = async (f) => {
					const t = performance.now(); f(); tl.viewport.getBoundingClientRect(); tl.rows.offsetHeight;
					const work = performance.now() - t; await frame(); return [work, performance.now() - t];
				};
				const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
				const out = {};
				const measure = async (name, f, n = 5) => {
					const w = [], fr = [];
					for (let i = 0; i < n; i++) { const [a, b] = await once(() => f(i)); w.push(a); fr.push(b); }
					out[name] = med(w); out[name + 'Frame'] = med(fr); out[name + 'Max'] = Math.max(...fr);
				};
				await measure('idle', () => {}, 21);
				await measure('filterType', (i) => tl.setFilter({type: i %% 2 ? '' : 'capability_outcome'}));
				tl.setFilter({type: 'capability_outcome'}); out.filteredType = tl.filtered.length; tl.setFilter({type: ''});
				await measure('filterCall', (i) => tl.setFilter({call: i %% 2 ? '' : '-' + ((last >> 1) - 1)}));
				await measure('filterCap', (i) => tl.setFilter({call: '', cap: i %% 2 ? '' : 'echo'}));
				tl.setFilter({cap: ''});
				await measure('scroll', (i) => { tl.viewport.scrollTop = (i / 20) * (tl.viewport.scrollHeight - tl.viewport.clientHeight); tl.draw(); }, 21);
				await measure('jump', (i) => tl.jump(1 + (i * 2003) %% last));
				out.rowsInDOM = tl.rows.childElementCount;
				return out;
			})()`, last)), loaded
		}
		report := func(m map[string]float64) string {
			return fmt.Sprintf("median work / to next frame / max to next frame, in ms: filter by type %.1f / %.1f / %.1f (%v rows); by call %.1f / %.1f / %.1f; by capability %.1f / %.1f / %.1f; scroll (21 positions) %.1f / %.1f / %.1f; jump to seq %.1f / %.1f / %.1f; an idle frame %.1f; %v rows in the DOM",
				m["filterType"], m["filterTypeFrame"], m["filterTypeMax"], m["filteredType"],
				m["filterCall"], m["filterCallFrame"], m["filterCallMax"],
				m["filterCap"], m["filterCapFrame"], m["filterCapMax"],
				m["scroll"], m["scrollFrame"], m["scrollMax"],
				m["jump"], m["jumpFrame"], m["jumpMax"], m["idleFrame"], m["rowsInDOM"])
		}
		// The machine's own cost of each action: the same actions on a
		// 100-event timeline in the same tab, just before.
		small := fill("small", 50)
		base, _ := open("small", small)
		last := fill("big", 5000)
		if last < 10000 {
			t.Fatalf("only %d events", last)
		}
		m, loaded := open("big", last)
		load, _ := os.ReadFile("/proc/loadavg")
		loadavg := strings.Join(strings.Fields(string(load))[:3], " ")
		t.Logf("timeline with %d events, loaded over the WebSocket in %v (load average %s): %s", last, loaded.Round(time.Millisecond), loadavg, report(m))
		t.Logf("the same on %d events: %s", small, report(base))
		// 100 ms on a quiet machine. On a loaded one an action costs what
		// the machine makes it cost, and an idle frame does not show that
		// (it stayed at 16.6 ms at load 10, while a scroll's frame went
		// from 17 ms quiet to 102): the bound there is the same action on
		// the 100-event timeline measured just before, three times over — a
		// timeline that draws only the rows in view costs about the same
		// whatever its length, and one that drew all 10,000 would cost
		// hundreds of times more — or four idle frames.
		for _, k := range []string{"filterTypeFrame", "filterCallFrame", "filterCapFrame", "scrollFrame", "jumpFrame"} {
			bound := max(100, 4*m["idleFrame"], 3*base[k])
			if m[k] >= bound {
				t.Errorf("%s: median %.1f ms to the next frame, want < %.1f (an idle frame: %.1f; on %d events: %.1f)", k, m[k], bound, m["idleFrame"], small, base[k])
			}
		}
		if m["rowsInDOM"] > 200 {
			t.Errorf("%v rows in the DOM: the list is not virtualised", m["rowsInDOM"])
		}
		b.screenshot("timeline")
	})

	run("delete a session from the console: its pending call ends cancelled", func(t *testing.T) {
		b := tab{t, b.ctx}
		doomed := k.session("doomed")
		registerDemo(t, doomed, k.frames.URL)
		done := make(chan protocol.Outcome, 1)
		go func() {
			done <- doomed.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", obj(`{"path":"x"}`))
		}()
		b.do("open the list", chromedp.Navigate(k.console.URL+"/#/sessions"))
		b.until("the row with its pending approval", `document.querySelector('tr[data-session="doomed"] td:nth-child(4)')?.textContent === '1'`)
		b.do("delete", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.CSS(`tr[data-session="doomed"] button.danger`)))
		select {
		case out := <-done:
			if out.Err == nil || out.Err.Code != protocol.CodeCancelled {
				t.Fatalf("the pending call ended %+v, want cancelled", out)
			}
		case <-time.After(wait):
			t.Fatal("the pending call did not end")
		}
		b.until("the row to go", `document.querySelector('tr[data-session="doomed"]') === null`)
	})

	run("first load: bytes and time to first render", func(t *testing.T) {
		nb := tab{t, b.ctx}
		nb.do("leave", chromedp.Navigate("about:blank"))
		start := time.Now()
		nb.do("open the console", chromedp.Navigate(k.console.URL+"/")) // a fresh document; nothing is cached (no-store)
		nb.until("the sessions", `performance.getEntriesByName('brain:sessions-loaded').length > 0`)
		wall := time.Since(start)
		// The session's views load after the first view, while idle: the
		// first load is everything the console fetches until then.
		nb.until("the session views loaded in the background", `performance.getEntriesByType('resource').some(e => e.name.includes('markdown-it')) && performance.getEntriesByType('resource').some(e => e.name.endsWith('/conversation.js'))`)
		m := eval[map[string]float64](nb, `(() => {
			const n = performance.getEntriesByType('navigation')[0];
			const shown = performance.getEntriesByName('brain:first-view')[0].startTime;
			const r = performance.getEntriesByType('resource').filter(e => !e.name.includes('/v1/') && !e.name.includes('/console/'));
			const sum = (list, k) => n[k] + list.reduce((a, e) => a + e[k], 0);
			const before = r.filter(e => e.responseEnd <= shown);
			return {body: sum(r, 'decodedBodySize'), transfer: sum(r, 'transferSize'), files: r.length + 1,
				firstBody: sum(before, 'decodedBodySize'), firstFiles: before.length + 1,
				firstView: shown,
				sessionsLoaded: performance.getEntriesByName('brain:sessions-loaded')[0].startTime,
				domContentLoaded: n.domContentLoadedEventEnd};
		})()`)
		t.Logf("first load: %.0f bytes uncompressed in %v files before the first view, %.0f bytes in %v files in all, the session's views loaded while idle (%.0f bytes on the wire with headers); first view drawn at %.0f ms, sessions listed at %.0f ms, DOMContentLoaded %.0f ms after navigation start; %v wall clock to the list",
			m["firstBody"], m["firstFiles"], m["body"], m["files"], m["transfer"], m["firstView"], m["sessionsLoaded"], m["domContentLoaded"], wall.Round(time.Millisecond))
		if m["body"] >= 300_000 {
			t.Errorf("the console's files are %.0f bytes, want < 300 KB", m["body"])
		}
	})
}

// TestConsoleStreamedProps: props that stream in (partial render_invoked
// events, made here through the session's Go API as the driver makes
// them) redraw the surface in place — the markdown fallback and the
// iframe's postMessage alike — with a "streaming…" marker that the final
// props remove; a stream whose call is never made is marked so. Hostile
// partial props stay text.
func TestConsoleStreamedProps(t *testing.T) {
	k := newKernel(t)
	b := tab{t, browser(t)}
	s := k.session("stream")
	agent := protocol.Origin{Kind: protocol.OriginAgent}
	shown := session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return obj(`{"shown":true}`), nil })
	for _, c := range []protocol.Capability{
		{Name: "story.show", Description: "Show a story.", Kind: protocol.KindRender, Side: protocol.SideAgent, Origin: agent,
			InputSchema: obj(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}}}`),
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceWebComponent, URL: "https://widgets.example.com/story.js", TagName: "story-card"},
				Targets: []protocol.RenderTarget{protocol.TargetChat}, Fallback: "# {{title}}\n\n{{body}}", Streaming: true}},
		{Name: "chart.live", Description: "Draw a live chart.", Kind: protocol.KindRender, Side: protocol.SideAgent, Origin: agent,
			InputSchema: obj(`{"type":"object","properties":{"title":{"type":"string"},"points":{"type":"array"}}}`),
			Render: &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: k.frames.URL + "/frame.html"},
				Targets: []protocol.RenderTarget{protocol.TargetPreview}, Streaming: true}},
	} {
		if err := s.RegisterAgent(c, shown); err != nil {
			t.Fatal(err)
		}
	}
	signIn(b, k)
	b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/stream"))
	b.until("live", `document.querySelector('#conn-state')?.textContent === 'live'`)

	// Each partial grows the props by more than the stream's byte step, so
	// that none waits for the clock.
	pad := strings.Repeat("more words ", 60)
	surface := func(id string) string { return `document.querySelector('.surface[data-call=` + js(id) + `]')` }
	t.Run("a markdown fallback fills from partial props, then the final ones", func(t *testing.T) {
		b := tab{t, b.ctx}
		rs, err := s.StreamRender(protocol.AudienceLLM, "story.show")
		if err != nil {
			t.Fatal(err)
		}
		sf := surface(rs.CallID())
		if !rs.Props(obj(`{"title":"Draft <img src=x onerror=\"window.__xss=8\">","body":"first"}`)) {
			t.Fatal("the first partial did not go out")
		}
		b.until("the first partial props", sf+`?.querySelector('.md h1')?.textContent === 'Draft <img src=x onerror="window.__xss=8">'`)
		b.until("the streaming marker", sf+`.dataset.partial === 'true' && !`+sf+`.querySelector('.streaming-marker').hidden && `+sf+`.querySelector('.streaming-marker').textContent === 'streaming…'`)
		if !rs.Props(obj(`{"title":"Draft two","body":"second ` + pad + `"}`)) {
			t.Fatal("the second partial did not go out")
		}
		b.until("the intermediate props, still streaming", sf+`.querySelector('.md h1')?.textContent === 'Draft two' && `+sf+`.querySelector('.md').textContent.includes('second more words') && `+sf+`.dataset.partial === 'true' && `+sf+`.querySelector('.updates').textContent === 'props #2'`)
		b.screenshot("render-streaming")
		go s.InvokeStreamed(context.Background(), rs, obj(`{"title":"Final","body":"the end"}`))
		b.until("the final props, the marker gone", sf+`.querySelector('.md h1')?.textContent === 'Final' && `+sf+`.dataset.partial === 'false' && `+sf+`.querySelector('.streaming-marker').hidden && `+sf+`.querySelector('.updates').textContent === 'props #3'`)
		if n := eval[int](b, `document.querySelectorAll('.surface').length`); n != 1 {
			t.Fatalf("%d surfaces, want the one redrawn in place", n)
		}
		if got := eval[string](b, `String(window.__xss) + ' imgs=' + document.querySelectorAll('img, script:not([src])').length`); got != "undefined imgs=0" {
			t.Fatalf("a payload in partial props ran or became an element: %s", got)
		}
	})

	t.Run("an iframe gets each partial, then the final props", func(t *testing.T) {
		b := tab{t, b.ctx}
		rs, err := s.StreamRender(protocol.AudienceLLM, "chart.live")
		if err != nil {
			t.Fatal(err)
		}
		sf := surface(rs.CallID())
		seen := func(want string) {
			t.Helper()
			deadline := time.After(wait)
			for {
				select {
				case got := <-k.seen:
					if strings.Contains(got, want) {
						return
					}
				case <-deadline:
					t.Fatalf("the iframe never received props with %s", want)
				}
			}
		}
		rs.Props(obj(`{"title":"live 1"}`))
		b.until("the iframe", sf+`?.querySelector('iframe') != null && `+sf+`.dataset.partial === 'true'`)
		seen(`"title":"live 1"`)
		rs.Props(obj(`{"title":"live 2","points":[1,2,3],"note":"` + pad + `"}`))
		seen(`"title":"live 2"`)
		go s.InvokeStreamed(context.Background(), rs, obj(`{"title":"live final","points":[1,2,3,4]}`))
		seen(`"title":"live final"`)
		b.until("the marker gone", sf+`.dataset.partial === 'false' && `+sf+`.querySelector('.streaming-marker').hidden`)
	})

	t.Run("a stream whose call is never made is marked", func(t *testing.T) {
		b := tab{t, b.ctx}
		rs, err := s.StreamRender(protocol.AudienceLLM, "story.show")
		if err != nil {
			t.Fatal(err)
		}
		sf := surface(rs.CallID())
		rs.Props(obj(`{"title":"Abandoned"}`))
		b.until("the partial", sf+`?.querySelector('.md h1')?.textContent === 'Abandoned' && `+sf+`.dataset.partial === 'true'`)
		rs.Close()
		b.until("marked not made", sf+`.dataset.partial === 'abandoned' && `+sf+`.querySelector('.streaming-marker').textContent === 'not made: cancelled'`)
		if s.PendingCalls() != 0 {
			t.Fatal("a call is pending")
		}
	})
}
