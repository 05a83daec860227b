package driver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A transcript (testdata/*.txt) is the model's side of a conversation, in
// the provider's real wire format: one section per HTTP response, in order.
//
//	-- response --
//	status: 429            optional header lines, then a blank line
//	retry-after: 1
//
//	{"error": …}           the body: SSE for a 200, JSON otherwise
//
// A body line "!hang" makes the stub flush what it wrote and then wait
// until the client goes away (a model cut off mid-stream).
type response struct {
	status  int
	headers http.Header
	body    string
	hang    bool
}

func loadTranscript(t testing.TB, name string) []response {
	t.Helper()
	path := "testdata/" + name
	if filepath.IsAbs(name) { // a transcript a test wrote
		path = name
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []response
	var cur *response
	var inBody bool
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.body = body.String()
			out = append(out, *cur)
		}
		body.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --"):
			flush()
			cur, inBody = &response{status: 200, headers: http.Header{}}, false
		case cur == nil: // comments before the first section
		case !inBody && line == "":
			inBody = true
		case !inBody:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("%s: bad header line %q", name, line)
			}
			if strings.EqualFold(k, "status") {
				cur.status, _ = strconv.Atoi(strings.TrimSpace(v))
			} else {
				cur.headers.Set(k, strings.TrimSpace(v))
			}
		case line == "!hang":
			cur.hang = true
		default:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	flush()
	if len(out) == 0 {
		t.Fatalf("%s: no responses", name)
	}
	return out
}

// stub is a loopback model server playing a transcript. It records every
// request body and the Authorization/x-api-key header it was sent.
type stub struct {
	t         testing.TB
	srv       *httptest.Server
	mu        sync.Mutex
	responses []response
	requests  []map[string]any
	keys      []string
	streaming chan struct{} // receives when a hanging response has flushed
}

func newStub(t testing.TB, transcript string) *stub {
	st := &stub{t: t, responses: loadTranscript(t, transcript), streaming: make(chan struct{}, 4)}
	st.srv = httptest.NewServer(http.HandlerFunc(st.serve))
	t.Cleanup(st.srv.Close)
	return st
}

func (st *stub) url() string { return st.srv.URL }

func (st *stub) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	st.mu.Lock()
	n := len(st.requests)
	st.requests = append(st.requests, req)
	key := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
	st.keys = append(st.keys, key)
	if n >= len(st.responses) {
		st.mu.Unlock()
		http.Error(w, `{"error":{"message":"the transcript has no more responses"}}`, http.StatusTeapot)
		return
	}
	resp := st.responses[n]
	st.mu.Unlock()
	for k, v := range resp.headers {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		if resp.status == 200 {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
	}
	w.WriteHeader(resp.status)
	// {{key}} in a body echoes the key the client sent: a server that
	// quotes its request back must not make the key appear in an error.
	_, _ = io.WriteString(w, strings.ReplaceAll(resp.body, "{{key}}", key))
	if resp.hang {
		w.(http.Flusher).Flush()
		st.streaming <- struct{}{}
		<-r.Context().Done()
	}
}

// request returns the i-th request body the stub received.
func (st *stub) request(i int) map[string]any {
	st.mu.Lock()
	defer st.mu.Unlock()
	if i >= len(st.requests) {
		st.t.Fatalf("the stub received %d requests, not %d", len(st.requests), i+1)
	}
	return st.requests[i]
}

func (st *stub) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.requests)
}

// requestJSON returns the i-th request as JSON text.
func (st *stub) requestJSON(i int) string {
	b, _ := json.Marshal(st.request(i))
	return string(b)
}
