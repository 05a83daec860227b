package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/protocol"
)

// TestConsoleReloadBindsCalls: a reload binds each replayed call to the
// card of its own turn. Turn 1 calls fs.delete {"path":"old/"} and is
// rejected with feedback; turn 2 makes the same call, which awaits
// approval. After a reload turn 2's card still awaits approval, decidable,
// and turn 1's keeps its rejection and its call page (the replay had
// bound turn 1's call to turn 2's card, the earliest open one then). Turn
// 2 then ends interrupted while its call awaits approval: no tool message
// answers it, as after a kernel restart, and a reload shows what the page
// showed live.
func TestConsoleReloadBindsCalls(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model"})
	s := k.session("rebind")
	talkCaps(t, s, nil)
	endTurnAtCleanup(t, s)
	b := tab{t, browser(t)}
	signIn(b, k)
	b.openLive(k, "rebind")

	card := func(n int) string {
		return fmt.Sprintf(`document.querySelector('.turn[data-turn="%d"] .card.tool')`, n)
	}
	awaiting := card(2) + `?.dataset.state === 'awaiting_approval' && ` + card(2) + `.querySelector('.approval:not([hidden]) .approve')?.disabled === false`

	m.steps <- call("d1", "fs.delete", `{"path":"old/"}`)
	m.steps <- answer("I will not delete it.", nil)
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "delete old/"), chromedp.KeyEvent("\r"))
	b.until("turn 1's approval", card(1)+`?.dataset.state === 'awaiting_approval' && !!`+card(1)+`.querySelector('.approval:not([hidden]) .reject')`)
	b.do("reject with feedback", chromedp.SendKeys(chromedp.CSS(`.turn[data-turn="1"] .card.tool .feedback`), "keep that folder"),
		chromedp.Click(chromedp.CSS(`.turn[data-turn="1"] .card.tool .reject`)))
	b.until("turn 1 completed", `document.querySelector('.turn[data-turn="1"]')?.dataset.reason === 'completed'`)

	m.steps <- call("d2", "fs.delete", `{"path":"old/"}`)
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "delete old/ now"), chromedp.KeyEvent("\r"))
	b.until("turn 2's approval", awaiting)
	first := eval[string](b, card(1)+`.dataset.call`)
	pending := s.Snapshot().PendingCalls
	if len(pending) != 1 || first == "" || first == pending[0].CallID {
		t.Fatalf("turn 1's card is bound to %q, the pending calls are %+v", first, pending)
	}
	replayed := func() string {
		return fmt.Sprintf(`brainConsole.session()?.conversation?.complete === true && brainConsole.session().conn?.lastSeq === %d`, s.LastSeq())
	}
	b.do("reload", chromedp.Reload())
	b.until("the conversation, its events replayed", replayed())
	b.until("turn 2's card awaits approval after the reload", awaiting)
	if got := eval[string](b, card(2)+`.dataset.call`); got != pending[0].CallID {
		t.Errorf("turn 2's card is bound to %q, want its own call %q", got, pending[0].CallID)
	}
	if got := eval[string](b, card(1)+`.dataset.call`); got != first {
		t.Errorf("turn 1's card is bound to %q, want %q", got, first)
	}
	if got := eval[string](b, card(1)+`.querySelector('.outcome.err')?.textContent || ''`); got == "" || !strings.Contains(got, "keep that folder") {
		t.Errorf("turn 1's card reads %q, want its rejection", got)
	}

	// Ended as a restart ends it: at once, the runner's late tool message
	// refused, the call cancelled after the turn's end.
	s.EndTurn(protocol.TurnInterrupted, "the kernel stopped during turn 2")
	b.until("turn 2's card settled", `document.querySelector('.turn[data-turn="2"]')?.dataset.reason === 'interrupted' && `+card(2)+`.dataset.state === 'error' && brainConsole.session().conn?.lastSeq >= `+fmt.Sprint(s.LastSeq())+` && `+card(2)+`.textContent.includes("cancelled")`)
	b.until("turn 1's approval wait read", card(1)+`.dataset.waitMs !== undefined`)
	live := eval[string](b, `document.querySelector('.conv-list').innerText`)
	b.do("reload", chromedp.Reload())
	b.until("the conversation, its events replayed", replayed())
	// What is read after the events (a call's approval wait) comes a moment later.
	b.until("the conversation as it was live:\n"+live, `document.querySelector('.conv-list').innerText === `+js(live))
}
