package kernel_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/tool"
)

func ptr[T any](v T) *T { return &v }

// TestPolicyShapesCapabilities: rules by glob and by name set the fields of
// the capabilities a session sees; a later rule overrides an earlier one;
// tools no rule matches are unchanged.
func TestPolicyShapesCapabilities(t *testing.T) {
	s := session.New("s", nil)
	e := newEnv(t, &kernel.Options{Session: s, Policies: []kernel.PolicyRule{
		{Pattern: "fs.*", Policy: kernel.Policy{RequiresApproval: ptr(true), DisplayName: "Files", CallTimeout: 5 * time.Second}},
		{Pattern: "fs.read", Policy: kernel.Policy{DisplayName: "Read a file", Audience: []protocol.Audience{protocol.AudienceUser},
			PromptFragment: "Read files only when the user names them."}},
	}})
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool}, kernel.Attachment{Tool: behaveTool}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	c, _ := s.Lookup("fs.read")
	if !c.RequiresApproval || c.DisplayName != "Read a file" || !reflect.DeepEqual(c.Audience, []protocol.Audience{protocol.AudienceUser}) ||
		c.CallTimeoutMs == nil || *c.CallTimeoutMs != 5000 || c.PromptFragment != "Read files only when the user names them." {
		t.Errorf("fs.read = %+v", c)
	}
	b, _ := s.Lookup("behave")
	if b.RequiresApproval || b.DisplayName != "" || b.Audience != nil || b.CallTimeoutMs != nil || b.PromptFragment != "" {
		t.Errorf("behave (no rule) = %+v", b)
	}
	caps := e.Capabilities()
	if len(caps) != 2 || caps[0].Name != "behave" || caps[1].Name != "fs.read" || !caps[1].RequiresApproval {
		t.Errorf("Capabilities() = %+v", caps)
	}
	// An audience of user only: the LLM cannot call it at all.
	if out := s.Invoke(context.Background(), protocol.AudienceLLM, "fs.read", json.RawMessage(`{"path":"hello.txt"}`)); out.IsOK() {
		t.Errorf("llm invoked a user-only tool: %s", out.Value)
	}
}

// TestPolicyApproval: a kernel tool behind requiresApproval does not run
// until a decision arrives; rejected, it never runs; approved, it runs once.
func TestPolicyApproval(t *testing.T) {
	var runs atomic.Int32
	counted := tool.New(tool.Spec{Name: "fs.delete", Description: "Pretend to delete."},
		func(ctx *tool.Context[tool.None, tool.None], in struct {
			Path string `json:"path"`
		}) (map[string]bool, error) {
			runs.Add(1)
			return map[string]bool{"deleted": true}, nil
		})
	s := session.New("s", nil)
	e := newEnv(t, &kernel.Options{Session: s, Policies: []kernel.PolicyRule{{Pattern: "fs.*", Policy: kernel.Policy{RequiresApproval: ptr(true)}}}})
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: counted}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	ctx := testutil.Context(t)
	for _, tt := range []struct {
		decision protocol.Decision
		wantRuns int32
		wantCode protocol.Code
	}{
		{protocol.DecisionRejected, 0, protocol.CodeRejected},
		{protocol.DecisionApproved, 1, ""},
	} {
		t.Run(string(tt.decision), func(t *testing.T) {
			sub := s.Subscribe(s.LastSeq())
			defer sub.Close()
			outc := make(chan protocol.Outcome, 1)
			go func() {
				outc <- s.Invoke(ctx, protocol.AudienceLLM, "fs.delete", json.RawMessage(`{"path":"build"}`))
			}()
			var req *protocol.ApprovalRequested
			for req == nil {
				ev, err := sub.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				req, _ = ev.Msg.(*protocol.ApprovalRequested)
			}
			if n := runs.Load(); n != 0 {
				t.Fatalf("the tool ran %d times before any decision", n)
			}
			must(t, s.Approve(session.Client, &protocol.CapabilityApprove{CallID: req.CallID, Decision: tt.decision,
				Feedback: "checked", DecidedBy: "ada", InputDigest: req.InputDigest}))
			out := testutil.Recv(t, outc, "outcome")
			if tt.wantCode == "" && !out.IsOK() || tt.wantCode != "" && (out.IsOK() || out.Err.Code != tt.wantCode) {
				t.Fatalf("outcome = %+v %s, want code %q", out.Err, out.Value, tt.wantCode)
			}
			if n := runs.Load(); n != tt.wantRuns {
				t.Errorf("the tool ran %d times, want %d", n, tt.wantRuns)
			}
			runs.Store(0)
		})
	}
}

// TestPolicyCallTimeout: a policy timeout bounds the tool's calls, through
// the session and through the direct path.
func TestPolicyCallTimeout(t *testing.T) {
	s := session.New("s", nil)
	e := newEnv(t, &kernel.Options{Session: s, Policies: []kernel.PolicyRule{{Pattern: "behave", Policy: kernel.Policy{CallTimeout: 30 * time.Millisecond}}}})
	if rec := e.Attach(context.Background(), kernel.Attachment{Tool: behaveTool}); !rec.OK() {
		t.Fatal(rec.Failures)
	}
	ctx := testutil.Context(t) // far longer than the policy's timeout
	if out := s.Invoke(ctx, protocol.AudienceLLM, "behave", json.RawMessage(`{"do":"block"}`)); out.IsOK() || out.Err.Code != protocol.CodeTimeout {
		t.Errorf("session: outcome = %+v", out.Err)
	}
	if out := e.Invoke(ctx, "behave", kernel.Call{Input: json.RawMessage(`{"do":"block"}`)}); out.IsOK() || out.Err.Code != protocol.CodeTimeout {
		t.Errorf("direct: outcome = %+v", out.Err)
	}
}

// TestPolicyInvalid: a bad rule fails every attach with invalid_request,
// naming the rule and the field; nothing is attached.
func TestPolicyInvalid(t *testing.T) {
	tests := []struct {
		name string
		rule kernel.PolicyRule
		want string
	}{
		{"empty pattern", kernel.PolicyRule{}, "policy[0]: pattern: must not be empty"},
		{"bad glob", kernel.PolicyRule{Pattern: "fs.[", Policy: kernel.Policy{DisplayName: "x"}}, `policy[0]: pattern "fs.[": syntax error in pattern`},
		{"space", kernel.PolicyRule{Pattern: "fs read"}, "must not contain spaces"},
		{"audience", kernel.PolicyRule{Pattern: "*", Policy: kernel.Policy{Audience: []protocol.Audience{"robot"}}}, `audience[0]: unknown audience "robot"`},
		{"audience twice", kernel.PolicyRule{Pattern: "*", Policy: kernel.Policy{Audience: []protocol.Audience{"llm", "llm"}}}, `audience[1]: "llm" is listed twice`},
		{"audience empty", kernel.PolicyRule{Pattern: "*", Policy: kernel.Policy{Audience: []protocol.Audience{}}}, "audience: must not be empty"},
		{"negative timeout", kernel.PolicyRule{Pattern: "*", Policy: kernel.Policy{CallTimeout: -time.Second}}, "callTimeout: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := session.New("s", nil)
			e := newEnv(t, &kernel.Options{Session: s, Policies: []kernel.PolicyRule{tt.rule}})
			rec := e.Attach(context.Background(), kernel.Attachment{Tool: readTool})
			if rec.OK() || rec.Failures[0].Code != protocol.CodeInvalidRequest || !strings.Contains(rec.Failures[0].Reason, tt.want) {
				t.Fatalf("failures = %+v, want invalid_request with %q", rec.Failures, tt.want)
			}
			if _, ok := s.Lookup("fs.read"); ok || len(e.Tools()) != 0 {
				t.Error("a tool was attached despite the bad policy")
			}
		})
	}
}
