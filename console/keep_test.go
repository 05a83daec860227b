package console_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/server"
)

// TestConsoleKeepsText: what a person typed or was shown is not lost. While
// a turn runs the message box says so, and Enter says why it sent nothing,
// the text kept; the text the model streamed before a failed step is still
// in its turn after a reload once a later turn exists; a draft survives the
// end of the sign-in (any 401) and is back after signing in again.
func TestConsoleKeepsText(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model", dir: t.TempDir()})
	s := k.session("keep")
	endTurnAtCleanup(t, s)
	b := tab{t, browser(t)}
	signIn(b, k)
	b.openLive(k, "keep")
	// Each step leaves the session idle, passed or failed: the next one
	// runs either way, on the turns that follow.
	run := func(name string, f func(t *testing.T)) { t.Run(name, f) }
	next := func(b tab) int { b.t.Helper(); return eval[int](b, `brainConsole.session().conversation.turn`) + 1 }
	turnEnded := func(b tab, n int, reason string) {
		b.t.Helper()
		b.until(fmt.Sprintf("turn %d %s", n, reason), fmt.Sprintf(`document.querySelector('.turn[data-turn="%d"]')?.dataset.reason === '%s' && document.querySelector('#conversation').dataset.running === 'false'`, n, reason))
	}

	run("while a turn runs the box says so; Enter keeps the text and says why", func(t *testing.T) {
		b := tab{t, b.ctx}
		n := next(b)
		gate := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(gate) }) }
		defer func() { release(); turnEnded(b, n, "completed") }()
		m.steps <- func(ctx context.Context, _ *driver.Request, _ func(string)) (*driver.Reply, error) {
			select {
			case <-gate:
				return &driver.Reply{Text: "first done"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "first"), chromedp.KeyEvent("\r"))
		b.until("the box says a turn is running", `document.querySelector('#conversation').dataset.running === 'true' && !document.querySelector('#box-busy')?.hidden && document.querySelector('#box-busy').textContent.includes('turn `+strconv.Itoa(n)+` is running')`)
		b.do("type the next message and press Enter", chromedp.SendKeys(chromedp.CSS(".msg-input"), "second"), chromedp.KeyEvent("\r"))
		b.until("not sent, and why; the text kept in an editable box", `document.querySelector('.box-status').textContent.includes('turn `+strconv.Itoa(n)+` is still running') && document.querySelector('.msg-input').value === 'second' && !document.querySelector('.msg-input').disabled`)
		release()
		turnEnded(b, n, "completed")
		b.until("the hints gone", `document.querySelector('#box-busy').hidden && document.querySelector('.box-status').textContent === ''`)
		m.steps <- answer("second done", nil)
		b.do("Enter", chromedp.KeyEvent("\r"))
		turnEnded(b, n+1, "completed")
		b.until("the box emptied", `document.querySelector('.msg-input').value === ''`)
	})

	const partial = "half an answer, then"
	run("text streamed before a failed step stays after a reload", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("empty the box", chromedp.Evaluate[chromedp.Void](`document.querySelector('.msg-input').value = ''`))
		n := next(b)
		m.steps <- func(_ context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
			onText(partial)
			return &driver.Reply{Text: partial}, errors.New("the model server went away")
		}
		b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "fail please"), chromedp.KeyEvent("\r"))
		turnEnded(b, n, "error")
		// The kernel keeps what was streamed before the failure as the
		// turn's assistant message (driver.Run), so it is drawn as one,
		// not as text the conversation lacks.
		shown := fmt.Sprintf(`[...document.querySelectorAll('.turn[data-turn="%d"] .msg.assistant:not(.unsaved):not(.streaming)')].some(e => e.textContent.includes(%s))`, n, js(partial))
		b.until("the streamed text", shown)
		m.steps <- answer("a later answer", nil)
		b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "again"), chromedp.KeyEvent("\r"))
		turnEnded(b, n+1, "completed")
		drawn := `document.querySelector('.conv-list').innerText.includes('a later answer')`
		b.until("the later turn drawn", drawn)
		before := eval[string](b, `document.querySelector('.conv-list').innerText`)
		b.do("reload", chromedp.Reload())
		b.until("the conversation drawn, its events replayed", fmt.Sprintf(`brainConsole.session()?.conversation?.complete === true && document.querySelector('.turn[data-turn="%d"]')?.dataset.reason === 'completed' && %s`, n+1, drawn))
		if after := eval[string](b, `document.querySelector('.conv-list').innerText`); after != before {
			t.Errorf("the conversation after the reload:\n%s\nbefore it:\n%s", after, before)
		}
		if !eval[bool](b, shown) {
			t.Fatal("the text streamed before the failed step is gone after the reload")
		}
	})

	run("a draft survives the end of the sign-in", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("empty the box", chromedp.Evaluate[chromedp.Void](`document.querySelector('.msg-input').value = ''`))
		const draft = "a long message I typed and must not lose"
		b.until("live", `brainConsole.session()?.conn?.state === 'live'`)
		b.do("type a draft", chromedp.SendKeys(chromedp.CSS(".msg-input"), draft))
		revoked, err := server.NewTokens(server.Token{Token: clientToken, Side: "client", Name: "web", Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		k.restartConsole(revoked)
		b.until("the sign-in form", `document.querySelector('#token') !== null && document.querySelector('#signin-error').textContent.includes('sign in again')`)
		k.restartConsole(k.tokens)
		b.do("sign in again", chromedp.SendKeys(chromedp.CSS("#token"), operatorToken), chromedp.Click(chromedp.CSS(".signin button[type=submit]")))
		b.until("the conversation again, the draft in its box", `document.querySelector('#conversation .msg-input')?.value === `+js(draft))
		b.do("reload", chromedp.Reload())
		b.until("the draft after a reload too", `document.querySelector('#conversation .msg-input')?.value === `+js(draft))
	})
}
