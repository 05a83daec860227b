package jsonscan_test

import (
	"fmt"
	"testing"

	"github.com/brainrt/brain/internal/jsonscan"
)

// Example reads an object's keys and values in place.
func Example() {
	sc := jsonscan.New([]byte(`{"name":"fs.read", "input": {"path":"a b"} }`))
	sc.Open()
	for first := true; ; first = false {
		key, more := sc.Key(first)
		if !more {
			break
		}
		if string(key) == "name" {
			name, _ := sc.PlainString()
			fmt.Printf("%s: %s\n", key, name)
			continue
		}
		fmt.Printf("%s: %s\n", key, sc.Value())
	}
	fmt.Println("end:", sc.End())
	// Output:
	// name: fs.read
	// input: {"path":"a b"}
	// end: true
}

// TestScannerRefuses: what a fast path does not take sets Bad.
func TestScannerRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, why string }{
		{`{"a\"b":1}`, "an escaped key"},
		{`{"é":1}`, "a key outside printable ASCII"},
		{`[1]`, "not an object"},
	} {
		sc := jsonscan.New([]byte(tc.doc))
		if sc.Open() {
			sc.Key(true)
		}
		if !sc.Bad {
			t.Errorf("%s (%s): taken", tc.doc, tc.why)
		}
	}
	sc := jsonscan.New([]byte(`{"a":1} x`))
	sc.Open()
	sc.Key(true)
	sc.Value()
	if sc.Key(false); sc.End() {
		t.Error("trailing bytes: End reports the document done")
	}
}
