package browsertest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/internal/browsertest"
)

func TestTab(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>x</title><p id=p>hello</p>`))
	}))
	defer page.Close()
	ctx, cancel := context.WithTimeout(browsertest.Tab(t, t.Logf), 60*time.Second) // Chromium's start on a loaded machine
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('p').textContent + ' ' + navigator.webdriver`))
	if err != nil || got != "hello true" {
		t.Fatalf("the page read %q, %v", got, err)
	}
}
