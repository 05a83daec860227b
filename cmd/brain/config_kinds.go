package main

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// checkKinds walks a config's YAML beside the Go type it decodes into and
// refuses a value the decoder would take for a whole number or a yes/no
// without a word: a number with a fraction (1.5, "1.5" and 1e-1 became 1
// or 0, and 0 means "the default"), text, and anything but true or false
// for a bool (a lifecycle probe and its re-probe). Fractions stay for the settings that
// take them (frames_per_second), which refuse text and infinities alike.
// The error names the place and the key.
func (ps positions) checkKinds(n ast.Node, t reflect.Type, path string) error {
	if n == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := n.(type) {
	case *ast.NullNode, *ast.CommentGroupNode:
		return nil
	case *ast.AnchorNode:
		return ps.checkKinds(v.Value, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := n.(*ast.MappingNode)
		if !ok {
			return nil // the decoder says what is wrong
		}
		for _, mv := range m.Values {
			key := mv.Key.String()
			if f, ok := fieldByTag(t, key); ok {
				if err := ps.checkKinds(mv.Value, f.Type, path+"."+key); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if m, ok := n.(*ast.MappingNode); ok {
			for _, mv := range m.Values {
				if err := ps.checkKinds(mv.Value, t.Elem(), path+"."+mv.Key.String()); err != nil {
					return err
				}
			}
		}
	case reflect.Slice:
		if s, ok := n.(*ast.SequenceNode); ok {
			for i, e := range s.Values {
				if err := ps.checkKinds(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f, ok := plainNumber(n); ok && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return nil // whole, and of a size an int holds (1e30 is not)
		}
		return ps.kindError(n, path, "a whole number")
	case reflect.Float32, reflect.Float64:
		if f, ok := plainNumber(n); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return nil
		}
		return ps.kindError(n, path, "a number")
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			return ps.kindError(n, path, "true or false")
		}
	}
	return nil
}

// plainNumber is the number a scalar writes: an integer, a float (2.0),
// or text that reads as one (1e3, which goccy lexes as text; "500",
// quoted, which goccy decodes into an int too, and configs written so
// keep working).
func plainNumber(n ast.Node) (float64, bool) {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.StringNode:
	default:
		return 0, false
	}
	tk := n.GetToken()
	if tk == nil {
		return 0, false
	}
	if i, err := strconv.ParseInt(tk.Value, 0, 64); err == nil { // 0x10, 0o17, 1_000
		return float64(i), true
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(tk.Value, "_", ""), 64)
	return f, err == nil
}

// fieldByTag is t's field whose yaml tag names key.
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func (ps positions) kindError(n ast.Node, path, want string) error {
	at := ps.file
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		at = fmt.Sprintf("%s:%d:%d", ps.file, tk.Position.Line, tk.Position.Column)
	}
	return fmt.Errorf("%s: %s: want %s, not %s", at, strings.TrimPrefix(path, "$."), want, strings.TrimSpace(n.String()))
}
