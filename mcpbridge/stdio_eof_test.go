package mcpbridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/mcpbridge"
)

// TestServeEnvironmentStdioAnswersBeforeEOF: requests followed at once by
// the end of stdin (`printf … | brain mcp`) are all answered before
// ServeEnvironmentStdio returns.
func TestServeEnvironmentStdioAnswersBeforeEOF(t *testing.T) {
	env := newEnvironment(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"text.words","arguments":{"text":"a b c"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"text.refuse","arguments":{}}}`,
	}, "\n") + "\n"
	for i := range 5 { // the race it fixes is timing-dependent: try it a few times
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := mcpbridge.ServeEnvironmentStdio(ctx, env, strings.NewReader(in), &out)
		cancel()
		if err != nil {
			t.Fatalf("run %d: ServeEnvironmentStdio = %v", i, err)
		}
		got := map[string]string{}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("run %d: output line %q: %v", i, sc.Text(), err)
			}
			if len(m.ID) > 0 {
				got[string(m.ID)] = string(m.Result) + string(m.Error)
			}
		}
		for _, id := range []string{`1`, `2`, `"three"`, `4`} {
			if _, ok := got[id]; !ok {
				t.Fatalf("run %d: no reply to request %s; output:\n%s", i, id, out.String())
			}
		}
		if !strings.Contains(got[`"three"`], `{\"words\":3}`) || !strings.Contains(got[`4`], "quota_exceeded") {
			t.Fatalf("run %d: replies %v", i, got)
		}
	}
}
