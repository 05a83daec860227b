package tool

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// caseTwin finds, in the objects of data that decode into structs of t,
// two keys equal but for case: encoding/json matches a key to a field
// without regard to case and takes the last, so {"mode":"read",
// "MODE":"write"} passes a schema allowing only "read" under "mode" and
// decodes as "write". Objects that decode into maps, interfaces or raw
// JSON keep their keys as sent (a script's arguments, a request's
// headers: "Name" and "name" are two there), and are not looked at. data
// holds no key twice exactly (the session refuses that first).
func caseTwin(data []byte, t reflect.Type) (a, b string, found bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		return "", "", false
	case t.Kind() == reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return "", "", false // not an object: the decoder says so
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range obj {
				if !yield(k) {
					return
				}
			}
		})
		for i, k := range keys {
			for _, l := range keys[i+1:] {
				if strings.EqualFold(k, l) {
					return k, l, true
				}
			}
		}
		fields := jsonFields(t)
		for _, k := range keys {
			for _, f := range fields {
				if strings.EqualFold(f.name, k) {
					if a, b, found := caseTwin(obj[k], f.typ); found {
						return a, b, true
					}
					break
				}
			}
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil {
			return "", "", false
		}
		for _, e := range arr {
			if a, b, found := caseTwin(e, t.Elem()); found {
				return a, b, true
			}
		}
	}
	return "", "", false
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// jsonField is a field of a struct as encoding/json names it.
type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists t's fields as encoding/json decodes them: exported,
// named by their json tag or their name, "-" left out, embedded structs'
// fields promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name, f.Type})
	}
	return out
}
