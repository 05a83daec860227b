package provide

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/brainrt/brain/internal/yamlcheck"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/provide/script"
)

// Load reads the grants file at path and parses it with [Parse], naming
// the file path in errors.
func Load(path string) (Grants, error) {
	f, err := os.Open(path)
	if err != nil {
		return Grants{}, fmt.Errorf("read grants: %w", err)
	}
	defer f.Close()
	// Why a limit: a path such as /dev/zero would otherwise be read for
	// ever. One byte more than Parse accepts lets it say so.
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return Grants{}, fmt.Errorf("read grants: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes data, the YAML text of a grants file named name, and
// validates it with [Grants.Validate]. Relative paths in it (workspace,
// fs.root, exec.root, page.binary) are resolved against the directory of
// name; a name without one means the working directory.
//
// The result is effective: its paths are absolute and the fs and exec
// roots default to the workspace. A section written with no value
// ("js:") is provided with its defaults, as "js: {}" is; a section that is
// absent is not provided.
//
// Every error about the text is an *[Error] naming the file, line, column
// and field: syntax errors, unknown keys, values of the wrong type,
// durations without a unit, and whatever Validate finds.
func Parse(data []byte, name string) (Grants, error) {
	if len(data) > maxFileBytes {
		return Grants{}, &Error{File: name, Line: 1, Column: 1,
			Msg: fmt.Sprintf("the file is %d bytes; a grants file may have at most %d", len(data), maxFileBytes)}
	}
	// Tags are refused before goccy sees them (one crashes its decoder);
	// anchors are allowed, and their expansion bounded by the walk below.
	if e := yamlcheck.Check(data, yamlcheck.Options{Anchors: true}); e != nil {
		return Grants{}, &Error{File: name, Line: e.Line, Column: e.Column, Msg: e.Msg + " (a grants file needs none)"}
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return Grants{}, syntaxError(name, err)
	}
	body, e := documentBody(f)
	if e != nil {
		e.File = name
		return Grants{}, e
	}
	x := &index{pos: map[string]place{}, tokens: map[*token.Token]string{}, anchors: map[string]ast.Node{}, expanding: map[string]bool{}}
	var g Grants
	if body != nil {
		if e := x.walk(body, reflect.TypeFor[Grants](), ""); e != nil {
			e.File = name
			return Grants{}, e
		}
		// Why both: walk places every problem it knows of in the file;
		// goccy's strict decoder is the backstop for anything it does not.
		if err := yamlcheck.Decode(func() error { return yaml.NodeToValue(body, &g, yaml.Strict()) }); err != nil {
			return Grants{}, x.decodeError(name, err)
		}
	}
	// A section present with no value is provided with its defaults.
	if _, ok := x.pos["fs"]; ok && g.FS == nil {
		g.FS = &fsroot.Grants{}
	}
	if _, ok := x.pos["exec"]; ok && g.Exec == nil {
		g.Exec = &proc.Grants{}
	}
	if _, ok := x.pos["net"]; ok && g.Net == nil {
		g.Net = &fetch.Grants{}
	}
	if _, ok := x.pos["js"]; ok && g.JS == nil {
		g.JS = &script.Grants{}
	}
	if _, ok := x.pos["page"]; ok && g.Page == nil {
		g.Page = &browser.Grants{}
	}
	dir, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return Grants{}, fmt.Errorf("grants %s: %w", name, err)
	}
	g = g.resolve(dir)
	if err := g.Validate(); err != nil {
		var fe *grant.FieldError
		if !errors.As(err, &fe) {
			return Grants{}, fmt.Errorf("grants %s: %w", name, err)
		}
		pos := x.locate(fe.Field)
		return Grants{}, &Error{File: name, Line: pos.line, Column: pos.col, Field: fe.Field, Msg: fe.Msg, Err: fe}
	}
	return g, nil
}

// documentBody returns the body of the one document in f, or nil when f
// holds none (an empty file, or only comments).
func documentBody(f *ast.File) (ast.Node, *Error) {
	var body ast.Node
	for _, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		switch doc.Body.(type) {
		case *ast.CommentGroupNode, *ast.DirectiveNode:
			continue
		}
		if body != nil {
			e := &Error{Msg: "a second YAML document: a grants file holds one"}
			tk := doc.Start
			if tk == nil {
				tk = doc.Body.GetToken()
			}
			pos := placeOf(tk)
			e.Line, e.Column = pos.line, pos.col
			return nil, e
		}
		body = doc.Body
	}
	return body, nil
}

// syntaxError places an error of the YAML parser.
func syntaxError(name string, err error) error {
	e := &Error{File: name, Line: 1, Column: 1, Msg: err.Error(), Err: err}
	var ye yaml.Error
	if errors.As(err, &ye) {
		e.Msg = ye.GetMessage()
		pos := placeOf(ye.GetToken())
		e.Line, e.Column = pos.line, pos.col
	}
	return e
}

// index records where each field of a grants file is, while walk checks
// the file's tree against the Go types of [Grants].
type index struct {
	// pos maps a field's path ("net.allow_hosts[1]") to the position of its
	// key, or of the item for a list entry.
	pos map[string]place
	// tokens maps the first token of each value to the value's path.
	tokens map[*token.Token]string
	// anchors maps each anchor's name to the value it names.
	anchors map[string]ast.Node
	// expanding holds the anchors whose aliases are being walked.
	expanding map[string]bool
	// alias, while the value of an alias is walked, is where the alias
	// is: every field inside is placed there.
	alias *place
	// visits counts the values walked, aliases expanded: an alias bomb
	// (anchors that each use the one before twice) stops at maxValues
	// instead of taking exponential time.
	visits int
}

// Bounds on a grants file, far above any real one: the example has about
// 60 values in 2 KiB.
const (
	maxFileBytes = 1 << 20
	maxValues    = 100_000
)

// note notes that tk starts the value at path, unless it starts one
// already (the value of an anchor, walked again at each alias).
func (x *index) note(tk *token.Token, path string) {
	if tk == nil {
		return
	}
	if _, seen := x.tokens[tk]; !seen {
		x.tokens[tk] = path
	}
}

// record notes that field is at tk, or at the alias being walked.
func (x *index) record(field string, tk *token.Token) {
	if x.alias != nil {
		x.pos[field] = *x.alias
		return
	}
	x.pos[field] = placeOf(tk)
}

// locate returns the position of field, or of its nearest ancestor in the
// file ("fs" for a defaulted "fs.root"), or 1:1.
func (x *index) locate(field string) place {
	for p := field; p != ""; p = parentPath(p) {
		if pos, ok := x.pos[p]; ok {
			return pos
		}
	}
	return place{1, 1}
}

// place is a line and a column, both from 1.
type place struct{ line, col int }

// placeOf returns where tk is, or 1:1.
func placeOf(tk *token.Token) place {
	if tk == nil || tk.Position == nil {
		return place{1, 1}
	}
	return place{tk.Position.Line, tk.Position.Column}
}

// parentPath returns the path above p: "net" for "net.allow_hosts",
// "net.allow_hosts" for "net.allow_hosts[1]", "" for "net".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// decodeError places an error of the YAML decoder, using the token it
// names to find the field.
func (x *index) decodeError(name string, err error) error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		return &Error{File: name, Line: 1, Column: 1, Msg: err.Error(), Err: err}
	}
	tk := ye.GetToken()
	pos := placeOf(tk)
	e := &Error{File: name, Line: pos.line, Column: pos.col, Msg: ye.GetMessage(), Err: err}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		got := tk.Value
		if tk.Type == token.TagType && tk.Next != nil {
			got += " " + tk.Next.Value
		}
		e.Msg = fmt.Sprintf("want %s, got %s", wantOf(te.DstType), strconv.Quote(got))
	}
	path, ok := x.tokens[tk]
	if !ok {
		// The decoder may have made its own token for a value.
		for t, p := range x.tokens {
			if placeOf(t) == pos {
				path, ok = p, true
				break
			}
		}
	}
	if ok {
		e.Field = path
		if pos, ok := x.pos[path]; ok {
			e.Line, e.Column = pos.line, pos.col
		}
	}
	return e
}

// wantOf describes what a value of type t is written as.
func wantOf(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "something else"
	}
	if t == durationType {
		return "a duration such as 30s"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

var durationType = reflect.TypeFor[time.Duration]()

// walk checks node n against type t at path, records the positions of
// everything in it, and returns the first problem: a key t does not have,
// a value of the wrong kind, a duration without a unit, a fractional or
// out-of-range integer.
func (x *index) walk(n ast.Node, t reflect.Type, path string) *Error {
	if n == nil {
		return nil
	}
	if x.visits++; x.visits > maxValues {
		return x.at(path, "the file expands to more than %d values (through its aliases); a grants file needs far fewer", maxValues)
	}
	x.note(n.GetToken(), path) // an anchor's or a tag's
	n = x.unwrap(n)
	if n == nil {
		return nil
	}
	if a, ok := n.(*ast.AliasNode); ok {
		// The value an alias stands for is checked again where the alias
		// is, against the type there. An unknown name, or an alias inside
		// its own anchor, is left to the decoder.
		name := nodeText(a.Value)
		target, ok := x.anchors[name]
		if !ok || x.expanding[name] {
			return nil
		}
		x.expanding[name] = true
		defer delete(x.expanding, name)
		if x.alias == nil {
			// Everything inside is placed at the alias, where the value
			// was used.
			at := x.locate(path)
			x.alias = &at
			defer func() { x.alias = nil }()
		}
		return x.walk(target, t, path)
	}
	x.note(n.GetToken(), path)
	if _, ok := n.(*ast.NullNode); ok {
		return nil // the zero value: the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return x.duration(n, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := n.(ast.MapNode)
		if !ok {
			return x.mismatch(n, wantOf(t), path)
		}
		fields := yamlFields(t)
		for it := m.MapRange(); it.Next(); {
			kv := it.KeyValue()
			if kv.Key.IsMergeKey() {
				// "<<: *base" merges base's keys into this mapping.
				if e := x.walkMerge(kv.Value, t, path); e != nil {
					return e
				}
				continue
			}
			key := keyString(kv.Key)
			field := join(path, key)
			x.record(field, kv.Key.GetToken())
			ft, ok := fields.types[key]
			if !ok {
				return x.at(field, "unknown key (want one of %s)", strings.Join(fields.names, ", "))
			}
			if e := x.walk(kv.Value, ft, field); e != nil {
				return e
			}
		}
	case reflect.Map:
		m, ok := n.(ast.MapNode)
		if !ok {
			return x.mismatch(n, wantOf(t), path)
		}
		for it := m.MapRange(); it.Next(); {
			kv := it.KeyValue()
			field := join(path, keyString(kv.Key))
			x.record(field, kv.Key.GetToken())
			if e := x.walk(kv.Value, t.Elem(), field); e != nil {
				return e
			}
		}
	case reflect.Slice:
		s, ok := n.(*ast.SequenceNode)
		if !ok {
			return x.mismatch(n, wantOf(t), path)
		}
		for i, v := range s.Values {
			field := fmt.Sprintf("%s[%d]", path, i)
			x.record(field, unwrapToken(v))
			if e := x.walk(v, t.Elem(), field); e != nil {
				return e
			}
		}
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			return x.mismatch(n, wantOf(t), path)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return x.integer(n, t, path)
	case reflect.String:
		if !isScalar(n) {
			return x.mismatch(n, wantOf(t), path)
		}
	}
	return nil
}

// walkMerge checks the value of a merge key, a mapping or a list of
// mappings, against the struct type t of the mapping it merges into.
func (x *index) walkMerge(n ast.Node, t reflect.Type, path string) *Error {
	if s, ok := x.unwrap(n).(*ast.SequenceNode); ok {
		for _, v := range s.Values {
			if e := x.walk(v, t, path); e != nil {
				return e
			}
		}
		return nil
	}
	return x.walk(n, t, path)
}

// duration checks that n is a Go duration with a unit ("30s", "1m30s").
func (x *index) duration(n ast.Node, path string) *Error {
	switch n := n.(type) {
	case *ast.StringNode:
		if _, err := time.ParseDuration(n.Value); err != nil {
			return x.at(path, "%q is not a duration (write one such as 500ms, 30s or 1m30s)", n.Value)
		}
		return nil
	case *ast.IntegerNode, *ast.FloatNode:
		return x.at(path, "%s has no unit (write a duration such as 30s)", n.GetToken().Value)
	}
	return x.mismatch(n, wantOf(durationType), path)
}

// integer checks that n is a whole number that fits t.
func (x *index) integer(n ast.Node, t reflect.Type, path string) *Error {
	v := reflect.New(t).Elem()
	text := ""
	if tk := n.GetToken(); tk != nil {
		text = tk.Value
	}
	switch n := n.(type) {
	case *ast.IntegerNode:
		switch i := n.Value.(type) {
		case int64:
			if !v.OverflowInt(i) {
				return nil
			}
		case uint64:
			if i <= math.MaxInt64 && !v.OverflowInt(int64(i)) {
				return nil
			}
		}
		return x.at(path, "%s is out of range", text)
	case *ast.FloatNode:
		f := n.Value
		if f != math.Trunc(f) || math.IsInf(f, 0) {
			return x.at(path, "%s is not a whole number", text)
		}
		if f < -(1<<63) || f >= 1<<63 || v.OverflowInt(int64(f)) {
			return x.at(path, "%s is out of range", text)
		}
		return nil
	}
	return x.mismatch(n, wantOf(t), path)
}

// mismatch reports that n is not what was wanted.
func (x *index) mismatch(n ast.Node, want, path string) *Error {
	var got string
	switch n := n.(type) {
	case ast.MapNode:
		got = "a mapping"
	case *ast.SequenceNode:
		got = "a list"
	case *ast.StringNode:
		got = strconv.Quote(n.Value)
	default:
		got = "something else"
		if tk := n.GetToken(); tk != nil {
			got = tk.Value
		}
	}
	e := x.at(path, "want %s, got %s", want, got)
	if path == "" {
		e.Msg = fmt.Sprintf("want a mapping of sections (workspace, fs, exec, net, js, page), got %s", got)
		pos := placeOf(n.GetToken())
		e.Line, e.Column = pos.line, pos.col
	}
	return e
}

// at returns an *Error for field, placed where the field is.
func (x *index) at(field, format string, args ...any) *Error {
	pos := x.locate(field)
	return &Error{Line: pos.line, Column: pos.col, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fieldSet is the YAML keys of a struct type.
type fieldSet struct {
	names []string // in declaration order
	types map[string]reflect.Type
}

// yamlFields returns the keys of struct type t as goccy decodes them: the
// yaml tag's name, or the field's name in lower case, with the fields of
// ",inline" structs merged in.
func yamlFields(t reflect.Type) fieldSet {
	fs := fieldSet{types: map[string]reflect.Type{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("yaml")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if strings.Contains(","+opts+",", ",inline,") {
				add(f.Type)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fs.names = append(fs.names, name)
			fs.types[name] = f.Type
		}
	}
	add(t)
	return fs
}

// unwrap returns the node an anchor or a tag decorates, recording the
// anchors it passes.
func (x *index) unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			x.anchors[nodeText(v.Name)] = v.Value
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

// unwrapToken returns the first token of the value n decorates.
func unwrapToken(n ast.Node) *token.Token {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case nil:
			return nil
		default:
			return v.GetToken()
		}
	}
}

// keyString returns the text of a mapping key.
func keyString(k ast.MapKeyNode) string {
	if s, ok := ast.Node(k).(*ast.StringNode); ok {
		return s.Value
	}
	return nodeText(k)
}

// nodeText returns the text of n's token.
func nodeText(n ast.Node) string {
	if n == nil {
		return ""
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return n.String()
}

// isScalar reports whether n is a single value a string field accepts:
// text, a number or a boolean.
func isScalar(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return true
	}
	return false
}

// join returns the path of key below path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
