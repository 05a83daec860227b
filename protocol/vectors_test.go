package protocol_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/brainrt/brain/protocol"
)

// TestSharedVectors reads the test vectors that the TypeScript client's
// tests read too (clients/ts/test/vectors.test.ts), so that the two
// implementations of isUserInvokable and isRenderCapability cannot drift.
// Every capability in the file is a valid wire capability.
func TestSharedVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/user_invokable.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Comment string `json:"comment"`
		Vectors []struct {
			Name               string          `json:"name"`
			Capability         json.RawMessage `json:"capability"`
			IsUserInvokable    bool            `json:"isUserInvokable"`
			IsRenderCapability bool            `json:"isRenderCapability"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("user_invokable.json: %v", err)
	}
	if len(file.Vectors) < 40 {
		t.Fatalf("only %d vectors: the file was truncated", len(file.Vectors))
	}
	seen := map[string]bool{}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			if seen[v.Name] {
				t.Fatalf("duplicate vector name %q", v.Name)
			}
			seen[v.Name] = true
			var c protocol.Capability
			if err := json.Unmarshal(v.Capability, &c); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("not a valid capability: %v", err)
			}
			if got := protocol.IsUserInvokable(&c); got != v.IsUserInvokable {
				t.Errorf("IsUserInvokable = %v, want %v", got, v.IsUserInvokable)
			}
			if got := protocol.IsRenderCapability(&c); got != v.IsRenderCapability {
				t.Errorf("IsRenderCapability = %v, want %v", got, v.IsRenderCapability)
			}
		})
	}
}
