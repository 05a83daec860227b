package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/brainrt/brain/internal/jsonvalid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxSchemaBytes bounds an inputSchema or outputSchema.
const MaxSchemaBytes = 256 << 10

// MaxSchemaDepth bounds how deep an inputSchema or outputSchema nests, in
// JSON levels (an object property's schema is two below its object's).
// Compiling costs more than linearly with depth: one frame's schema of
// {"type":"array","items":…} 5,000 levels deep (125 KB) held a core for
// minutes, 2,400 levels for 13 s (a tenant's probe); at 128 levels a
// schema of MaxSchemaBytes compiles in about the time one of 32 does.
// Schemas as people and generators write them nest a few tens of levels;
// recursion is written with $ref, which costs no depth.
const MaxSchemaDepth = 128

// Schema is a compiled JSON Schema (draft 2020-12 unless the schema names
// another draft with $schema).
type Schema struct {
	s    *jsonschema.Schema
	fast *fastSchema     // nil: the schema is outside the fast subset (fastschema.go)
	raw  json.RawMessage // the schema's text, shared by every registration of it: never modified
}

// refuseLoader refuses every external reference: a schema from the wire
// must not make the kernel read files ("$ref": "file:///etc/passwd", the
// library's default loader) or fetch URLs.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed: schemas must be self-contained", url)
}

// CompileSchema compiles raw as a JSON Schema. External references are
// refused; only the draft meta-schemas are known.
//
// A compiled schema is immutable and safe for concurrent use, so the same
// text compiles once while anything holds its Schema: every session
// registering a capability with this schema — a client's, or the
// environment's tools exposed in each session — shares one (see
// schemacache.go).
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("schema is %d bytes, more than %d", len(raw), MaxSchemaBytes)
	}
	if d := jsonDepth(raw, MaxSchemaDepth); d > MaxSchemaDepth {
		return nil, fmt.Errorf("schema nests more than %d levels deep: write deep or recursive structures with $defs and $ref", MaxSchemaDepth)
	}
	return schemas.compile(raw)
}

// jsonDepth returns how deep raw's brackets nest, counting up to one past
// limit (it stops there), outside strings. raw need not be valid JSON: the
// compiler refuses what is not.
func jsonDepth(raw []byte, limit int) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// compileSchema compiles raw, without the cache.
func compileSchema(raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	// A hierarchical base, not an opaque one ("brain:schema.json"): relative
	// references resolve against an opaque base to the base itself, so
	// {"$ref": "other.json"} compiled into a silent self-reference instead
	// of being refused as external.
	const loc = "brain:///schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	// $refs that come back to where they began with no keyword between
	// ({"$ref":"#"}) compile, and then every value fails "causing
	// reference cycle": the capability could never be called (the
	// re-probe registered three). Validating any value meets such a
	// cycle at once.
	for _, probe := range []any{nil, map[string]any{}, []any{}, ""} {
		if cycle := refCycle(s.Validate(probe)); cycle != nil {
			return nil, fmt.Errorf("its $refs form a cycle that never reaches a schema (%s and %s both resolve to %s): no value could ever be valid", cycle.KeywordLocation1, cycle.KeywordLocation2, cycle.URL)
		}
	}
	return &Schema{s: s, fast: compileFast(doc, true), raw: slices.Clone(raw)}, nil
}

// ValidateJSON decodes raw and validates it. The error lists each failing
// location as a JSON pointer with what was wrong there, sorted, so a model
// can act on it.
func (s *Schema) ValidateJSON(raw json.RawMessage) error {
	if s.fast != nil && jsonvalid.Valid(raw) && s.fast.valid(raw) {
		return nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return fmt.Errorf("input is not valid JSON: %w", err)
	}
	return s.Validate(v)
}

// Validate validates a value decoded from JSON (as by encoding/json into an
// any, or with json.Number).
func (s *Schema) Validate(v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	return &ValidationError{Problems: problems(ve)}
}

// printer renders validation messages in English.
var printer = message.NewPrinter(language.English)

// ValidationError lists what failed, one problem per instance location.
type ValidationError struct {
	Problems []Problem
}

// Problem is one failing location: a JSON pointer ("" is the whole value,
// "/items/0/name" a nested field) and what was wrong.
type Problem struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// Error joins the problems: `at "/text": got number, want string; …`.
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = "/"
		}
		fmt.Fprintf(&b, "at %q: %s", ptr, p.Message)
	}
	return b.String()
}

// problems flattens a validation error into its leaves, deduplicated and
// sorted by pointer.
func problems(ve *jsonschema.ValidationError) []Problem {
	var out []Problem
	seen := map[Problem]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			p := Problem{Pointer: pointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pointer != out[j].Pointer {
			return out[i].Pointer < out[j].Pointer
		}
		return out[i].Message < out[j].Message
	})
	return out
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// refCycle returns the reference cycle a validation error met, if any.
func refCycle(err error) *kind.RefCycle {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var find func(*jsonschema.ValidationError) *kind.RefCycle
	find = func(e *jsonschema.ValidationError) *kind.RefCycle {
		if c, ok := e.ErrorKind.(*kind.RefCycle); ok {
			return c
		}
		for _, cause := range e.Causes {
			if c := find(cause); c != nil {
				return c
			}
		}
		return nil
	}
	return find(ve)
}
