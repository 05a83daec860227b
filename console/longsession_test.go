package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestConsoleLongSession: a session past the kernel's replay window (here
// 64 events; one streamed answer puts a session past 4096) opens, and
// reloads, as the same conversation: the events before the window are
// gone (?after=0 gets a snapshot), so each turn's end line (failed: and its
// error, completed), its "started by" and the Trace's reasons come from
// the conversation API's turns; the text the running step has streamed so
// far is all there after a reload, with the deltas that follow appended
// once each, however they race the reload; and a call awaiting approval is
// bound to its card from the snapshot, decidable inline.
func TestConsoleLongSession(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model", logSize: 64})
	s := k.session("long")
	talkCaps(t, s, nil)
	endTurnAtCleanup(t, s)
	stream := func(onText func(string), prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			w := fmt.Sprintf("%s%d ", prefix, i)
			onText(w)
			b.WriteString(w)
		}
		return b.String()
	}
	runTurn := func(msg string) {
		t.Helper()
		if _, err := s.StartTurn(session.Operator("ada"), msg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.TurnDone():
		case <-time.After(wait):
			t.Fatalf("turn %q did not end", msg)
		}
	}
	// Turn 1 streams past the window and fails; turn 2 completes.
	m.steps <- func(_ context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
		return &driver.Reply{Text: stream(onText, "a", 150)}, errors.New("the model server went away")
	}
	runTurn("first")
	m.steps <- answer("the second answer", nil)
	runTurn("second")
	// Turn 3 streams until told to stop, then calls fs.delete, which
	// awaits approval.
	begun, stop, streamed, gate := make(chan struct{}), make(chan struct{}), make(chan string, 1), make(chan struct{})
	m.steps <- func(ctx context.Context, req *driver.Request, onText func(string)) (*driver.Reply, error) {
		text := stream(onText, "b", 100)
		close(begun)
		tick := time.NewTicker(5 * time.Millisecond) // a steady stream, racing the reloads
		defer tick.Stop()
	streaming:
		for i := 0; ; i++ {
			select {
			case <-stop:
				streamed <- text
				break streaming
			case <-tick.C:
				w := fmt.Sprintf("c%d ", i)
				onText(w)
				text += w
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &driver.Reply{Text: text, ToolCalls: []protocol.ToolCall{{ID: "d1", Name: req.ToolName("fs.delete"), Input: json.RawMessage(`{"path":"old/"}`)}}}, nil
	}
	m.steps <- answer("Deleted.", nil)
	if _, err := s.StartTurn(session.Operator("ada"), "third"); err != nil {
		t.Fatal(err)
	}
	<-begun
	if last := s.LastSeq(); last <= 4*64 {
		t.Fatalf("the session is not far enough past its replay window (its last event: %d)", last)
	}

	b := tab{t, browser(t)}
	signIn(b, k)
	complete := `brainConsole.session()?.conversation?.complete === true`
	turn := func(n int) string { return fmt.Sprintf(`document.querySelector('.turn[data-turn="%d"]')`, n) }
	bubble := turn(3) + `?.querySelector('.msg.assistant.streaming .text')?.textContent`
	ends := func(b tab) {
		b.t.Helper()
		b.until("turn 1's end: failed, and why", turn(1)+`?.dataset.reason === 'error' && `+turn(1)+`.querySelector('.turn-end').textContent === 'turn 1 failed: model step 1: the model server went away'`)
		b.until("turn 2's end", turn(2)+`?.dataset.reason === 'completed' && `+turn(2)+`.querySelector('.turn-end').textContent === 'turn 2 completed'`)
		for n := 1; n <= 3; n++ {
			b.until(fmt.Sprintf("who started turn %d", n), turn(n)+`?.querySelector('.turn-head').textContent === 'turn `+fmt.Sprint(n)+` · started by operator (ada)'`)
		}
		if eval[bool](b, turn(3)+`.querySelector('.turn-end').hidden === false`) {
			t.Fatal("turn 3 is drawn ended while it runs")
		}
	}

	if !t.Run("a reload mid-stream shows the turns' ends and all the text streamed", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the session", chromedp.Navigate(k.console.URL+"/#/s/long"))
		b.until("the conversation", complete)
		if eval[int](b, `brainConsole.session().snapSeq`) == 0 {
			t.Fatal("the console got no snapshot: the session is not past the replay window")
		}
		ends(b)
		b.until("the text streamed so far", bubble+`?.startsWith(`+js(stream(func(string) {}, "b", 100))+`)`)
		for range 2 {
			b.do("reload", chromedp.Reload())
			b.until("the conversation again", complete)
			ends(b)
			b.until("the text streamed so far", bubble+`?.startsWith(`+js(stream(func(string) {}, "b", 100)+"c0 ")+`)`)
		}
		close(stop)
		text := <-streamed
		b.until("every piece streamed, once, in order", bubble+` === `+js(text))
	}) {
		return
	}

	if !t.Run("a call awaiting approval is decidable in its card after a reload", func(t *testing.T) {
		b := tab{t, b.ctx}
		close(gate)
		card := `document.querySelector('.card.tool[data-name="fs.delete"]')`
		approvable := card + `?.dataset.state === 'awaiting_approval' && !!` + card + `.dataset.call && ` + card + `.querySelector('.approval:not([hidden]) .approve')?.disabled === false`
		b.until("the approval in the card", approvable)
		b.do("reload", chromedp.Reload())
		b.until("the conversation again", complete)
		b.until("the approval in the card after the reload", approvable)
		ends(b)
		b.do("approve", chromedp.Click(chromedp.CSS(`.card.tool[data-name="fs.delete"] .approve`)))
		b.until("it ran", card+`.dataset.state === 'ok'`)
		b.until("turn 3 completed", turn(3)+`?.dataset.reason === 'completed'`)
	}) {
		return
	}

	t.Run("the Trace shows each turn's reason after a reload", func(t *testing.T) {
		b := tab{t, b.ctx}
		b.do("open the trace", chromedp.Navigate(k.console.URL+"/#/s/long/trace"), chromedp.Reload())
		b.until("the conversation", complete)
		head := func(n int) string {
			return fmt.Sprintf(`document.querySelector('.trace-turn[data-turn="%d"]')`, n)
		}
		b.until("turn 1's reason and error", head(1)+`?.querySelector('h3').textContent === 'turn 1 · error · model step 1: the model server went away'`)
		for n := 2; n <= 3; n++ {
			b.until(fmt.Sprintf("turn %d's reason", n), head(n)+`?.querySelector('h3').textContent === 'turn `+fmt.Sprint(n)+` · completed'`)
		}
		b.until("who started them", `[...document.querySelectorAll('.trace-turn p')].every(p => p.textContent.endsWith(' · started by operator (ada)'))`)
	})
}
