package jshost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

	// Bytes cross outside the JSON (jsvm's DefineBytes; docs/RATIONALE.md,
	// "Why a TypeScript tool's bytes cross outside JSON"): staged holds
	// those the prelude handed over for the operation running (an fs
	// write's data, exec's stdin, a request's body), and give hands bytes
	// the other way, returning the index the prelude takes them by.
	staged    []byte
	hasStaged bool
	give      func([]byte) int
}

// stagedBytes returns the bytes the prelude handed over for this
// operation; an operation whose argument says staged without any is the
// prelude's mistake, said as such.
func (cs *callState) stagedBytes() ([]byte, error) {
	if !cs.hasStaged {
		return nil, protocol.Errorf(protocol.CodeInternal, "the operation's bytes were not handed over")
	}
	return cs.staged, nil
}

// handOver gives b to the prelude, which takes what it is given in order
// (the index says where b is in that order).
func (cs *callState) handOver(b []byte) int {
	if cs.give == nil { // a callState made without a realm (a test's)
		return -1
	}
	return cs.give(b)
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

// execResult is handle.Result with its output handed over (handOver):
// the prelude takes stdout and stderr by these indexes.
type execResult struct {
	ExitCode  int           `json:"exitCode"`
	Stdout    int           `json:"stdout"`
	Stderr    int           `json:"stderr"`
	Truncated bool          `json:"truncated,omitempty"`
	Duration  time.Duration `json:"duration"`
}

// netResponse is handle.Response with its body handed over.
type netResponse struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   int                 `json:"body"`
	URL    string              `json:"url"`
}

// do dispatches one operation to the call's handles.
func (cs *callState) do(op string, arg []byte) (any, error) {
	ctx, hs := cs.ctx, &cs.handles
	var a struct {
		Path, From, To, Target, Link, Pattern string
		Staged                                bool // the operation's bytes were handed over (stagedBytes)
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
		var c struct {
			handle.Command
			Staged bool `json:"staged"` // stdin was handed over
		}
		if err := decode(arg, &c); err != nil {
			return nil, err
		}
		if c.Staged {
			var err error
			if c.Stdin, err = cs.stagedBytes(); err != nil {
				return nil, err
			}
		}
		r, err := hs.Exec.Run(ctx, c.Command)
		if err != nil {
			return nil, err
		}
		return execResult{ExitCode: r.ExitCode, Stdout: cs.handOver(r.Stdout), Stderr: cs.handOver(r.Stderr), Truncated: r.Truncated, Duration: r.Duration}, nil
	case "net.fetch":
		if hs.Net == nil {
			return nil, missing(handle.KindNet)
		}
		var r struct {
			handle.Request
			Staged bool `json:"staged"` // the body was handed over
		}
		if err := decode(arg, &r); err != nil {
			return nil, err
		}
		if r.Staged {
			var err error
			if r.Body, err = cs.stagedBytes(); err != nil {
				return nil, err
			}
		}
		resp, err := hs.Net.Fetch(ctx, r.Request)
		if err != nil {
			return nil, err
		}
		return netResponse{Status: resp.Status, Header: resp.Header, Body: cs.handOver(resp.Body), URL: resp.URL}, nil
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
		b, err := hs.FS.ReadFile(ctx, a.Path)
		if err != nil {
			return nil, err
		}
		return cs.handOver(b), nil
	case "fs.writeFile":
		data, err := cs.stagedBytes()
		if err != nil {
			return nil, err
		}
		return nil, hs.FS.WriteFile(ctx, a.Path, data)
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
		b, err := hs.Page.Screenshot(ctx)
		if err != nil {
			return nil, err
		}
		return cs.handOver(b), nil
	}
	return nil, protocol.Errorf(protocol.CodeInvalidArgument, "no handle operation %q", op)
}
