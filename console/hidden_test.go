package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/brainrt/brain/protocol"
)

// noLiveControls is true when the page (the palette's overlay included)
// holds no bidi control or other hidden character as text.
const noLiveControls = `!/[\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF]/.test(document.body.textContent)`

// TestConsoleHiddenCharacters: bidi controls and other hidden characters
// in what peers and the model choose — an approval's input, a capability's
// name, displayName and description, the palette's entries, the inbox —
// are shown as escapes (\u202E) in a marked box, never live: a path
// "\u202Etxt.seton\u202C" does not read "notes.txt", and a displayName
// ending in U+202E does not turn the name beside it around.
func TestConsoleHiddenCharacters(t *testing.T) {
	m := newScriptModel()
	k := newKernelWith(t, kernelOptions{model: m, modelName: "scripted-model", dir: t.TempDir()})
	s := k.session("spoof")
	talkCaps(t, s, nil)
	endTurnAtCleanup(t, s)
	k.connectClient("spoof", protocol.Capability{Name: "daer.sf", DisplayName: "Read a file \u202E", Description: "reads \u2067a file\u2069 \u200Bsafely",
		Audience: []protocol.Audience{protocol.AudienceUser}, InputSchema: obj(`{"type":"object"}`), Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient}})
	b := tab{t, browser(t)}
	signIn(b, k)
	b.openLive(k, "spoof")

	const wantInput = "{\n  \"path\": \"\\u202Etxt.seton\\u202C\"\n}"
	m.steps <- call("c1", "fs.delete", "{\"path\":\"\u202Etxt.seton\u202C\"}")
	b.do("send", chromedp.SendKeys(chromedp.CSS(".msg-input"), "delete my notes"), chromedp.KeyEvent("\r"))
	card := `document.querySelector('.card.tool[data-name="fs.delete"]')`
	b.until("the card awaiting approval", card+`?.dataset.state === 'awaiting_approval'`)
	got := eval[string](b, card+`.querySelector('.approval-input').textContent + '|' + `+card+`.querySelectorAll('.approval-input .hidden-char').length + '|' + `+card+`.querySelector('.card-input summary').textContent`)
	if want := wantInput + `|2|input {"path":"\u202Etxt.seton\u202C"}`; got != want {
		t.Fatalf("the approval's input reads %q, want %q", got, want)
	}
	if !eval[bool](b, noLiveControls) {
		t.Fatal("a hidden character reached the conversation as text")
	}

	b.do("open the inbox", chromedp.Navigate(k.console.URL+"/#/approvals"))
	b.until("the request in the inbox", `document.querySelector('#inbox tr[data-call] pre') !== null`)
	if got := eval[string](b, `document.querySelector('#inbox tr[data-call] pre').textContent + '|' + document.querySelectorAll('#inbox tr[data-call] summary .hidden-char').length`); got != wantInput+"|2" {
		t.Fatalf("the inbox's input reads %q", got)
	}
	if !eval[bool](b, noLiveControls) {
		t.Fatal("a hidden character reached the inbox as text")
	}

	b.do("open the registry", chromedp.Navigate(k.console.URL+"/#/s/spoof/registry"))
	b.until("the client's capability", `document.querySelector('.cap[data-name="daer.sf"] .cap-display') !== null`)
	if got := eval[string](b, `document.querySelector('.cap[data-name="daer.sf"] .cap-display').textContent`); got != `Read a file \u202E` {
		t.Fatalf("the registry's displayName reads %q", got)
	}
	b.do("Ctrl-K", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.until("the palette's entry", `document.querySelector('.palette-list li[data-name="daer.sf"]') !== null`)
	entry := eval[string](b, `document.querySelector('.palette-list li[data-name="daer.sf"]').textContent`)
	if want := `Read a file \u202E daer.sfreads \u2067a file\u2069 \u200Bsafely`; entry != want {
		t.Fatalf("the palette's entry reads %q, want %q", entry, want)
	}
	if n := eval[int](b, `document.querySelectorAll('.palette-list li[data-name="daer.sf"] .hidden-char').length`); n != 4 {
		t.Fatalf("%d marked hidden characters in the palette's entry, want 4", n)
	}
	if !eval[bool](b, noLiveControls) {
		t.Fatal("a hidden character reached the palette as text")
	}
	b.do("choose it", chromedp.Click(chromedp.CSS(`.palette-list li[data-name="daer.sf"]`)))
	b.until("its form", `document.querySelector('.palette-form header') !== null`)
	if got := eval[string](b, `document.querySelector('.palette-form header').textContent`); !strings.HasPrefix(got, `Read a file \u202E daer.sf`) {
		t.Fatalf("the form's header reads %q", got)
	}
	b.do("Escape", chromedp.KeyEvent("\x1b"))
}
