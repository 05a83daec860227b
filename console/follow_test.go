package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/session"
)

const para = "a line of the answer\n\na line of the answer\n\na line of the answer\n\na line of the answer\n\n"

// manyTurns runs n turns in s, each answered with a few paragraphs: more
// than a screen.
func manyTurns(t *testing.T, s *session.Session, m *scriptModel, n int) {
	t.Helper()
	for i := range n {
		m.steps <- answer(fmt.Sprintf("answer %d\n\n%s", i, para), nil)
		if _, err := s.StartTurn(session.Operator("ada"), fmt.Sprintf("question %d", i)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.TurnDone():
		case <-time.After(wait):
			t.Fatalf("turn %d did not end", i+1)
		}
	}
}

// TestConsoleTraceOpensAtTop: the Trace, newest turn first, opens at its
// top when the tab is chosen from the conversation's end (it kept the
// conversation's scroll position, showing its oldest turn).
func TestConsoleTraceOpensAtTop(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model"})
	s := k.session("trace")
	manyTurns(t, s, m, 12)
	b := tab{t, browser(t)}
	signIn(b, k)
	b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/trace"))
	b.until("the conversation at its end", `brainConsole.session()?.conversation?.complete === true && window.scrollY > 0 && window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2`)
	// Its address, as a link or the history does it (a click on the tab
	// scrolls the tab into view first, wherever the page was).
	b.do("open the Trace", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/trace/trace'`))
	b.until("the Trace at its top, the newest turn in view", `document.querySelector('.trace-turn')?.dataset.turn === '12' && window.scrollY === 0`)
}

// TestConsoleFollowsEnd: the conversation shows its end and keeps it in
// view. A session opened with a call awaiting approval under many turns
// shows the approval's buttons above the message box, on a desktop and a
// phone; a fast stream of tall pieces is followed to its end (a scroll
// event that arrived after the page grew once turned following off); a
// reader who scrolls up is left where they are.
func TestConsoleFollowsEnd(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model"})
	s := k.session("follow")
	talkCaps(t, s, nil)
	endTurnAtCleanup(t, s)
	manyTurns(t, s, m, 12)
	m.steps <- call("d1", "fs.delete", `{"path":"old/"}`)
	if _, err := s.StartTurn(session.Operator("ada"), "delete old/"); err != nil {
		t.Fatal(err)
	}
	waitPending(t, s)

	b := tab{t, browser(t)}
	signIn(b, k)
	atEnd := `(window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2)`
	approveShown := `(() => { const a = document.querySelector('.card.tool .approval:not([hidden]) .approve'), box = document.querySelector('.msg-box');
		return !!a && !!box && a.getBoundingClientRect().bottom <= box.getBoundingClientRect().top; })()`
	for _, vp := range []struct{ w, h int64 }{{1280, 800}, {390, 844}} {
		b.do("viewport", chromedp.EmulateViewport(vp.w, vp.h))
		b.do("leave", chromedp.Navigate("about:blank"))
		b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/follow"))
		b.until(fmt.Sprintf("the conversation at %d×%d", vp.w, vp.h), `brainConsole.session()?.conversation?.complete === true && !!document.querySelector('.card.tool[data-state="awaiting_approval"]')`)
		b.until(fmt.Sprintf("its end in view at %d×%d, Approve above the message box", vp.w, vp.h), atEnd+` && `+approveShown)
	}
	b.do("viewport", chromedp.EmulateViewport(1280, 800))
	b.until("its end in view", atEnd+` && `+approveShown)

	// Approved, the model streams a long answer fast, in tall pieces.
	const pieces = 80
	var want strings.Builder
	m.steps <- func(ctx context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
		for i := range pieces {
			w := fmt.Sprintf("piece %d\n\nstill piece %d\n\n", i, i)
			onText(w)
			want.WriteString(w)
			select {
			case <-time.After(2 * time.Millisecond): // a pace, not a synchronisation
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &driver.Reply{Text: want.String()}, nil
	}
	b.do("approve", chromedp.Click(chromedp.CSS(`.card.tool .approve`)))
	b.until("turn 13 completed", `document.querySelector('.turn[data-turn="13"]')?.dataset.reason === 'completed'`)
	b.until("the end of the answer in view", atEnd+` && brainConsole.session().conversation.follow === true`)

	// A reader who scrolls up stays where they are.
	b.do("scroll up with Page Up", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`), chromedp.KeyEvent(kb.PageUp), chromedp.KeyEvent(kb.PageUp))
	b.until("scrolled up", `!`+atEnd+` && brainConsole.session().conversation.follow === false`)
	// Keys scroll smoothly: the position once it has not moved for a few frames.
	y := eval[float64](b, `new Promise((done) => { let last = -1, same = 0; const f = () => { if (scrollY === last) same++; else { same = 0; last = scrollY; } if (same >= 5) done(scrollY); else requestAnimationFrame(f); }; requestAnimationFrame(f); })`)
	m.steps <- answer("a new answer\n\n"+para, nil)
	if _, err := s.StartTurn(session.Operator("ada"), "more"); err != nil {
		t.Fatal(err)
	}
	b.until("turn 14 completed", `document.querySelector('.turn[data-turn="14"]')?.dataset.reason === 'completed'`)
	if got := eval[float64](b, `window.scrollY`); got != y || eval[bool](b, atEnd) {
		t.Errorf("the view moved from %.0f to %.0f while the reader was up the page", y, got)
	}
}
