package browser_test

import (
	"context"
	"fmt"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
)

// The provider starts one Chromium for the environment; each call gets a
// tab of its own. (Not run: it needs Chromium and the network.)
func ExampleProvider_Open() {
	ctx := context.Background()
	p, err := browser.New(ctx, browser.Grants{
		Grants: fetch.Grants{AllowHosts: []string{"example.com"}},
	}, nil)
	if err != nil {
		fmt.Println(handle.CodeOf(err), err) // unavailable when Chromium is missing
		return
	}
	defer p.Close()

	page, err := p.Open(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer page.Close()
	if err := page.Navigate(ctx, "https://example.com/"); err != nil {
		fmt.Println(err)
		return
	}
	title, err := page.Text(ctx, "h1")
	fmt.Println(title, err)
}
