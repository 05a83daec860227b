package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
// A line from the host that is not a JSON-RPC message MCP allows is
// answered here with a JSON-RPC error and not sent, as
// [ServeEnvironmentStdio] does: -32700 for a line that is not JSON, -32600
// for a batch, a wrong "jsonrpc", an id that is neither a string nor an
// integer within ±(2^53-1), a line over 16 MiB. A request the endpoint
// does not answer is answered with a JSON-RPC error (-32603) that says
// why: the endpoint cannot be reached, or it refuses the MCP session (401,
// 403, 404: a token that is not a model token of the kernel, a session
// that does not exist). Either way Relay goes on with the next message.
//
// It returns nil when in ends (after every request read has been answered,
// or ctx is done), or the refusal when the endpoint's last answer was one
// (it is logged when it happens, too); ctx.Err() when ctx ends first.
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &relay{ctx: ctx, endpoint: endpoint, o: o, out: out}
	defer r.close()
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		lr := newLineReader(in, maxLineLength)
		for {
			msg, reply, err := lr.nextMessage()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				readErr <- err
				return
			}
			if reply != nil {
				r.write(reply)
				continue
			}
			select {
			case lines <- bytes.Clone(msg):
			case <-ctx.Done():
				readErr <- nil
				return
			}
		}
	}()
	for {
		select {
		case line := <-lines:
			r.send(line)
		case err := <-readErr:
			r.posts.Wait() // every request read is answered first
			if err == nil {
				err = r.refusal()
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type relay struct {
	ctx      context.Context
	endpoint string
	o        RelayOptions

	outMu sync.Mutex
	out   io.Writer

	mu        sync.Mutex
	sessionID string
	version   string
	listening bool
	refused   error // the endpoint's last answer, when it refused the session

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
		if r.ctx.Err() == nil {
			// Logged, and the exit status, as a refusal: an operator whose
			// host shows nothing saw no line on stderr either.
			err = fmt.Errorf("cannot reach the kernel: %w", err)
			r.refuse(err)
		}
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
	if resp.StatusCode/100 == 2 {
		r.refuse(nil)
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return nil
	case refuses(resp.StatusCode):
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("%s refused the MCP session: %s: %s", r.endpoint, resp.Status, strings.TrimSpace(string(body)))
		r.refuse(err)
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

// refuses reports whether an HTTP status refuses the MCP session: the
// token (401, 403) or the session (404).
func refuses(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound
}

// refuse records the endpoint's last answer to the session: err, a
// refusal, or nil, an acceptance. A refusal is logged once until the
// session is accepted again.
func (r *relay) refuse(err error) {
	r.mu.Lock()
	was := r.refused
	r.refused = err
	r.mu.Unlock()
	if err != nil && was == nil {
		r.o.Logger.Warn("the kernel does not serve the MCP session; each request is answered with the error", slog.String("error", err.Error()))
	}
}

func (r *relay) refusal() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
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
// session (which the next request hears too, and its answer says).
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
			case refuses(status):
				r.refuse(fmt.Errorf("%s refused the MCP session's stream: %d %s", r.endpoint, status, http.StatusText(status)))
				r.mu.Lock()
				r.listening = false // a later notifications/initialized tries again
				r.mu.Unlock()
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
