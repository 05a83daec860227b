package jshost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// callState is what the host function of a realm serves while one call
// (or the init) runs: its context, exactly its declared handles and its
// progress reporter.
type callState struct {
	ctx      context.Context
	handles  tool.Handles
	progress func(tool.Progress)
	walks    []*walker // fs.walk's in progress, by id-1 (walk.go); nil once ended
}

// reply is what the host function answers: a value or a handle's error.
type reply struct {
	OK    bool        `json:"ok"`
	Value any         `json:"value,omitempty"`
	Error *replyError `json:"error,omitempty"`
}

type replyError struct {
	Handle  string        `json:"handle"`
	Op      string        `json:"op"`
	Code    protocol.Code `json:"code"`
	Message string        `json:"message"`
}

// serve runs one handle operation for the payload: op names it
// ("fs.readFile"), arg is its JSON argument. It never fails the engine:
// every failure is a reply the prelude throws as a CapabilityError.
func (cs *callState) serve(op, arg string) string {
	v, err := cs.do(op, []byte(arg))
	var r reply
	if err != nil {
		var ce *handle.CapabilityError
		if errors.As(err, &ce) {
			r.Error = &replyError{Handle: string(ce.Handle), Op: ce.Op, Code: ce.Code, Message: ce.Message}
		} else {
			out := protocol.OutcomeOf(err)
			r.Error = &replyError{Code: out.Err.Code, Message: out.Err.Message}
		}
	} else {
		r.OK, r.Value = true, v
	}
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(reply{Error: &replyError{Code: protocol.CodeInternal, Message: "the reply does not encode: " + err.Error()}})
	}
	return string(b)
}

func missing(k handle.Kind) error {
	return &handle.CapabilityError{Handle: k, Op: "acquire", Code: protocol.CodeForbidden,
		Message: fmt.Sprintf("the tool does not declare the %s handle", k)}
}

func decode(arg []byte, v any) error {
	if err := json.Unmarshal(arg, v); err != nil {
		return protocol.Errorf(protocol.CodeInvalidArgument, "the arguments do not decode: %v", err)
	}
	return nil
}

// do dispatches one operation to the call's handles.
func (cs *callState) do(op string, arg []byte) (any, error) {
	ctx, hs := cs.ctx, &cs.handles
	var a struct {
		Path, From, To, Target, Link, Pattern string
		Data                                  []byte
		Source                                string
		Args                                  json.RawMessage
		URL, Selector, Expression             string
		Done, Total                           float64
		Message                               string
		ID                                    int
		Skip                                  bool
	}
	switch op {
	case "exec.run":
		if hs.Exec == nil {
			return nil, missing(handle.KindExec)
		}
		var c handle.Command
		if err := decode(arg, &c); err != nil {
			return nil, err
		}
		return hs.Exec.Run(ctx, c)
	case "net.fetch":
		if hs.Net == nil {
			return nil, missing(handle.KindNet)
		}
		var r handle.Request
		if err := decode(arg, &r); err != nil {
			return nil, err
		}
		return hs.Net.Fetch(ctx, r)
	case "progress":
		if err := decode(arg, &a); err != nil {
			return nil, err
		}
		if cs.progress != nil {
			cs.progress(tool.Progress{Done: a.Done, Total: a.Total, Message: a.Message})
		}
		return nil, nil
	}
	if err := decode(arg, &a); err != nil {
		return nil, err
	}
	switch op[:min(len(op), 3)] {
	case "fs.":
		if hs.FS == nil {
			return nil, missing(handle.KindFS)
		}
	case "js.":
		if hs.JS == nil {
			return nil, missing(handle.KindJS)
		}
	case "pag":
		if hs.Page == nil {
			return nil, missing(handle.KindPage)
		}
	}
	switch op {
	case "fs.readFile":
		return hs.FS.ReadFile(ctx, a.Path)
	case "fs.writeFile":
		return nil, hs.FS.WriteFile(ctx, a.Path, a.Data)
	case "fs.readDir":
		return hs.FS.ReadDir(ctx, a.Path)
	case "fs.stat":
		return hs.FS.Stat(ctx, a.Path)
	case "fs.mkdirAll":
		return nil, hs.FS.MkdirAll(ctx, a.Path)
	case "fs.remove":
		return nil, hs.FS.Remove(ctx, a.Path)
	case "fs.rename":
		return nil, hs.FS.Rename(ctx, a.From, a.To)
	case "fs.symlink":
		return nil, hs.FS.Symlink(ctx, a.Target, a.Link)
	case "fs.link":
		return nil, hs.FS.Link(ctx, a.Target, a.Link)
	case "fs.glob":
		return hs.FS.Glob(ctx, a.Pattern)
	case "fs.walkStart":
		return cs.walkStart(hs.FS, a.Path), nil
	case "fs.walkNext":
		return cs.walkNext(a.ID, a.Skip)
	case "fs.walkStop":
		cs.walkStop(a.ID)
		return nil, nil
	case "js.call":
		return hs.JS.Call(ctx, a.Source, a.Args)
	case "page.navigate":
		return nil, hs.Page.Navigate(ctx, a.URL)
	case "page.text":
		return hs.Page.Text(ctx, a.Selector)
	case "page.evaluate":
		return hs.Page.Evaluate(ctx, a.Expression)
	case "page.screenshot":
		return hs.Page.Screenshot(ctx)
	}
	return nil, protocol.Errorf(protocol.CodeInvalidArgument, "no handle operation %q", op)
}
