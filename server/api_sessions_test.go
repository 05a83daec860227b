package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

const operatorToken = "operator-token-0123456789"

// opsFixture is a kernel with client, app and operator tokens.
type opsFixture struct {
	t   *testing.T
	srv *httptest.Server
	mgr *server.Manager
	api *server.Server
	tok *server.Tokens
}

func newOpsFixture(t *testing.T) *opsFixture {
	t.Helper()
	tokens, err := server.NewTokens(
		server.Token{Token: clientToken, Side: "client", Name: "web", Tenant: "t"},
		server.Token{Token: appToken, Side: "app", App: "cal", Tenant: "t"},
		server.Token{Token: operatorToken, Side: "operator", Name: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	mgr := server.NewManager(server.ManagerOptions{})
	api := server.New(server.Options{Tokens: tokens, Manager: mgr})
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return &opsFixture{t: t, srv: ts, mgr: mgr, api: api, tok: tokens}
}

// do sends one request and returns the status and the body.
func (f *opsFixture) do(method, path, token, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(f.t), method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// approvalCap is an agent capability that needs approval and echoes its
// input.
func approvalCap(t *testing.T, s *session.Session, name string) {
	t.Helper()
	err := s.RegisterAgent(protocol.Capability{Name: name, Description: "needs a yes",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Side:        protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent}, RequiresApproval: true},
		session.HandlerFunc(func(_ context.Context, c *session.Call) (json.RawMessage, error) { return c.Input, nil }))
	if err != nil {
		t.Fatal(err)
	}
}

// waitPending waits until the session has n calls awaiting approval and
// returns them.
func waitPending(t *testing.T, s *session.Session, n int) []protocol.PendingCall {
	t.Helper()
	sub := s.Subscribe(0)
	defer sub.Close()
	ctx := testutil.Context(t)
	for {
		var out []protocol.PendingCall
		for _, c := range s.Snapshot().PendingCalls {
			if c.State == protocol.CallAwaitingApproval {
				out = append(out, c)
			}
		}
		if len(out) >= n {
			return out
		}
		if _, err := sub.Next(ctx); err != nil {
			t.Fatalf("waiting for %d pending approvals: %v", n, err)
		}
	}
}

func TestSessionsAPI(t *testing.T) {
	f := newOpsFixture(t)

	t.Run("reading a missing session is not_found and creates nothing", func(t *testing.T) {
		status, body := f.do("GET", "/v1/sessions/ghost", clientToken, "")
		if status != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
			t.Fatalf("GET missing: %d %s", status, body)
		}
		status, _ = f.do("GET", "/v1/sessions/ghost", operatorToken, "")
		if status != http.StatusNotFound {
			t.Fatalf("operator GET missing: %d", status)
		}
		if n := f.mgr.Live(); n != 0 {
			t.Fatalf("a read created %d sessions", n)
		}
	})

	s, release, err := f.mgr.Acquire(testutil.Context(t), "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	approvalCap(t, s, "fs.delete")
	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.delete", json.RawMessage(`{"path":"/tmp/x"}`))
	}()
	waitPending(t, s, 1)

	t.Run("list shows the session's counts", func(t *testing.T) {
		status, body := f.do("GET", "/v1/sessions", operatorToken, "")
		if status != http.StatusOK {
			t.Fatalf("list: %d %s", status, body)
		}
		var out struct{ Sessions []server.SessionInfo }
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Sessions) != 1 || out.Sessions[0].ID != "s1" || out.Sessions[0].PendingApprovals != 1 || !out.Sessions[0].Live || out.Sessions[0].LastSeq == 0 {
			t.Fatalf("list = %+v", out.Sessions)
		}
	})

	t.Run("read shows the snapshot and the row", func(t *testing.T) {
		status, body := f.do("GET", "/v1/sessions/s1", operatorToken, "")
		if status != http.StatusOK || !strings.Contains(body, `"fs.delete"`) || !strings.Contains(body, `"pendingApprovals":1`) {
			t.Fatalf("read: %d %s", status, body)
		}
	})

	t.Run("delete cancels pending calls first", func(t *testing.T) {
		status, body := f.do("DELETE", "/v1/sessions/s1", operatorToken, "")
		if status != http.StatusOK || !strings.Contains(body, `"cancelledCalls":1`) {
			t.Fatalf("delete: %d %s", status, body)
		}
		out := testutil.Recv(t, done, "the cancelled outcome")
		if out.Err == nil || out.Err.Code != protocol.CodeCancelled {
			t.Fatalf("pending call ended %+v, want cancelled", out)
		}
		if status, _ := f.do("GET", "/v1/sessions/s1", operatorToken, ""); status != http.StatusNotFound {
			t.Fatalf("read after delete: %d", status)
		}
		if status, _ := f.do("DELETE", "/v1/sessions/s1", operatorToken, ""); status != http.StatusNotFound {
			t.Fatalf("second delete: %d", status)
		}
	})
}

// TestOperatorAPIsRefuseOtherTokens: client and app tokens cannot use the
// operator's endpoints; no token is 401. (Listing and deleting are also a
// client's, for its own tenant's sessions: TestTenancy.)
func TestOperatorAPIsRefuseOtherTokens(t *testing.T) {
	f := newOpsFixture(t)
	s, release, err := f.mgr.Acquire(testutil.Context(t), "s2")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_ = s
	for _, ep := range []struct{ method, path string }{
		{"GET", "/v1/sessions"},
		{"DELETE", "/v1/sessions/s2"},
	} {
		if status, body := f.do(ep.method, ep.path, appToken, ""); status != http.StatusForbidden || !strings.Contains(body, "client and operator tokens") {
			t.Errorf("%s %s with an app token: %d %s, want 403", ep.method, ep.path, status, body)
		}
	}
	for _, ep := range []struct{ method, path string }{
		{"GET", "/v1/approvals"},
		{"GET", "/v1/approvals/ws"},
		{"GET", "/v1/sessions/s2/calls/c1"},
	} {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			for _, tok := range []string{clientToken, appToken} {
				if status, body := f.do(ep.method, ep.path, tok, ""); status != http.StatusForbidden || !strings.Contains(body, "operator token") {
					t.Errorf("token %s: %d %s, want 403", tok[:6], status, body)
				}
			}
			if status, _ := f.do(ep.method, ep.path, "", ""); status != http.StatusUnauthorized {
				t.Errorf("no token: %d, want 401", status)
			}
		})
	}
	if f.mgr.Live() != 1 {
		t.Fatalf("the session was deleted by a refused request")
	}
}

// TestApprovalsInboxStream: the inbox stream lists a pending approval with
// its digest; an approval sent over HTTP by the operator removes it from
// the stream at once, and the call runs with the operator recorded.
func TestApprovalsInboxStream(t *testing.T) {
	f := newOpsFixture(t)
	client, _ := f.tok.Identify(clientToken)
	s, release, err := f.mgr.AcquireAs(testutil.Context(t), client, "inbox", true)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	approvalCap(t, s, "fs.write")

	ctx := testutil.Context(t)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/v1/approvals/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + operatorToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	read := func() map[string]any {
		t.Helper()
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := read(); m["type"] != "approvals" || len(m["approvals"].([]any)) != 0 {
		t.Fatalf("first message %v", m)
	}
	done := make(chan protocol.Outcome, 1)
	go func() {
		done <- s.Invoke(context.Background(), protocol.AudienceLLM, "fs.write", json.RawMessage(`{"path":"a.txt"}`))
	}()
	added := read()
	a, _ := added["approval"].(map[string]any)
	if added["type"] != "approval_added" || a["session"] != "inbox" || a["name"] != "fs.write" || a["since"] == nil {
		t.Fatalf("added = %v", added)
	}
	digest, _ := a["inputDigest"].(string)
	if status, body := f.do("GET", "/v1/approvals", operatorToken, ""); status != 200 || !strings.Contains(body, a["callId"].(string)) {
		t.Fatalf("GET /v1/approvals: %d %s", status, body)
	}

	frame := func(m protocol.Message) string {
		b, err := protocol.EncodeFrame(&protocol.Frame{ID: "h1", Msg: m})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	callID := a["callId"].(string)
	t.Run("an app may not decide over HTTP", func(t *testing.T) {
		status, body := f.do("POST", "/v1/sessions/inbox/frames", appToken, frame(&protocol.CapabilityApprove{CallID: callID, Decision: protocol.DecisionApproved, DecidedBy: "app", InputDigest: digest}))
		if status != http.StatusForbidden {
			t.Fatalf("app approve: %d %s", status, body)
		}
	})
	t.Run("only commands that need no connection", func(t *testing.T) {
		status, body := f.do("POST", "/v1/sessions/inbox/frames", operatorToken, frame(&protocol.CapabilityDeregister{Names: []string{"fs.write"}}))
		if status != http.StatusBadRequest || !strings.Contains(body, "needs a WebSocket") {
			t.Fatalf("deregister over HTTP: %d %s", status, body)
		}
		status, body = f.do("POST", "/v1/sessions/nosuch/frames", operatorToken, frame(&protocol.CapabilityCancel{CallID: "x"}))
		if status != http.StatusNotFound {
			t.Fatalf("frame to a missing session: %d %s", status, body)
		}
	})
	status, body := f.do("POST", "/v1/sessions/inbox/frames", operatorToken, frame(&protocol.CapabilityApprove{CallID: callID, Decision: protocol.DecisionApproved, DecidedBy: "Ada Lovelace", InputDigest: digest}))
	if status != http.StatusOK || !strings.Contains(body, `"ack"`) {
		t.Fatalf("approve: %d %s", status, body)
	}
	// The removal comes as the call ends or as its decision is reported,
	// whichever is first; the decision always follows.
	removed := read()
	if removed["type"] != "approval_removed" || removed["callId"] != callID {
		t.Fatalf("removed = %v", removed)
	}
	if removed["decision"] == nil {
		removed = read()
	}
	if removed["type"] != "approval_removed" || removed["decision"] != "approved" || !strings.Contains(removed["decidedBy"].(string), "ada") {
		t.Fatalf("the decision's removal = %v", removed)
	}
	if out := testutil.Recv(t, done, "the outcome"); out.Err != nil {
		t.Fatalf("approved call failed: %+v", out.Err)
	}
	status, body = f.do("GET", "/v1/sessions/inbox/calls/"+callID, operatorToken, "")
	for _, want := range []string{`"approval_requested"`, `"approval_decided"`, `"call_finished"`, `"decision":"approved"`, "Ada Lovelace"} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("call times lack %s: %d %s", want, status, body)
		}
	}
}

func TestTokensFile(t *testing.T) {
	t.Run("first start creates a client, a model and a named operator token", func(t *testing.T) {
		dir := t.TempDir()
		tokens, client, created, err := server.LoadOrCreateTokens(dir)
		if err != nil || !created || client == "" {
			t.Fatalf("created=%v client=%q err=%v", created, client, err)
		}
		made := tokens.Created()
		if len(made) != 3 || made[0].Side != "client" || made[1].Side != "model" || made[2].Side != "operator" || made[2].Name != server.DefaultOperatorName {
			t.Fatalf("created %+v", made)
		}
		if made[0].Tenant != server.DefaultTenant || made[1].Tenant != server.DefaultTenant {
			t.Fatalf("the client and the model token are not of one tenant: %+v", made)
		}
		if p, ok := tokens.Peer(made[2].Token); !ok || p.Side != session.SideOperator || p.Name != server.DefaultOperatorName {
			t.Fatalf("operator token is %+v %v", p, ok)
		}
		fi, err := os.Stat(filepath.Join(dir, "tokens.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("tokens.json mode %v, %v", fi.Mode().Perm(), err)
		}
		again, _, created, err := server.LoadOrCreateTokens(dir)
		if err != nil || created || len(again.Created()) != 0 {
			t.Fatalf("second start created %v (%v)", again.Created(), err)
		}
	})
	t.Run("an older file without an operator or a model token gets both", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(`{"tokens":[{"token":"client-token-0123456789","side":"client"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		tokens, client, created, err := server.LoadOrCreateTokens(dir)
		if err != nil || !created || client != "client-token-0123456789" {
			t.Fatalf("created=%v client=%q err=%v", created, client, err)
		}
		made := tokens.Created()
		if len(made) != 2 || made[0].Side != "model" || made[1].Side != "operator" {
			t.Fatalf("created %+v", made)
		}
		// Its only client token joins the model token's tenant.
		raw, _ := os.ReadFile(filepath.Join(dir, "tokens.json"))
		if made[0].Tenant != server.DefaultTenant || !strings.Contains(string(raw), `"side": "client",
      "tenant": "default"`) {
			t.Fatalf("model tenant %q, file:\n%s", made[0].Tenant, raw)
		}
		if _, ok := tokens.Peer("client-token-0123456789"); !ok {
			t.Fatal("the existing client token was lost")
		}
	})
	t.Run("a misspelt key is refused, not dropped", func(t *testing.T) {
		// Dropped, "tenat" had left the token a tenant of its own, and the
		// next rewrite of the file erased the typo.
		dir := t.TempDir()
		body := `{"tokens":[{"token":"client-token-0123456789","side":"client","tenat":"acme"}]}`
		if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := server.LoadOrCreateTokens(dir); err == nil || !strings.Contains(err.Error(), `unknown field "tenat"`) || !strings.Contains(err.Error(), "keys are token, side, name, tenant and app") {
			t.Fatalf("err = %v, want the unknown key named", err)
		}
		if raw, _ := os.ReadFile(filepath.Join(dir, "tokens.json")); string(raw) != body {
			t.Fatalf("the refused file was rewritten:\n%s", raw)
		}
	})
	t.Run("a key twice is refused", func(t *testing.T) {
		// The last was taken: which tenant the token is in was the
		// file's second word, unseen by whoever read the first.
		dir := t.TempDir()
		body := `{"tokens":[{"token":"client-token-0123456789","side":"client","tenant":"a","tenant":"b"}]}`
		if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := server.LoadOrCreateTokens(dir); err == nil || !strings.Contains(err.Error(), `the key "tenant" appears twice`) {
			t.Fatalf("err = %v, want the key named", err)
		}
	})
	t.Run("data after the tokens object is refused", func(t *testing.T) {
		dir := t.TempDir()
		body := `{"tokens":[{"token":"client-token-0123456789","side":"client"}]}}`
		if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := server.LoadOrCreateTokens(dir); err == nil || !strings.Contains(err.Error(), "1 bytes after the JSON value") {
			t.Fatalf("err = %v, want the stray brace refused", err)
		}
	})
	for _, tc := range []struct {
		name string
		tok  server.Token
		want string
	}{
		{"operator without a name", server.Token{Token: operatorToken, Side: "operator"}, "needs a name"},
		{"operator with an app", server.Token{Token: operatorToken, Side: "operator", Name: "x", App: "a"}, "side must be"},
		{"name with a control character", server.Token{Token: operatorToken, Side: "operator", Name: "a\x1b[31m"}, "not printable"},
		{"name too long", server.Token{Token: operatorToken, Side: "client", Name: strings.Repeat("n", 65)}, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := server.NewTokens(tc.tok); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// watchTokens loads dir's tokens and watches path, as brain serve does,
// every 5 ms, until the test ends; waitFor polls what the watcher did.
func watchTokens(t *testing.T, dir, path string) (tokens *server.Tokens, logs *testutil.LockedBuffer, waitFor func(what string, ok func() bool)) {
	t.Helper()
	tokens, _, _, err := server.LoadOrCreateTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs = &testutil.LockedBuffer{}
	go server.WatchTokens(ctx, tokens, path, 5*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil)))
	return tokens, logs, func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(testutil.WaitLimit)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; logs:\n%s", what, logs.String())
			}
			time.Sleep(5 * time.Millisecond) // polling the watcher's effect, not synchronising
		}
	}
}

// TestWatchTokensSeesEveryChange: a change the file's size and
// modification time do not show still takes effect — the mode fixed as
// the refusal asked (chmod 600 after a file readable by others), a token
// rotated to one of the same length in a file whose modification time
// was kept (cp -p, rsync -a), renamed into place or written in place, a
// chmod that leaves the file readable by others — and a refusal is logged
// once, not at every look.
func TestWatchTokensSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	old := time.Now().Add(-time.Hour).Truncate(time.Second) // not racy: the stamp decides
	body := func(tok string) string { return `{"tokens":[{"token":"` + tok + `","side":"client"}]}` }
	write := func(tok string, mode os.FileMode, inPlace bool) {
		t.Helper()
		target := path + ".tmp"
		if inPlace {
			target = path
		}
		if err := os.WriteFile(target, []byte(body(tok)), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(target, mode); err != nil { // WriteFile keeps an existing file's mode
			t.Fatal(err)
		}
		if err := os.Chtimes(target, old, old); err != nil {
			t.Fatal(err)
		}
		if !inPlace {
			if err := os.Rename(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("token-aaaaaaaaaaaaaaaaaaaa", 0o600, false)
	tokens, logs, waitFor := watchTokens(t, dir, path)
	accepted := func(tok string) bool { _, ok := tokens.Peer(tok); return ok }

	write("token-bbbbbbbbbbbbbbbbbbbb", 0o644, false) // refused: readable by others
	waitFor("the refusal", func() bool { return strings.Contains(logs.String(), "chmod 600") })
	if !accepted("token-aaaaaaaaaaaaaaaaaaaa") || accepted("token-bbbbbbbbbbbbbbbbbbbb") {
		t.Fatal("a file readable by others changed the tokens")
	}
	if err := os.Chmod(path, 0o600); err != nil { // as the refusal asks: size and times unchanged
		t.Fatal(err)
	}
	waitFor("the file after chmod 600", func() bool { return accepted("token-bbbbbbbbbbbbbbbbbbbb") })
	waitFor("the log that the refusal is over", func() bool { return strings.Contains(logs.String(), "tokens file read again") })
	if accepted("token-aaaaaaaaaaaaaaaaaaaa") {
		t.Fatal("the revoked token is still accepted after chmod 600")
	}
	if n := strings.Count(logs.String(), "tokens file not reloaded"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", n, logs.String())
	}

	write("token-cccccccccccccccccccc", 0o600, false) // same size, same modification time, renamed in
	waitFor("a rotation renamed into place", func() bool { return accepted("token-cccccccccccccccccccc") })
	if accepted("token-bbbbbbbbbbbbbbbbbbbb") {
		t.Fatal("the rotated token is still accepted")
	}
	write("token-dddddddddddddddddddd", 0o600, true) // the same, written in place
	waitFor("a rotation written in place", func() bool { return accepted("token-dddddddddddddddddddd") })
	if accepted("token-cccccccccccccccccccc") {
		t.Fatal("the rotated token is still accepted")
	}

	// A chmod alone, the bytes as applied: the file readable by others is
	// reported (it was not, until its bytes changed too); the tokens in
	// use stay.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("the refusal of a chmod 644", func() bool { return strings.Count(logs.String(), "chmod 600") == 2 })
	if !accepted("token-dddddddddddddddddddd") {
		t.Fatal("a chmod 644 dropped the tokens in use")
	}
}

// TestWatchTokens: an edit of the tokens file takes effect without a
// restart — a token added is accepted, one removed refused — and a file
// that does not read leaves the tokens in use as they were.
func TestWatchTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	write := func(body string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // a new inode: a new modification time and size for the watcher
			t.Fatal(err)
		}
	}
	write(`{"tokens":[{"token":"first-token-0123456789","side":"client"}]}`)
	tokens, logs, waitFor := watchTokens(t, dir, path)
	write(`{"tokens":[{"token":"second-token-0123456789abc","side":"client"}]}`)
	waitFor("the added token", func() bool { _, ok := tokens.Peer("second-token-0123456789abc"); return ok })
	if _, ok := tokens.Peer("first-token-0123456789"); ok {
		t.Fatal("the removed token is still accepted")
	}
	write(`{"tokens":[{"token":"short","side":"client"}]}`) // refused: nothing changes
	waitFor("the refusal of the bad file", func() bool { return strings.Contains(logs.String(), "tokens file not reloaded") })
	if _, ok := tokens.Peer("second-token-0123456789abc"); !ok {
		t.Fatal("a malformed file dropped the tokens in use")
	}
	write(`{"tokens":[{"token":"second-token-0123456789abc","side":"client"},{"token":"third-token-0123456789","side":"client"}]}`)
	waitFor("the file after a bad one", func() bool { _, ok := tokens.Peer("third-token-0123456789"); return ok })
}
