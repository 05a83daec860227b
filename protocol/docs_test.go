package protocol_test

import (
	"os"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestCodesDocumented: every code in the catalogue has a row in the error
// code table of docs/protocol.md.
func TestCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range protocol.Codes() {
		if !strings.Contains(string(doc), "| `"+string(c)+"` |") {
			t.Errorf("code %q is not documented in docs/protocol.md", c)
		}
	}
}
