package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// deletedPage: the session page says the session was deleted, offers no
// delete, and its connection is closed.
const deletedPage = `document.querySelector('#conn-state').textContent.startsWith('closed')
	&& document.querySelector('#session-deleted')?.hidden === false && document.querySelector('#session-deleted').textContent.startsWith('This session was deleted')
	&& document.querySelector('#session-deleted a[href="#/sessions"]') !== null
	&& ![...document.querySelectorAll('.session-head button')].some((b) => b.textContent === 'delete session')`

// turnEndDeleted: turn 1's end line says the delete ended it.
const turnEndDeleted = `document.querySelector('.turn[data-turn="1"] .turn-end:not([hidden])')?.textContent === 'turn 1 cancelled: the session was deleted'`

// TestConsoleSessionDeleted: a session deleted elsewhere while a turn runs
// ends the turn's controls in an open conversation: no turn running in the
// header, no Cancel, the box disabled and saying why, the text kept (they
// had stayed "turn 1 running", Cancel and "Running…" for good); the turn
// ends with a line saying why and the page says the session was deleted,
// its delete button gone (the turn had no end line, the button stayed).
func TestConsoleSessionDeleted(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model"})
	k.session("gone")
	b := tab{t, browser(t)}
	signIn(b, k)
	b.openLive(k, "gone")
	m.steps <- func(ctx context.Context, _ *driver.Request, onText func(string)) (*driver.Reply, error) {
		onText("thinking")
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "hello"), chromedp.KeyEvent("\r"))
	b.until("turn 1 running", `document.querySelector('#session-status')?.dataset.running === 'true' && !document.querySelector('.msg-box .cancel').hidden`)
	b.do("type a draft", chromedp.SendKeys(chromedp.CSS(".msg-input"), "next"))

	deleteSession(t, k, "gone")
	b.until("closed, the turn's controls ended", `document.querySelector('#conn-state').textContent.startsWith('closed')
		&& document.querySelector('#session-status').dataset.running === 'false' && !document.querySelector('#session-status').textContent.includes('running')
		&& document.querySelector('.msg-box .cancel').hidden && document.querySelector('.msg-box .send').textContent === 'Send'
		&& document.querySelector('.msg-box .send').disabled && document.querySelector('.msg-input').disabled
		&& document.querySelector('.box-status').textContent.includes('The session is closed') && document.querySelector('#box-busy').hidden
		&& document.querySelector('.msg-input').value === 'next'`)
	b.until("turn 1's end line", turnEndDeleted)
	b.until("the page saying the session was deleted, without its delete", deletedPage)
}

// TestConsoleSessionDeletedOffersNothing: once the session is deleted
// elsewhere, none of its page's controls that act on it stays, and the
// page says why — delete, the registry's Try it, a palette form open at
// the time (replaced by the reason), the palette opened again, replay from
// seq (they had stayed, and could only fail), an approval inline or on the
// call's page (the kernel's cancellation of the call ended those) — and
// the turn waiting for the approval ends with its line.
func TestConsoleSessionDeletedOffersNothing(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model"})
	s := k.session("gone")
	talkCaps(t, s, nil)
	if err := s.RegisterAgent(protocol.Capability{Name: "note.add", Description: "Add a note.", Kind: protocol.KindEffect,
		Audience:    []protocol.Audience{protocol.AudienceUser},
		InputSchema: obj(`{"type":"object","properties":{"text":{"type":"string"}}}`), Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}},
		session.HandlerFunc(func(context.Context, *session.Call) (json.RawMessage, error) { return obj(`{}`), nil })); err != nil {
		t.Fatal(err)
	}
	b := tab{t, browser(t)}
	signIn(b, k)
	b.openLive(k, "gone")

	m.steps <- call("d1", "fs.delete", `{"path":"old/"}`)
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "delete old/"), chromedp.KeyEvent("\r"))
	card := `document.querySelector('.card.tool[data-name="fs.delete"]')`
	b.until("the approval", card+`?.querySelector('.approval:not([hidden]) .approve') != null && `+card+`.dataset.call`)
	callID := eval[string](b, card+`.dataset.call`)
	b.do("open the Registry", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/gone/registry'`))
	b.until("note.add's Try it", `document.querySelector('#registry li[data-name="note.add"] .try') !== null`)
	b.do("try note.add", chromedp.Evaluate[chromedp.Void](`document.querySelector('#registry li[data-name="note.add"] .try').click()`))
	b.until("its form", `document.querySelector('.palette-form') !== null`)

	deleteSession(t, k, "gone")
	b.until("the page saying the session was deleted, without its delete", deletedPage)
	b.until("the form replaced by the reason, no Try it", `document.querySelector('.palette-form') === null && document.querySelector('#overlay').textContent.includes('This session was deleted')
		&& document.querySelector('#registry li[data-name="note.add"]') !== null && document.querySelector('#registry .try') === null`)
	b.do("close the palette, open it again", chromedp.KeyEvent("\x1b"), chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.until("the palette saying so", `!document.querySelector('#overlay').hidden && document.querySelector('#overlay').textContent.includes('This session was deleted')
		&& document.querySelector('.palette-search') === null`)
	b.do("close the palette", chromedp.KeyEvent("\x1b"))

	b.do("open the Events", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/gone/events'`))
	b.until("replay from seq disabled", `[...document.querySelectorAll('.events-tab button')].find((b) => b.textContent === 'replay from seq')?.disabled === true`)
	b.do("open the call", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/gone/call/' + `+js(callID)))
	b.until("the call's page saying so, nothing to decide", `document.querySelector('.call-view .call-outcome')?.textContent.includes('cancelled')
		&& document.querySelector('.call-view .session-deleted')?.textContent.startsWith('This session was deleted') && document.querySelector('.call-view button') === null`)
	b.do("open the Conversation", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/gone/conversation'`))
	b.until("no approval in the card", card+`.querySelector('.approval:not([hidden])') === null && `+card+`.dataset.state !== 'awaiting_approval'`)
	b.until("turn 1's end line", turnEndDeleted)
}

// deleteSession deletes session id as an operator elsewhere would.
func deleteSession(t *testing.T, k *kernel, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, k.api.URL+"/v1/sessions/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %s", res.Status)
	}
}
