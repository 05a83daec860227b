package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
)

// TestConsoleWording: what the console says, it says once and plainly.
// An operator token named "operator" is shown once in the header (it read
// "operator operator"); a turn cancelled from the console ends "turn 1
// cancelled: from the console by operator" (it read "…: the turn was
// cancelled: cancelled from the console by operator"); a message over the
// kernel's frame limit is refused as too long, the limit in plain words,
// the text kept (it read "too_large: frame larger than 1048576 bytes;
// nothing was applied").
func TestConsoleWording(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model", operatorName: "operator"})
	s := k.session("words")
	endTurnAtCleanup(t, s)
	b := tab{t, browser(t)}
	signIn(b, k)
	if got := eval[string](b, `document.querySelector('.who-name').textContent`); got != "operator" {
		t.Errorf("the header names the operator %q, want it once", got)
	}
	b.openLive(k, "words")

	m.steps <- func(ctx context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
		onText("thinking")
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "hello"), chromedp.KeyEvent("\r"))
	b.until("Cancel, the box laid out for the running turn", `document.querySelector('.msg-box .cancel')?.hidden === false && document.querySelector('#box-busy')?.hidden === false && document.querySelector('.turn[data-turn="1"] .msg.assistant.streaming') !== null`)
	// The button's own click, not a pointer at its place: the sticky box
	// moves as the stream grows, and a pointer click landed where Cancel
	// had been (z68: the turn ran on). TestConsoleConversation clicks it
	// with the pointer.
	b.do("cancel", chromedp.Evaluate[chromedp.Void](`document.querySelector('.msg-box .cancel').click()`))
	b.until("turn 1's end, said once", `document.querySelector('.turn[data-turn="1"] .turn-end')?.textContent === 'turn 1 cancelled: from the console by operator'`)
	b.until("who started it, once", `document.querySelector('.turn[data-turn="1"] .turn-head')?.textContent === 'turn 1 · started by operator'`)

	b.do("a message of 1.5 MiB", chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelector('.msg-input'); i.value = 'x'.repeat(1572864); i.dispatchEvent(new Event('input')); i.focus(); })()`))
	b.do("Enter", chromedp.KeyEvent("\r"))
	b.until("refused as too long, the limit in plain words, the text kept", `document.querySelector('.box-status').textContent.startsWith('not sent: the message is too long (the limit is 1 MiB a message).') && document.querySelector('.msg-input').value.length === 1572864`)
}
