package session

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// A fast validator answers "valid" for the schemas tool inputs usually have
// — objects of typed properties with required names, length and range
// limits, string enums, arrays of such — straight from the JSON bytes,
// without decoding them into values. It answers only when it is sure: any
// other answer ("invalid", or "I cannot tell": an escaped string, a number
// that needs exact arithmetic) sends the input down the full path, the
// library's validator, which is the authority and writes the error
// messages. A schema with any keyword outside the subset has no fast
// validator at all. A differential fuzz test holds the two to agreement.
//
// Why: decoding the input into maps and validating with the general
// validator was two thirds of an agent-side invocation's time and
// allocations (issue 12: BenchmarkInvoke).

// JSON types as a bit set; 0 in fastSchema.types means any type.
const (
	jNull uint8 = 1 << iota
	jBool
	jInteger
	jNumber // any number, integers included
	jString
	jArray
	jObject
)

type fastSchema struct {
	never bool  // the false schema
	types uint8 // allowed types; 0: any

	minLen, maxLen int // string length in code points; -1: none
	enum           []string

	hasMin, hasMax bool
	min, max       float64

	propIndex    map[string]int
	propSchemas  []*fastSchema // nil: any value
	propsMask    uint64        // the indexes that are "properties"; the others are required names only
	requiredMask uint64
	addl         *fastSchema // nil: any additional property

	items              *fastSchema // nil: any item
	minItems, maxItems int         // -1: none
}

// fastKeywords are the keywords the fast validator understands; the
// annotations among them assert nothing.
var fastKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"maxLength": true, "minLength": true, "minimum": true, "maximum": true, "enum": true,
	"minItems": true, "maxItems": true,
	"description": true, "title": true, "default": true, "examples": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "$schema": true,
}

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// compileFast returns the fast validator of a schema document (as
// jsonschema.UnmarshalJSON decodes it), or nil when the schema uses
// anything outside the subset.
func compileFast(doc any, root bool) *fastSchema {
	switch d := doc.(type) {
	case bool:
		if d {
			return &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
		}
		return &fastSchema{never: true}
	case map[string]any:
		return compileFastObject(d, root)
	}
	return nil
}

func compileFastObject(d map[string]any, root bool) *fastSchema {
	s := &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	for k, v := range d {
		if !fastKeywords[k] {
			return nil
		}
		ok := true
		switch k {
		case "$schema":
			ok = root && v == draft2020
		case "type":
			s.types, ok = fastTypes(v)
		case "maxLength":
			s.maxLen, ok = fastCount(v)
		case "minLength":
			s.minLen, ok = fastCount(v)
		case "maxItems":
			s.maxItems, ok = fastCount(v)
		case "minItems":
			s.minItems, ok = fastCount(v)
		case "minimum":
			s.min, ok = fastNumber(v)
			s.hasMin = ok
		case "maximum":
			s.max, ok = fastNumber(v)
			s.hasMax = ok
		case "enum":
			s.enum, ok = fastEnum(v)
		case "items":
			s.items = compileFast(v, false)
			ok = s.items != nil
		case "additionalProperties":
			s.addl = compileFast(v, false)
			ok = s.addl != nil
		case "properties":
			ok = s.addProperties(v)
		}
		if !ok {
			return nil
		}
	}
	if req, ok := d["required"]; ok && !s.addRequired(req) {
		return nil
	}
	return s
}

func fastTypes(v any) (uint8, bool) {
	one := func(name any) uint8 {
		switch name {
		case "null":
			return jNull
		case "boolean":
			return jBool
		case "integer":
			return jInteger
		case "number":
			return jNumber
		case "string":
			return jString
		case "array":
			return jArray
		case "object":
			return jObject
		}
		return 0
	}
	if list, ok := v.([]any); ok {
		var t uint8
		for _, n := range list {
			b := one(n)
			if b == 0 {
				return 0, false
			}
			t |= b
		}
		return t, t != 0
	}
	t := one(v)
	return t, t != 0
}

func fastCount(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	return int(i), err == nil && i >= 0
}

// fastNumber reads a limit that float64 holds exactly enough: at most 15
// significant characters.
func fastNumber(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok || len(n) > 15 {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

func fastEnum(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

func (s *fastSchema) addProperties(v any) bool {
	props, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for name, sub := range props {
		if s.propIndex == nil {
			s.propIndex = map[string]int{}
		}
		f := compileFast(sub, false)
		if f == nil || len(s.propSchemas) == 64 || !plainKey(name) {
			return false
		}
		s.propsMask |= 1 << len(s.propSchemas)
		s.propIndex[name] = len(s.propSchemas)
		s.propSchemas = append(s.propSchemas, f)
	}
	return true
}

// addRequired adds the required names to the mask; a name without a
// property schema gets an index outside propsMask, so that its presence is
// seen while its value is still an additional property's.
func (s *fastSchema) addRequired(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range list {
		name, ok := e.(string)
		if !ok || !plainKey(name) {
			return false
		}
		i, ok := s.propIndex[name]
		if !ok {
			if len(s.propSchemas) == 64 {
				return false
			}
			if s.propIndex == nil {
				s.propIndex = map[string]int{}
			}
			i = len(s.propSchemas)
			s.propIndex[name] = i
			s.propSchemas = append(s.propSchemas, nil)
		}
		s.requiredMask |= 1 << i
	}
	return true
}

// plainKey reports a name that appears in JSON without escapes: printable
// ASCII other than '"' and '\'.
func plainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// fastScan walks JSON that json.Valid accepted.
type fastScan struct {
	data []byte
	pos  int
}

// valid reports whether raw, which json.Valid accepted, is certainly valid
// against s.
func (s *fastSchema) valid(raw []byte) bool {
	v := fastScan{data: raw}
	v.space()
	return v.check(s, 0)
}

func (v *fastScan) space() {
	for v.pos < len(v.data) {
		switch v.data[v.pos] {
		case ' ', '\t', '\n', '\r':
			v.pos++
		default:
			return
		}
	}
}

func allows(types, t uint8) bool { return types == 0 || types&t != 0 }

// check consumes one value and reports whether it is certainly valid
// against s (nil: anything). It may stop early when it is not.
func (v *fastScan) check(s *fastSchema, depth int) bool {
	if s == nil {
		return v.skip(depth)
	}
	if s.never || depth > maxDepth {
		return false
	}
	switch c := v.data[v.pos]; {
	case c == '{':
		return allows(s.types, jObject) && v.object(s, depth)
	case c == '[':
		return allows(s.types, jArray) && v.array(s, depth)
	case c == '"':
		return allows(s.types, jString) && v.str(s)
	case c == 't':
		v.pos += 4
		return allows(s.types, jBool) && s.enum == nil
	case c == 'f':
		v.pos += 5
		return allows(s.types, jBool) && s.enum == nil
	case c == 'n':
		v.pos += 4
		return allows(s.types, jNull) && s.enum == nil
	default:
		return v.number(s)
	}
}

func (v *fastScan) object(s *fastSchema, depth int) bool {
	if s.enum != nil {
		return false
	}
	v.pos++ // '{'
	var seen uint64
	v.space()
	if v.data[v.pos] == '}' {
		v.pos++
		return seen&s.requiredMask == s.requiredMask
	}
	for {
		v.space()
		key, ok := v.key()
		if !ok {
			return false
		}
		v.space()
		v.pos++ // ':'
		v.space()
		if i, known := s.propIndex[key]; known && s.propsMask&(1<<i) != 0 {
			seen |= 1 << i
			if !v.check(s.propSchemas[i], depth+1) {
				return false
			}
		} else if known {
			seen |= 1 << i
			if !v.check(s.addl, depth+1) {
				return false
			}
		} else if !v.check(s.addl, depth+1) {
			return false
		}
		v.space()
		c := v.data[v.pos]
		v.pos++
		if c == '}' {
			return seen&s.requiredMask == s.requiredMask
		}
	}
}

// key reads an object key without escapes or non-ASCII bytes.
func (v *fastScan) key() (string, bool) {
	start := v.pos + 1
	for i := start; i < len(v.data); i++ {
		switch c := v.data[i]; {
		case c == '"':
			v.pos = i + 1
			return alias(v.data[start:i]), true
		case c == '\\' || c >= utf8.RuneSelf:
			return "", false
		}
	}
	return "", false
}

func (v *fastScan) array(s *fastSchema, depth int) bool {
	if s.enum != nil {
		return false
	}
	v.pos++ // '['
	n := 0
	v.space()
	if v.data[v.pos] == ']' {
		v.pos++
	} else {
		for {
			v.space()
			if !v.check(s.items, depth+1) {
				return false
			}
			n++
			v.space()
			c := v.data[v.pos]
			v.pos++
			if c == ']' {
				break
			}
		}
	}
	return (s.minItems < 0 || n >= s.minItems) && (s.maxItems < 0 || n <= s.maxItems)
}

func (v *fastScan) str(s *fastSchema) bool {
	start := v.pos + 1
	plain := true
	i := start
	for ; ; i++ {
		c := v.data[i]
		if c == '\\' {
			plain = false
			i++
			continue
		}
		if c == '"' {
			break
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
	}
	v.pos = i + 1
	body := v.data[start:i]
	if s.minLen < 0 && s.maxLen < 0 && s.enum == nil {
		return true
	}
	if !plain {
		// Escapes or non-ASCII: only unescaped valid UTF-8 is counted here.
		for _, c := range body {
			if c == '\\' {
				return false
			}
		}
		if !utf8.Valid(body) {
			return false
		}
	}
	n := len(body)
	if !plain {
		n = utf8.RuneCount(body)
	}
	if s.minLen >= 0 && n < s.minLen || s.maxLen >= 0 && n > s.maxLen {
		return false
	}
	if s.enum != nil {
		for _, e := range s.enum {
			if e == alias(body) {
				return true
			}
		}
		return false
	}
	return true
}

func (v *fastScan) number(s *fastSchema) bool {
	start := v.pos
	integral := true
	for v.pos < len(v.data) {
		c := v.data[v.pos]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		if c == '.' || c == 'e' || c == 'E' {
			integral = false
		}
		v.pos++
	}
	if s.enum != nil {
		return false
	}
	switch {
	case s.types == 0 || s.types&jNumber != 0:
	case s.types&jInteger != 0 && integral:
	default:
		return false // not a number the schema allows, or 1.0-like: let the full path decide
	}
	if !s.hasMin && !s.hasMax {
		return true
	}
	lit := v.data[start:v.pos]
	if len(lit) > 15 {
		return false
	}
	f, err := strconv.ParseFloat(alias(lit), 64)
	if err != nil {
		return false
	}
	return (!s.hasMin || f >= s.min) && (!s.hasMax || f <= s.max)
}

// skip consumes one value of any content.
func (v *fastScan) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch v.data[v.pos] {
	case '{':
		v.pos++
		v.space()
		if v.data[v.pos] == '}' {
			v.pos++
			return true
		}
		for {
			v.space()
			v.skipString() // the key
			v.space()
			v.pos++ // ':'
			v.space()
			if !v.skip(depth + 1) {
				return false
			}
			v.space()
			c := v.data[v.pos]
			v.pos++
			if c == '}' {
				return true
			}
		}
	case '[':
		v.pos++
		v.space()
		if v.data[v.pos] == ']' {
			v.pos++
			return true
		}
		for {
			v.space()
			if !v.skip(depth + 1) {
				return false
			}
			v.space()
			c := v.data[v.pos]
			v.pos++
			if c == ']' {
				return true
			}
		}
	case '"':
		v.skipString()
	case 't', 'n':
		v.pos += 4
	case 'f':
		v.pos += 5
	default:
		for v.pos < len(v.data) {
			switch v.data[v.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return true
			}
			v.pos++
		}
	}
	return true
}

func (v *fastScan) skipString() {
	i := v.pos + 1
	for {
		c := v.data[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '"' {
			break
		}
		i++
	}
	v.pos = i + 1
}
