package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
)

// TestConsoleTraceApprovalWait: the time a call waited for a person's
// approval is shown apart from the tool's, in its card and in the Trace
// (it was counted as tool time: "fs.delete · 42.00 s", "43.20 s in the
// model and tools"), and a step cancelled while it streamed is labelled
// cancelled, not answered.
func TestConsoleTraceApprovalWait(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model"})
	s := k.session("waits")
	talkCaps(t, s, nil)
	endTurnAtCleanup(t, s)
	b := tab{t, browser(t)}
	signIn(b, k)
	b.openLive(k, "waits")

	m.steps <- call("d1", "fs.delete", `{"path":"old/"}`)
	m.steps <- answer("Deleted.", nil)
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "delete old/"), chromedp.KeyEvent("\r"))
	card := `document.querySelector('.card.tool[data-name="fs.delete"]')`
	b.until("the approval", card+`?.querySelector('.approval:not([hidden]) .approve') != null`)
	b.do("approve", chromedp.Click(chromedp.CSS(`.card.tool[data-name="fs.delete"] .approve`)))
	b.until("turn 1 completed", `document.querySelector('.turn[data-turn="1"]')?.dataset.reason === 'completed'`)
	b.until("the card shows the wait apart", card+`.dataset.waitMs !== undefined && `+card+`.querySelector('.took')?.textContent.endsWith(' awaiting approval')`)

	m.steps <- func(ctx context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
		onText("half an answer")
		<-ctx.Done()
		return &driver.Reply{Text: "half an answer"}, ctx.Err()
	}
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "talk"), chromedp.KeyEvent("\r"))
	// The box is laid out for the running turn (its line under the box
	// shown) before Cancel is clicked where it is.
	b.until("streaming", `document.querySelector('.turn[data-turn="2"] .msg.assistant.streaming')?.textContent.includes('half an answer') && document.querySelector('#box-busy')?.hidden === false`)
	// The button's own click, not a pointer at its place: the sticky box
	// moves as the stream grows, and a pointer click landed where Cancel
	// had been (z68: the turn ran on). TestConsoleConversation clicks it
	// with the pointer.
	b.do("cancel", chromedp.Evaluate[chromedp.Void](`document.querySelector('.msg-box .cancel').click()`))
	b.until("turn 2 cancelled", `document.querySelector('.turn[data-turn="2"]')?.dataset.reason === 'cancelled'`)

	b.do("open the Trace", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/waits/trace'`))
	turn := func(n string) string { return `document.querySelector('.trace-turn[data-turn="` + n + `"]')` }
	b.until("turn 1's call and total with the wait apart", turn("1")+`?.querySelector('.trace-call .approval-wait')?.textContent.endsWith(' awaiting approval') && `+
		turn("1")+`.querySelector('p').textContent.includes(' in the model and tools · ') && /in the model and tools · [0-9.]+ m?s awaiting approval/.test(`+turn("1")+`.querySelector('p').textContent)`)
	b.until("turn 2's step labelled cancelled", turn("2")+`?.querySelector('.trace-step')?.textContent.endsWith(' · cancelled')`)
}
