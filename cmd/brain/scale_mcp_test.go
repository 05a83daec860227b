package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/internal/scaleclient"
)

var (
	scaleMCP        = flag.String("scale.mcp", "", "MCP load: the numbers of MCP clients, each in its own session, comma-separated (e.g. 100,1000)")
	scaleMCPSeconds = flag.Float64("scale.mcpseconds", 5, "MCP load: how long each size calls")
	scaleMCPJSON    = flag.String("scale.mcpjson", "", "write the MCP load's figures here as JSON")
)

// mcpAtSize is what TestScaleMCP measures at one size.
type mcpAtSize struct {
	Clients   int     `json:"clients"`
	Calls     int     `json:"calls"`
	Failed    int64   `json:"failed"`
	PerSecond float64 `json:"callsPerSecond"`
	P50Ms     float64 `json:"p50Ms"`
	P99Ms     float64 `json:"p99Ms"`
	MaxMs     float64 `json:"maxMs"`
	Load      string  `json:"loadAverage"`
}

// TestScaleMCP is issue 21's invocation throughput of many sessions each
// driven by its own MCP client (the go-sdk's, over streamable HTTP with a
// model token), run only with -scale.mcp: at each size, every client
// calls fs.read in its own session as fast as it can for
// -scale.mcpseconds; calls a second across all, and each call's latency.
// The clients run in this process (what is measured is time, not the
// kernel's memory).
func TestScaleMCP(t *testing.T) {
	if *scaleMCP == "" {
		t.Skip("the MCP load runs with -scale.mcp (scale.sh)")
	}
	var sizes []int
	for _, f := range strings.Split(*scaleMCP, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
			t.Fatalf("-scale.mcp %q: want positive counts", *scaleMCP)
		}
		sizes = append(sizes, n)
	}
	scaleclient.RaiseFileLimit()
	addr, data := scaleKernel(t)
	token := tokenOf(t, data, "model")
	// One transport for every client, keeping a connection each: the
	// default keeps two per host, and a thousand clients would open and
	// close a connection per call.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = sizes[len(sizes)-1] + 16
	hc := &http.Client{Transport: bearer{token, transport}}
	defer transport.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var sessions []*mcp.ClientSession
	defer func() {
		for _, cs := range sessions {
			_ = cs.Close()
		}
	}()
	var figs []mcpAtSize
	for _, n := range sizes {
		for len(sessions) < n {
			c := mcp.NewClient(&mcp.Implementation{Name: "scale", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint:   fmt.Sprintf("http://%s/v1/sessions/mcp-%06d/mcp", addr, len(sessions)),
				HTTPClient: hc, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatalf("MCP client %d: %v", len(sessions), err)
			}
			sessions = append(sessions, cs)
		}
		d := time.Duration(*scaleMCPSeconds * float64(time.Second))
		lats := make([][]time.Duration, n)
		var failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(d)
		for i, cs := range sessions[:n] {
			wg.Go(func() {
				for k := 0; k < 100_000 && time.Now().Before(deadline); k++ {
					t0 := time.Now()
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "notes.txt"}})
					if err != nil || res.IsError {
						if failed.Add(1) == 1 {
							b, _ := json.Marshal(res)
							t.Errorf("a call failed: %v %s", err, b)
						}
						continue
					}
					lats[i] = append(lats[i], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		all := slices.Concat(lats...)
		slices.Sort(all)
		q := func(f float64) float64 {
			if len(all) == 0 {
				return 0
			}
			return float64(all[min(len(all)-1, int(f*float64(len(all))))]) / float64(time.Millisecond)
		}
		fig := mcpAtSize{Clients: n, Calls: len(all), Failed: failed.Load(), PerSecond: float64(len(all)) / elapsed.Seconds(),
			P50Ms: q(0.5), P99Ms: q(0.99), MaxMs: q(1), Load: loadAverage()}
		t.Logf("%d MCP clients: %d calls in %s, %.0f calls/s; p50 %.2f ms, p99 %.2f ms, max %.1f ms; %d failed (load %s)",
			n, fig.Calls, elapsed.Round(time.Millisecond), fig.PerSecond, fig.P50Ms, fig.P99Ms, fig.MaxMs, fig.Failed, fig.Load)
		figs = append(figs, fig)
	}
	if *scaleMCPJSON != "" {
		b, _ := json.MarshalIndent(map[string]any{"mcp": figs}, "", "  ")
		if err := os.WriteFile(*scaleMCPJSON, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
