package console_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/driver"
)

// TestConsoleSessionDeleted: a session deleted elsewhere while a turn runs
// ends the turn's controls in an open conversation: no turn running in the
// header, no Cancel, the box disabled and saying why, the text kept (they
// had stayed "turn 1 running", Cancel and "Running…" for good).
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

	req, _ := http.NewRequest(http.MethodDelete, k.api.URL+"/v1/sessions/gone", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %s", res.Status)
	}
	b.until("closed, the turn's controls ended", `document.querySelector('#conn-state').textContent.startsWith('closed')
		&& document.querySelector('#session-status').dataset.running === 'false' && !document.querySelector('#session-status').textContent.includes('running')
		&& document.querySelector('.msg-box .cancel').hidden && document.querySelector('.msg-box .send').textContent === 'Send'
		&& document.querySelector('.msg-box .send').disabled && document.querySelector('.msg-input').disabled
		&& document.querySelector('.box-status').textContent.includes('The session is closed') && document.querySelector('#box-busy').hidden
		&& document.querySelector('.msg-input').value === 'next'`)
}
