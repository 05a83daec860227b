// Package jsonkeys finds a key given twice in one object of a JSON
// document. JSON leaves a repeated key's meaning open, and parsers differ:
// Go's encoding/json and JavaScript take the last value, others the first
// or refuse — so an input holding one twice can be shown to an approver
// with one value and run with the other. encoding/json also matches keys
// to a struct's fields without regard to case, so {"mode":"read",
// "MODE":"write"} is one key twice to a Go tool.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// Duplicate returns the first key that b, a valid JSON document, holds
// twice in one object, as written both times; with fold, keys equal but
// for case (as encoding/json matches them) count as one. ok is false when
// every object's keys are distinct, or b is not valid JSON (the caller's
// decoder says what is wrong with it).
func Duplicate(b []byte, fold bool) (first, second string, ok bool) {
	d := scanner{b: b, fold: fold}
	d.value()
	return d.first, d.second, d.found
}

type scanner struct {
	b             []byte
	i             int
	fold          bool
	bad, found    bool
	first, second string
}

func (d *scanner) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value reads one value; it stops early once a duplicate is found or
// the document turns out not to be JSON.
func (d *scanner) value() {
	d.space()
	if d.i >= len(d.b) {
		d.bad = true
		return
	}
	switch d.b[d.i] {
	case '{':
		d.object()
	case '[':
		d.i++
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return
		}
		for !d.bad && !d.found {
			d.value()
			d.space()
			if d.i >= len(d.b) {
				d.bad = true
				return
			}
			if d.b[d.i] == ']' {
				d.i++
				return
			}
			if d.b[d.i] != ',' {
				d.bad = true
				return
			}
			d.i++
		}
	case '"':
		d.str()
	default: // a number, true, false or null: up to the next delimiter
		for ; d.i < len(d.b); d.i++ {
			switch d.b[d.i] {
			case ',', ']', '}', ' ', '\t', '\r', '\n':
				return
			}
		}
	}
}

// str reads a string and returns its raw bytes (between the quotes) and
// whether it holds an escape.
func (d *scanner) str() (raw []byte, escaped bool) {
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			d.i = j + 1
			return d.b[start:j], escaped
		}
	}
	d.bad = true
	return nil, false
}

// small is how many keys of an object are compared pairwise before a map
// is made: inputs are small objects, and a map per object would allocate.
const small = 16

func (d *scanner) object() {
	d.i++ // '{'
	var few [small][]byte
	keys := few[:0]
	var many map[string][]byte // key as compared → as written
	for !d.bad && !d.found {
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return
		}
		if len(keys) > 0 || many != nil {
			if d.i >= len(d.b) || d.b[d.i] != ',' {
				d.bad = true
				return
			}
			d.i++
			d.space()
		}
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			d.bad = true
			return
		}
		k, escaped := d.str() // as written, in the input: no copy
		if d.bad {
			return
		}
		if escaped { // the key as a parser reads it
			var s string
			if json.Unmarshal(d.b[d.i-len(k)-2:d.i], &s) != nil {
				d.bad = true
				return
			}
			k = []byte(s)
		}
		switch {
		case many != nil:
			if w, dup := many[d.key(k)]; dup {
				d.dup(w, k)
				return
			}
			many[d.key(k)] = k
		case len(keys) < small:
			for _, w := range keys {
				if bytes.Equal(w, k) || (d.fold && bytes.EqualFold(w, k)) {
					d.dup(w, k)
					return
				}
			}
			keys = append(keys, k)
		default:
			many = make(map[string][]byte, 2*small)
			for _, w := range keys {
				many[d.key(w)] = w
			}
			if w, dup := many[d.key(k)]; dup {
				d.dup(w, k)
				return
			}
			many[d.key(k)] = k
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			d.bad = true
			return
		}
		d.i++
		d.value()
	}
}

// key is k as compared: folded (as bytes.EqualFold compares) with fold.
func (d *scanner) key(k []byte) string {
	if !d.fold {
		return string(k)
	}
	return strings.Map(func(r rune) rune {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			r = min(r, f) // the orbit's least rune stands for it
		}
		return r
	}, string(k))
}

func (d *scanner) dup(first, second []byte) {
	d.found, d.first, d.second = true, string(first), string(second)
}
