// Package apicall is the api.get example tool: a tool with bindings. It
// GETs a path of one HTTP API through the net handle, authenticated with a
// bearer token, and returns the JSON answer.
//
// The token and the API's base URL are bindings: values the environment
// supplies when it attaches the tool, which the model never sees and
// cannot choose. The model picks only the path. The token is sent only to
// the base URL's host (a path cannot name another host), and never appears
// in the tool's output or errors: where a server echoes it back, it is
// replaced by [Redacted].
//
// Attach it with both bindings:
//
//	env.Attach(ctx, kernel.Attachment{Tool: apicall.Tool, Bindings: map[string]json.RawMessage{
//		"token":    json.RawMessage(`"s3cr3t"`),
//		"base_url": json.RawMessage(`"https://api.example.com/v1"`),
//	}})
package apicall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/brainrt/brain/examples/tools/internal/jsonbody"
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Redacted replaces the token wherever it would be shown.
const Redacted = "[redacted]"

// Bindings are supplied at attach and never shown to the model.
type Bindings struct {
	Token   string `json:"token" jsonschema:"the bearer token sent in the Authorization header"`
	BaseURL string `json:"base_url" jsonschema:"the API's base URL: http or https, a host and an optional path, such as https://api.example.com/v1"`
}

// Input names the resource.
type Input struct {
	Path string `json:"path" jsonschema:"the path under the API's base URL, starting with /, with an optional query, e.g. /items?limit=10"`
}

// Output is the API's answer.
type Output struct {
	Status int `json:"status" jsonschema:"the HTTP status code; 4xx and 5xx are returned too, with their JSON body (401 or 403: the token was refused)"`
	JSON   any `json:"json" jsonschema:"the response body, parsed as JSON"`
}

// Handles: the net handle, and nothing else.
type Handles struct {
	Net handle.Net
}

// Tool GETs a path of the bound API with the bound token.
var Tool = tool.New(tool.Spec{Name: "api.get",
	Description: "GET a path of the configured HTTP API (authenticated for you) and return the HTTP status and the JSON body."},
	get).WithInit(checkBindings)

// checkBindings fails the attach when a binding is unusable, so that no
// call finds out later. Its messages never quote the token.
func checkBindings(_ context.Context, _ Handles, b Bindings) error {
	if b.Token == "" {
		return tool.Errorf("invalid_binding", "the token binding is empty")
	}
	if strings.ContainsAny(b.Token, "\r\n\x00") {
		return tool.Errorf("invalid_binding", "the token binding contains a line break or NUL")
	}
	if _, err := baseURL(b.BaseURL); err != nil {
		return err
	}
	return nil
}

// baseURL parses and checks the base_url binding.
func baseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, tool.Errorf("invalid_binding", "base_url %q does not parse: %v", s, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, tool.Errorf("invalid_binding", "base_url %q: want an http or https URL", s)
	case u.Host == "":
		return nil, tool.Errorf("invalid_binding", "base_url %q has no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, tool.Errorf("invalid_binding", "base_url %q: give a scheme, host and path only (no user, query or fragment)", s)
	}
	return u, nil
}

// get runs one call. Every error leaves through the redactor, whatever
// made it.
func get(ctx *tool.Context[Handles, Bindings], in Input) (Output, error) {
	r := redactor(ctx.Bindings.Token)
	out, err := fetch(ctx, r, in)
	if err != nil {
		return Output{}, r.err(err)
	}
	return out, nil
}

func fetch(ctx *tool.Context[Handles, Bindings], r redactor, in Input) (Output, error) {
	u, err := target(ctx.Bindings.BaseURL, in.Path)
	if err != nil {
		return Output{}, err
	}
	resp, err := ctx.Handles.Net.Fetch(ctx, handle.Request{URL: u, Header: map[string][]string{
		"Authorization": {"Bearer " + ctx.Bindings.Token},
		"Accept":        {"application/json"},
	}})
	if err != nil {
		return Output{}, err
	}
	body := r.bytes(resp.Body)
	ct := jsonbody.Header(resp.Header, "Content-Type")
	if mt := jsonbody.MediaType(ct); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return Output{}, tool.Errorf("not_json", "GET %s answered HTTP %d with Content-Type %q, not JSON; the body starts: %s",
			in.Path, resp.Status, ct, jsonbody.Preview(body))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return Output{}, tool.Errorf("not_json", "GET %s answered HTTP %d with a JSON Content-Type, but the body is not one JSON value; it starts: %s",
			in.Path, resp.Status, jsonbody.Preview(body))
	}
	return Output{Status: resp.Status, JSON: r.value(v)}, nil
}

// target joins the base URL and a path, refusing a path that would leave
// the base URL: another host ("//evil.example", "@evil.example"), a scheme,
// or a ".." segment.
func target(base, p string) (string, error) {
	b, err := baseURL(base)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return "", tool.Errorf("invalid_path", "path %q must start with a single /, such as /items", p)
	}
	ref, err := url.Parse(p)
	if err != nil {
		return "", tool.Errorf("invalid_path", "path %q does not parse: %v", p, errors.Unwrap(err))
	}
	if ref.Scheme != "" || ref.Host != "" || ref.User != nil || ref.Fragment != "" {
		return "", tool.Errorf("invalid_path", "path %q must be a path with an optional query, nothing else", p)
	}
	for _, seg := range strings.Split(ref.Path, "/") {
		if seg == "." || seg == ".." {
			return "", tool.Errorf("invalid_path", "path %q has a %q segment; name the resource directly", p, seg)
		}
	}
	u := *b
	u.Path = strings.TrimSuffix(b.Path, "/") + ref.Path
	u.RawPath = ""
	u.RawQuery = ref.RawQuery
	return u.String(), nil
}

// redactor removes the token from text that leaves the tool.
type redactor string

func (r redactor) string(s string) string {
	if r == "" {
		return s
	}
	return strings.ReplaceAll(s, string(r), Redacted)
}

func (r redactor) bytes(b []byte) []byte {
	if r == "" {
		return b
	}
	return bytes.ReplaceAll(b, []byte(r), []byte(Redacted))
}

// value removes the token from every string and key of a decoded JSON
// value: a server may echo it in an escaped form ("\u0041…") that the
// raw body does not show.
func (r redactor) value(v any) any {
	switch v := v.(type) {
	case string:
		return r.string(v)
	case []any:
		for i := range v {
			v[i] = r.value(v[i])
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.string(k)] = r.value(x)
		}
		return out
	}
	return v
}

// err returns err with the token removed from its message: a handle error
// stays a handle error, a coded error keeps its code, and the cause is
// dropped.
func (r redactor) err(err error) error {
	var ce *handle.CapabilityError
	if errors.As(err, &ce) {
		return &handle.CapabilityError{Handle: ce.Handle, Op: ce.Op, Code: ce.Code, Message: r.string(ce.Message)}
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return protocol.Errorf(pe.Code, "%s", r.string(pe.Message))
	}
	return errors.New(r.string(err.Error()))
}
