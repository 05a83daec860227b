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
	t.Cleanup(func() {
		if _, running := s.CurrentTurn(); running {
			_ = s.CancelTurn("the test ended")
		}
	})
	para := strings.Repeat("a line of the answer\n\n", 6)
	for i := range 12 {
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
