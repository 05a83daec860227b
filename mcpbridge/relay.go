package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RelayOptions configure [Relay]. A nil *RelayOptions means the defaults.
type RelayOptions struct {
	// Token is sent as "Authorization: Bearer <token>" on every request: a
	// model token of the kernel (docs/serve.md, "Tokens").
	Token string
	// HTTPClient sends the requests; default a client without a timeout
	// (streams last as long as their calls).
	HTTPClient *http.Client
	// Logger receives the relay's logs; nil discards them.
	Logger *slog.Logger
}

// Relay bridges an MCP host that speaks stdio — newline-delimited JSON-RPC
// on in and out — to a Streamable HTTP endpoint (a session's
// /v1/sessions/{id}/mcp), message for message: every message the host
// writes is POSTed, every message the endpoint sends (responses, requests
// such as elicitation, notifications such as progress and list_changed)
// is written to out. So a host that only launches processes (Claude
// Desktop) reaches a session, with what the session offers over HTTP:
// client capabilities, approvals (and elicitation), progress, renders as
// MCP Apps. After the handshake it holds the endpoint's GET stream open
// for server-initiated messages, reconnecting it when it breaks (a
// handover, a restart: the MCP session id stays valid on every node).
//
// It returns nil when in ends (after every request read has been answered,
// or ctx is done), ctx.Err() when ctx ends first, and an error when the
// endpoint refuses the MCP session (401, 403, 404).
func Relay(ctx context.Context, endpoint string, in io.Reader, out io.Writer, opts *RelayOptions) error {
	var o RelayOptions
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &relay{ctx: ctx, fail: cancel, endpoint: endpoint, o: o, out: out}
	defer r.close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			select {
			case lines <- bytes.Clone(line):
			case <-ctx.Done():
				readErr <- nil
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case line := <-lines:
			r.send(line)
		case err := <-readErr:
			r.posts.Wait() // every request read is answered first
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return err
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return ctx.Err()
		}
	}
}

type relay struct {
	ctx      context.Context
	fail     context.CancelCauseFunc
	endpoint string
	o        RelayOptions

	outMu sync.Mutex
	out   io.Writer

	mu        sync.Mutex
	sessionID string
	version   string
	listening bool

	posts sync.WaitGroup
}

// send POSTs one message from the host.
func (r *relay) send(msg []byte) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	_ = json.Unmarshal(msg, &head)
	if head.Method == "initialize" {
		r.mu.Lock()
		r.version = head.Params.ProtocolVersion
		r.mu.Unlock()
	}
	r.posts.Add(1)
	do := func() {
		defer r.posts.Done()
		err := r.post(msg)
		if err != nil && len(head.ID) > 0 && head.Method != "" && r.ctx.Err() == nil {
			// A request that got no answer gets an error, so the host does
			// not wait for one forever.
			r.write(mustMarshal(map[string]any{"jsonrpc": "2.0", "id": head.ID,
				"error": map[string]any{"code": -32603, "message": "brain mcp: " + err.Error()}}))
		}
		if head.Method == "notifications/initialized" {
			r.listen()
		}
	}
	// The handshake and notifications go out in order, before what follows
	// them (a server refuses tools/list before initialized; a cancellation
	// must not overtake its call); requests and responses go out at once,
	// each on its own goroutine, since a call may wait a long time for its
	// approval while the host answers the elicitation about it.
	if head.Method == "initialize" || (head.Method != "" && len(head.ID) == 0) {
		do()
		return
	}
	go do()
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (r *relay) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.endpoint, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.Token)
	}
	r.mu.Lock()
	if r.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", r.sessionID)
	}
	if r.version != "" && r.sessionID != "" {
		req.Header.Set("Mcp-Protocol-Version", r.version)
	}
	r.mu.Unlock()
	return req, nil
}

// post sends msg and relays what comes back.
func (r *relay) post(msg []byte) error {
	req, err := r.request(r.ctx, http.MethodPost, msg)
	if err != nil {
		return err
	}
	resp, err := r.o.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		r.mu.Lock()
		r.sessionID = id
		r.mu.Unlock()
	}
	if v := resp.Header.Get("Mcp-Protocol-Version"); v != "" {
		r.mu.Lock()
		r.version = v
		r.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("%s refused the MCP session: %s: %s", r.endpoint, resp.Status, strings.TrimSpace(string(body)))
		r.fail(err)
		return err
	case resp.StatusCode/100 != 2:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if isJSONRPC(body) { // an error response of the protocol: the host reads it
			r.write(body)
			return nil
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return r.relayBody(resp)
}

func isJSONRPC(b []byte) bool {
	var m struct {
		JSONRPC string `json:"jsonrpc"`
	}
	return json.Unmarshal(b, &m) == nil && m.JSONRPC == "2.0"
}

// relayBody writes out the messages of a response: one JSON body, or the
// data of each server-sent event.
func (r *relay) relayBody(resp *http.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(body)) > 0 {
			r.write(body)
		}
		return nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				r.write(data)
				data = nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
	if len(data) > 0 {
		r.write(data)
	}
	return sc.Err()
}

// write writes one message to the host, on its own line.
func (r *relay) write(msg []byte) {
	var compact bytes.Buffer
	if json.Compact(&compact, msg) != nil {
		return
	}
	compact.WriteByte('\n')
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, _ = r.out.Write(compact.Bytes())
}

// listen holds the endpoint's GET stream open for server-initiated
// messages, once; it reconnects with a backoff (0.5 s to 10 s) when the
// stream breaks, and stops when the endpoint has none (405) or refuses the
// session.
func (r *relay) listen() {
	r.mu.Lock()
	if r.listening || r.sessionID == "" {
		r.mu.Unlock()
		return
	}
	r.listening = true
	r.mu.Unlock()
	go func() {
		delay := 500 * time.Millisecond
		for r.ctx.Err() == nil {
			started := time.Now()
			status, err := r.get()
			switch {
			case status == http.StatusMethodNotAllowed:
				return
			case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound:
				r.fail(fmt.Errorf("%s refused the MCP session's stream: %d %s", r.endpoint, status, http.StatusText(status)))
				return
			}
			if err != nil && r.ctx.Err() == nil {
				r.o.Logger.Info("MCP stream broke; reconnecting", slog.String("error", err.Error()))
			}
			if time.Since(started) > 10*time.Second {
				delay = 500 * time.Millisecond // it had been up: start the backoff again
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.ctx.Done():
				t.Stop()
				return
			}
			delay = min(2*delay, 10*time.Second)
		}
	}()
}

func (r *relay) get() (int, error) {
	req, err := r.request(r.ctx, http.MethodGet, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := r.o.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET: %s", resp.Status)
	}
	return resp.StatusCode, r.relayBody(resp)
}

// close ends the MCP session (DELETE), best effort.
func (r *relay) close() {
	r.mu.Lock()
	id := r.sessionID
	r.mu.Unlock()
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 2*time.Second)
	defer cancel()
	req, err := r.request(ctx, http.MethodDelete, nil)
	if err != nil {
		return
	}
	if resp, err := r.o.HTTPClient.Do(req); err == nil {
		resp.Body.Close()
	}
}
