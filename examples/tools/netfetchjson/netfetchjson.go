// Package netfetchjson is the net.fetch_json example tool: GET a URL with
// the net handle and return its body parsed as JSON.
//
// Which hosts may be fetched is decided by the environment's grants; a URL
// they do not allow fails with denied, before any connection is made. A
// response that is not JSON — by its Content-Type or its body — fails with
// not_json, and the message says what came back instead. An HTTP error
// status with a JSON body is not an error: the status is in the output.
package netfetchjson

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/brainrt/brain/examples/tools/internal/jsonbody"
	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/tool"
)

// Input names the URL.
type Input struct {
	URL string `json:"url" jsonschema:"the absolute http or https URL to GET, e.g. https://api.example.com/v1/items"`
}

// Output is the parsed response.
type Output struct {
	Status int    `json:"status" jsonschema:"the HTTP status code; 4xx and 5xx are returned too, with their JSON body"`
	URL    string `json:"url" jsonschema:"the final URL, after redirects"`
	JSON   any    `json:"json" jsonschema:"the response body, parsed as JSON"`
}

// Handles: the net handle, and nothing else.
type Handles struct {
	Net handle.Net
}

// Tool fetches a URL and returns its JSON body.
var Tool = tool.New(tool.Spec{Name: "net.fetch_json",
	Description: "GET a URL and return its JSON body and HTTP status. Fails with not_json when the response is not JSON, and with denied when the environment does not allow the host."},
	func(ctx *tool.Context[Handles, tool.None], in Input) (Output, error) {
		resp, err := ctx.Handles.Net.Fetch(ctx, handle.Request{URL: in.URL,
			Header: map[string][]string{"Accept": {"application/json"}}})
		if err != nil {
			return Output{}, err
		}
		v, err := parseJSON(resp)
		if err != nil {
			return Output{}, err
		}
		return Output{Status: resp.Status, URL: resp.URL, JSON: v}, nil
	})

// parseJSON returns the body of resp parsed as one JSON value, numbers kept
// as written. It fails with code not_json unless the Content-Type is JSON
// (application/json, or a type ending in +json) and the body parses.
func parseJSON(resp handle.Response) (any, error) {
	ct := jsonbody.Header(resp.Header, "Content-Type")
	mt := jsonbody.MediaType(ct)
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return nil, tool.Errorf("not_json", "%s answered HTTP %d with Content-Type %q, not JSON; the body starts: %s",
			resp.URL, resp.Status, ct, jsonbody.Preview(resp.Body))
	}
	dec := json.NewDecoder(bytes.NewReader(resp.Body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, tool.Errorf("not_json", "%s answered HTTP %d with Content-Type %s, but the body is not valid JSON (%v); it starts: %s",
			resp.URL, resp.Status, mt, err, jsonbody.Preview(resp.Body))
	}
	if dec.More() {
		return nil, tool.Errorf("not_json", "%s answered HTTP %d with more than one JSON value in the body; it starts: %s",
			resp.URL, resp.Status, jsonbody.Preview(resp.Body))
	}
	return v, nil
}
