package protocol_test

import (
	"encoding/json"
	"fmt"

	"github.com/brainrt/brain/protocol"
)

func ExampleDecodeFrame() {
	f, err := protocol.DecodeFrame([]byte(`{"v":2,"id":"c1","msg":{"type":"capability_approve","callId":"call-7","decision":"approved","decidedBy":"ada"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	a := f.Msg.(*protocol.CapabilityApprove)
	fmt.Println(f.ID, a.CallID, a.Decision, a.DecidedBy)

	_, err = protocol.DecodeFrame([]byte(`{"v":2,"msg":{"type":"capability_register","capabilities":[{"name":"x","description":"d","inputSchema":{},"side":"app","origin":{"kind":"app"}}]}}`))
	fmt.Println(err)
	// Output:
	// c1 call-7 approved ada
	// decode frame: msg: capability_register: origin.appId: required for kind "app"
}

func ExampleIsUserInvokable() {
	c := protocol.Capability{Name: "gh.create_issue", Origin: protocol.Origin{Kind: protocol.OriginMCP, ID: "github"}, Kind: protocol.KindEffect}
	fmt.Println(protocol.IsUserInvokable(&c))
	c.Audience = []protocol.Audience{protocol.AudienceLLM}
	fmt.Println(protocol.IsUserInvokable(&c))
	// Output:
	// true
	// false
}

func ExampleEncodeFrame() {
	b, _ := protocol.EncodeFrame(&protocol.Frame{Seq: 4, Msg: &protocol.CapabilityOutcome{
		CallID: "call-1", Name: "fs.read", Outcome: protocol.Fail(protocol.CodePathEscape, "%q is outside the workspace", "../x"),
	}})
	fmt.Println(string(b))
	// Output:
	// {"v":2,"seq":4,"msg":{"type":"capability_outcome","callId":"call-1","name":"fs.read","outcome":{"ok":false,"error":{"code":"path_escape","message":"\"../x\" is outside the workspace"}}}}
}

func ExampleAppendFrame() {
	buf := make([]byte, 0, 512) // reused for every frame of a connection
	for seq, input := range []string{`{"n":1}`, `{"n":2}`} {
		var err error
		buf, err = protocol.AppendFrame(buf[:0], &protocol.Frame{Seq: uint64(seq + 1), Msg: &protocol.CapabilityInvoked{
			CallID: "call-1", Name: "ui.echo", Input: json.RawMessage(input), InvokedBy: protocol.InvokedByAgent,
		}})
		if err != nil {
			panic(err)
		}
		fmt.Println(string(buf))
	}
	// Output:
	// {"v":2,"seq":1,"msg":{"type":"capability_invoked","callId":"call-1","name":"ui.echo","input":{"n":1},"invokedBy":"agent"}}
	// {"v":2,"seq":2,"msg":{"type":"capability_invoked","callId":"call-1","name":"ui.echo","input":{"n":2},"invokedBy":"agent"}}
}

func ExampleCallIDOf() {
	fmt.Println(protocol.CallIDOf(&protocol.CapabilityOutcome{CallID: "call-1", Name: "fs.read", Outcome: protocol.OK(nil)}))
	fmt.Printf("%q\n", protocol.CallIDOf(&protocol.CapabilityResult{CallID: "call-1"}))
	// Output:
	// call-1
	// ""
}

func ExampleLeadingFrameID() {
	// The first bytes of a frame too large to read whole.
	fmt.Printf("%q\n", protocol.LeadingFrameID([]byte(`{"v":2,"id":"p-9","msg":{"type":"capability_result","callId":"c1","result":"xxxxxxxx`)))
	fmt.Printf("%q\n", protocol.LeadingFrameID([]byte(`{"v":2,"msg":{"type":"capability_result","callId":"c1","result":"xxxxxxxx`)))
	// Output:
	// "p-9"
	// ""
}

func ExampleValidateName() {
	for _, name := range []string{"fs.read", "fs read", "fs.\u200bread", ""} {
		fmt.Printf("%+q: %v\n", name, protocol.ValidateName(name))
	}
	// Output:
	// "fs.read": <nil>
	// "fs read": must not contain spaces or control characters
	// "fs.\u200bread": must not contain U+200B, a space, control or format character
	// "": must not be empty
}
