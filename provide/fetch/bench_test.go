package fetch_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/fetch"
)

// BenchmarkFetchLoopback measures one small GET through the net handle:
// parsing, the grant checks, the capped read. Connections are kept alive,
// as in BenchmarkHTTPClientLoopback, its baseline.
func BenchmarkFetchLoopback(b *testing.B) {
	srv := newServer(b, "127.0.0.1:0", text("ok"))
	f, err := fetch.New(loopbackGrants(srv.port), &fetch.Options{Resolver: testResolver})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	req := handle.Request{URL: urlOf("api.test", srv.port, "/")}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := f.Fetch(ctx, req)
		if err != nil || len(resp.Body) != 2 {
			b.Fatalf("Fetch = %q, %v", resp.Body, err)
		}
	}
}

// BenchmarkHTTPClientLoopback is the baseline: a plain http.Client with
// keep-alive, reading the whole body.
func BenchmarkHTTPClientLoopback(b *testing.B) {
	srv := newServer(b, "127.0.0.1:0", text("ok"))
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	u := urlOf("127.0.0.1", srv.port, "/")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) != 2 {
			b.Fatalf("Get = %q, %v", body, err)
		}
	}
}
