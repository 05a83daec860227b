package kernel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/tool"
)

// ExamplePolicyRule puts every fs.* tool behind approval and gives one a
// display name and a shorter timeout: fields a manifest does not decide.
func ExamplePolicyRule() {
	approve := true
	s := session.New("s", nil)
	env := kernel.New(&kernel.Options{Session: s, Policies: []kernel.PolicyRule{
		{Pattern: "fs.*", Policy: kernel.Policy{RequiresApproval: &approve}},
		{Pattern: "fs.delete", Policy: kernel.Policy{DisplayName: "Delete a file", CallTimeout: 5 * time.Second}},
	}})
	env.Setup(context.Background())
	del := tool.New(tool.Spec{Name: "fs.delete", Description: "Delete a file."},
		func(ctx *tool.Context[tool.None, tool.None], in struct {
			Path string `json:"path"`
		}) (bool, error) {
			return true, nil
		})
	env.Attach(context.Background(), kernel.Attachment{Tool: del})
	c, _ := s.Lookup("fs.delete")
	fmt.Println(c.Side, c.Origin.Kind, c.RequiresApproval, c.DisplayName, *c.CallTimeoutMs)
	fmt.Println(c.Audience == nil) // unset: the default audience, llm and user
	// Output:
	// agent agent true Delete a file 5000
	// true
}
