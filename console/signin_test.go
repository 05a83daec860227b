package console_test

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// TestConsoleSignInElsewhere: a tab left on the sign-in form goes on to
// its page when another tab of the browser signs in (it stayed on the
// form until reloaded).
func TestConsoleSignInElsewhere(t *testing.T) {
	k := newKernel(t)
	k.session("elsewhere")
	first := tab{t, browser(t)}
	first.do("open a session's page", chromedp.Navigate(k.console.URL+"/#/s/elsewhere"))
	first.until("the sign-in form", `document.querySelector('#token') !== null`)
	ctx, cancel := chromedp.NewContext(first.ctx) // a second tab of the same browser
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // opens the tab (without a timeout: one would close it)
		t.Fatal(err)
	}
	second := tab{t, ctx}
	activate := func(b tab) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b.ctx, wait)
		defer cancel()
		if _, err := chromedp.CallBrowser(ctx, target.ActivateTarget, target.ActivateTargetParams{TargetID: chromedp.FromContext(b.ctx).Target.TargetID}); err != nil {
			t.Fatalf("bring the tab to the front: %v", err)
		}
	}
	activate(second)
	signIn(second, k)
	activate(first)
	first.until("the first tab signed in, on its page", `document.querySelector('#operator-name')?.textContent === 'ada' && document.querySelector('#token') === null && brainConsole.session()?.id === 'elsewhere'`)
}
