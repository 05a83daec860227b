package protocol

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds a capability name.
const MaxNameBytes = 256

// ValidateName checks a capability name: non-empty, at most [MaxNameBytes]
// bytes of UTF-8, and no spaces, control or format characters — ASCII's
// (no byte up to ' ', no DEL) and Unicode's (U+00A0, U+2028, the bidi
// overrides such as U+202E, zero-width characters, the BOM) — nor U+FFFD.
// A name is what the model calls and what a person reads when approving
// a call: an invisible character makes one name look like another, or
// like nothing. U+FFFD is what a lone surrogate (a JSON "\ud800") or
// invalid UTF-8 decodes to, so two names that differ there would become
// one. [Capability.Validate] applies it to every capability; a tool's
// manifest and `brain build` apply it to a tool's name, which becomes a
// capability's name when the tool is attached. The error says which rule
// the name breaks.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("must not be empty")
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%d bytes, more than %d", len(name), MaxNameBytes)
	case strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("must not contain spaces or control characters")
	case !utf8.ValidString(name):
		return fmt.Errorf("must be UTF-8")
	}
	if i := strings.IndexFunc(name, hiddenRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError {
			return fmt.Errorf("must not contain U+FFFD, the replacement character (a lone surrogate such as \\ud800, or invalid UTF-8, decodes to it)")
		}
		return fmt.Errorf("must not contain %U, a space, control or format character", r)
	}
	if word, a, b, ok := mixedScriptWord(name); ok {
		return fmt.Errorf("the word %q mixes %s and %s letters, as a look-alike of another name does (fs.reаd with a Cyrillic а); write each word in one script", word, a, b)
	}
	return nil
}

// lookAlikeScripts are the scripts whose letters pass for each other's:
// Latin a, Cyrillic а and Greek α are drawn alike, and so are many more.
var lookAlikeScripts = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Latin", unicode.Latin}, {"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek},
	{"Armenian", unicode.Armenian}, {"Cherokee", unicode.Cherokee},
}

// mixedScriptWord finds a word of name (a run of letters and marks) with
// letters of two lookAlikeScripts, and names them. A name may use several
// scripts, one a word (ui.Привет); a word that mixes them is how a
// spoofed name is made. Scripts that are not drawn alike (Han and Latin)
// may mix.
func mixedScriptWord(name string) (word, a, b string, ok bool) {
	start, first := -1, -1
	for i, r := range name + "." {
		if unicode.IsLetter(r) || unicode.Is(unicode.M, r) {
			if start < 0 {
				start, first = i, -1
			}
			for k, sc := range lookAlikeScripts {
				if unicode.Is(sc.table, r) {
					if first < 0 {
						first = k
					} else if first != k {
						end := i + utf8.RuneLen(r)
						for end < len(name) {
							r2, n := utf8.DecodeRuneInString(name[end:])
							if !unicode.IsLetter(r2) && !unicode.Is(unicode.M, r2) {
								break
							}
							end += n
						}
						return name[start:end], lookAlikeScripts[first].name, sc.name, true
					}
					break
				}
			}
			continue
		}
		start = -1
	}
	return "", "", "", false
}

// hiddenRune reports whether r may not be in a name: a space, control or
// format character, another character Unicode says to show as nothing
// (default ignorable: the combining grapheme joiner, the Hangul fillers,
// variation selectors), a noncharacter (U+FFFE) — invisible, or changing
// how the characters around it are shown — or U+FFFD.
func hiddenRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) ||
		unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs,
			unicode.Other_Default_Ignorable_Code_Point, // shown as nothing: U+034F, U+115F, U+3164, U+FFA0, …
			unicode.Variation_Selector, unicode.Noncharacter_Code_Point)
}

// Validate checks what the wire types alone decide about a capability: a
// non-empty name, known side, scope, kind and audience values, a valid
// origin, an object inputSchema, callTimeoutMs > 0 and a valid render spec.
// Compiling the schemas is the registry's job (package session). The error
// names the field.
func (c *Capability) Validate() error {
	if err := ValidateName(c.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	switch c.Side {
	case SideClient, SideAgent, SideApp:
	default:
		return fmt.Errorf("side: unknown side %q (want client, agent or app)", c.Side)
	}
	if err := c.Origin.Validate(); err != nil {
		return err
	}
	switch c.Scope {
	case "", ScopeSession, ScopeTurn:
	default:
		return fmt.Errorf("scope: unknown scope %q (want session or turn)", c.Scope)
	}
	switch c.Kind {
	case "", KindEffect, KindRender, KindQuery:
	default:
		return fmt.Errorf("kind: unknown kind %q (want effect, render or query)", c.Kind)
	}
	for i, a := range c.Audience {
		switch a {
		case AudienceLLM, AudienceUser, AudienceRuntime:
		default:
			return fmt.Errorf("audience[%d]: unknown audience %q (want llm, user or runtime)", i, a)
		}
	}
	if !isObject(c.InputSchema) {
		return fmt.Errorf("inputSchema: must be a JSON object")
	}
	if c.OutputSchema != nil && !isObject(c.OutputSchema) {
		return fmt.Errorf("outputSchema: must be a JSON object")
	}
	if c.CallTimeoutMs != nil && *c.CallTimeoutMs <= 0 {
		return fmt.Errorf("callTimeoutMs: must be greater than 0, got %d", *c.CallTimeoutMs)
	}
	if c.Render != nil {
		if err := c.Render.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a render spec: a known source kind with an absolute http(s)
// URL, a custom-element tag name for web components, and at least one
// known target.
func (r *RenderSpec) Validate() error {
	switch r.Source.Kind {
	case SourceWebComponent:
		if !strings.Contains(r.Source.TagName, "-") || strings.ToLower(r.Source.TagName) != r.Source.TagName ||
			strings.ContainsAny(r.Source.TagName, " <>\"'/=") {
			return fmt.Errorf("render.source.tagName: %q is not a custom element name (lower case, with a hyphen)", r.Source.TagName)
		}
	case SourceIframe:
	default:
		return fmt.Errorf("render.source.kind: unknown kind %q", r.Source.Kind)
	}
	u, err := url.Parse(r.Source.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("render.source.url: %q is not an absolute http or https URL", r.Source.URL)
	}
	if len(r.Targets) == 0 {
		return fmt.Errorf("render.targets: at least one target is required")
	}
	for i, t := range r.Targets {
		switch t {
		case TargetChat, TargetPreview, TargetModal, TargetInputExtension:
		default:
			return fmt.Errorf("render.targets[%d]: unknown target %q", i, t)
		}
	}
	return nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 1 && raw[0] == '{'
}
