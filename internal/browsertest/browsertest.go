// Package browsertest starts headless Chromium for tests that drive a real
// browser (the console's, the MCP Apps', the cross-origin checks'): one
// way to start it, with its own profile, HOME and TMPDIR, so that no test
// reads or leaves anything of the machine's.
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is where Debian's chromium package installs the browser, which
// test.sh installs.
const Chromium = "/usr/lib/chromium/chromium"

// Require fails t when Chromium is not installed and CI is set (CI must
// have it: a browser test skipped there would prove nothing), and skips
// t otherwise.
func Require(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Chromium is not installed at %s: CI must apt-get install chromium", Chromium)
		}
		t.Skipf("Chromium is not installed at %s (apt-get install chromium)", Chromium)
	}
}

// Tab starts headless Chromium (after [Require]) and returns a tab's
// context; the browser ends with t. opts add to or override the defaults
// (a window size, a flag); logf, if set, receives chromedp's log.
func Tab(t testing.TB, logf func(string, ...any), opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	Require(t)
	tmp := t.TempDir()
	all := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(tmp, "profile")),
		chromedp.NoInheritEnv,
		chromedp.Env("HOME="+tmp, "TMPDIR="+tmp, "PATH=/usr/bin:/bin"),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), append(all, opts...)...)
	t.Cleanup(acancel)
	copts := []chromedp.ContextOption{chromedp.WithErrorf(func(string, ...any) {})}
	if logf != nil {
		copts = append(copts, chromedp.WithLogf(logf))
	}
	ctx, cancel := chromedp.NewContext(actx, copts...)
	t.Cleanup(func() {
		c, cc := context.WithTimeout(ctx, 5*time.Second)
		_ = chromedp.Cancel(c)
		cc()
		cancel()
	})
	return ctx
}
