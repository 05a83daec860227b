package main

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
)

// policyConfig is one entry of the config's policy list (docs/serve.md):
// how the environment's tools matching Match are offered as capabilities.
type policyConfig struct {
	// Match is a tool name or a glob ("fs.*", "*").
	Match            string   `yaml:"match"`
	RequiresApproval *bool    `yaml:"requiresApproval"`
	Audience         []string `yaml:"audience"`
	CallTimeoutMs    *int64   `yaml:"callTimeoutMs"`
	DisplayName      string   `yaml:"displayName"`
	PromptFragment   string   `yaml:"promptFragment"`
	// ShareInstances lets the tool's instances serve every session: a
	// trust decision (docs/security.md, "Artifacts (WebAssembly)", "State stays in its session").
	ShareInstances *bool `yaml:"shareInstances"`
}

// maxCallTimeoutMs bounds a policy's callTimeoutMs: one day.
const maxCallTimeoutMs = 24 * 60 * 60 * 1000

// positions finds where a YAML path is in the config file, for errors
// that name a line.
type positions struct {
	file string
	ast  *ast.File
}

func newPositions(file string, b []byte) positions {
	f, _ := parser.ParseBytes(b, 0) // a syntax error is the strict decoder's to report
	return positions{file: file, ast: f}
}

// at returns "file:line:column" of the node at p (a YAML path such as
// $.policy[0].match), or of its nearest ancestor found; "file" if none.
func (ps positions) at(p string) string {
	for ps.ast != nil && p != "" && p != "$" {
		if yp, err := yaml.PathString(p); err == nil {
			if n, err := yp.FilterFile(ps.ast); err == nil && n != nil && n.GetToken() != nil {
				tk := n.GetToken()
				if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 { // an entry: where its first key is
					tk = m.Values[0].Key.GetToken()
				}
				pos := tk.Position
				return fmt.Sprintf("%s:%d:%d", ps.file, pos.Line, pos.Column)
			}
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			break
		}
		p = p[:i]
	}
	return ps.file
}

// decodeError turns the YAML decoder's "[line:col] message" and source
// excerpt into "file:line:col: message" and the excerpt, naming the key
// whose value the decoder refused, and what it wants, where the decoder
// names a Go type: "limits.sessions_per_token: want a whole number, not a
// string".
func (ps positions) decodeError(err error) error {
	msg := yaml.FormatError(err, false, true)
	m := decodePosRE.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%s: %s", ps.file, msg)
	}
	if t := decodeTypeRE.FindStringSubmatch(m[3]); t != nil {
		if key := ps.keyAt(m[1], m[2]); key != "" {
			return fmt.Errorf("%s:%s:%s: %s: want %s, not %s", ps.file, m[1], m[2], key, goTypeWords(t[2]), yamlKindWords(t[1]))
		}
	}
	return fmt.Errorf("%s:%s:%s: %s", ps.file, m[1], m[2], m[3])
}

var (
	decodePosRE  = regexp.MustCompile(`(?s)^\[(\d+):(\d+)\] (.*)$`)
	decodeTypeRE = regexp.MustCompile(`^cannot unmarshal (\S+) into Go (?:struct field \S*|value) of type (\S+)`)
)

// keyAt is the YAML path (without "$.") of the mapping value at line and
// column ("" when none starts there).
func (ps positions) keyAt(line, column string) string {
	if ps.ast == nil {
		return ""
	}
	for _, d := range ps.ast.Docs {
		for _, n := range ast.Filter(ast.MappingValueType, d.Body) {
			mv := n.(*ast.MappingValueNode)
			if tk := mv.Value.GetToken(); tk != nil && tk.Position != nil && fmt.Sprint(tk.Position.Line) == line && fmt.Sprint(tk.Position.Column) == column {
				return strings.TrimPrefix(mv.GetPath(), "$.")
			}
		}
	}
	return ""
}

// yamlKindWords says what the decoder found ("string", "bool", "uint64",
// "mapping") with its article.
func yamlKindWords(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int") || strings.HasPrefix(kind, "uint") || strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "bool":
		return "true or false"
	case kind != "" && strings.ContainsRune("aeiou", rune(kind[0])):
		return "an " + kind
	}
	return "a " + kind
}

// goTypeWords says a Go type of the config's fields in a reader's words.
func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "text"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map[") || strings.Contains(t, "."):
		return "a mapping of keys"
	}
	return t
}

// errorf is an error about the config at the YAML path p.
func (ps positions) errorf(p, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s", ps.at(p), strings.TrimPrefix(p, "$."), fmt.Sprintf(format, args...))
}

// policyRules validates the config's policy list and turns it into the
// kernel's rules. Every error names the file, line and field.
func (c *serveConfig) policyRules() ([]kernel.PolicyRule, error) {
	var rules []kernel.PolicyRule
	for i, p := range c.Policy {
		at := fmt.Sprintf("$.policy[%d]", i)
		switch {
		case p.Match == "":
			return nil, c.pos.errorf(at, "match: a tool name or a glob such as \"fs.*\" is required")
		case strings.ContainsFunc(p.Match, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return nil, c.pos.errorf(at+".match", "%q must not contain spaces or control characters", p.Match)
		}
		if _, err := path.Match(p.Match, ""); err != nil {
			return nil, c.pos.errorf(at+".match", "%q is not a valid glob: %v", p.Match, err)
		}
		r := kernel.PolicyRule{Pattern: p.Match, Policy: kernel.Policy{
			RequiresApproval: p.RequiresApproval, DisplayName: p.DisplayName, PromptFragment: p.PromptFragment, ShareInstances: p.ShareInstances}}
		if p.Audience != nil {
			if len(p.Audience) == 0 {
				return nil, c.pos.errorf(at+".audience", "must not be empty (nobody could invoke the tool); leave it out for the default [llm, user]")
			}
			for j, a := range p.Audience {
				switch aa := protocol.Audience(a); aa {
				case protocol.AudienceLLM, protocol.AudienceUser, protocol.AudienceRuntime:
					if slices.Contains(r.Audience, aa) {
						return nil, c.pos.errorf(fmt.Sprintf("%s.audience[%d]", at, j), "%q is listed twice", a)
					}
					r.Audience = append(r.Audience, aa)
				default:
					return nil, c.pos.errorf(fmt.Sprintf("%s.audience[%d]", at, j), "unknown audience %q (want llm, user or runtime)", a)
				}
			}
		}
		if p.CallTimeoutMs != nil {
			if ms := *p.CallTimeoutMs; ms <= 0 || ms > maxCallTimeoutMs {
				return nil, c.pos.errorf(at+".callTimeoutMs", "%d is out of range (1 to %d milliseconds)", ms, maxCallTimeoutMs)
			}
			r.CallTimeout = time.Duration(*p.CallTimeoutMs) * time.Millisecond
		}
		if p.RequiresApproval == nil && p.Audience == nil && p.CallTimeoutMs == nil && p.DisplayName == "" && p.PromptFragment == "" && p.ShareInstances == nil {
			return nil, c.pos.errorf(at, "sets nothing: give at least one of requiresApproval, audience, callTimeoutMs, displayName, promptFragment, shareInstances")
		}
		if err := r.Validate(); err != nil { // the kernel's own check, a backstop
			return nil, c.pos.errorf(at, "%v", err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// checkPoliciesMatch refuses a policy entry that matches none of the
// environment's tools: a typo there would silently leave a tool without
// the approval it was meant to need.
func (c *serveConfig) checkPoliciesMatch(rules []kernel.PolicyRule, tools []string) error {
	for i, r := range rules {
		if !slices.ContainsFunc(tools, r.Matches) {
			return c.pos.errorf(fmt.Sprintf("$.policy[%d].match", i), "%q matches none of this environment's tools %v", r.Pattern, tools)
		}
	}
	return nil
}
