package fetch_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/fetch"
)

func ExampleFetcher_Fetch() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from ", r.URL.Path)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	f, err := fetch.New(fetch.Grants{
		AllowHosts: []string{"127.0.0.1"},
		Schemes:    []string{"http"},
		Ports:      []int{port},
		// Loopback is denied unless an allow_cidrs entry contains it.
		AllowCIDRs: []string{"127.0.0.1/32"},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()

	ctx := context.Background()
	resp, err := f.Fetch(ctx, handle.Request{URL: srv.URL + "/items"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, string(resp.Body))

	_, err = f.Fetch(ctx, handle.Request{URL: "http://169.254.169.254/latest/meta-data/"})
	fmt.Println(handle.CodeOf(err))
	fmt.Println(err)
	// Output:
	// 200 hello from /items
	// denied
	// net fetch: host "169.254.169.254" is not allowed (allow_hosts)
}

func ExampleGrants_Validate() {
	for _, h := range []string{"*.example.com", "*.co.uk", "*"} {
		fmt.Printf("%-14s %v\n", h, fetch.Grants{AllowHosts: []string{h}}.Validate())
	}
	// Output:
	// *.example.com  <nil>
	// *.co.uk        allow_hosts[0]: "*.co.uk": "co.uk" is a public suffix: a wildcard over it allows names anyone can register
	// *              allow_hosts[0]: "*": "*" would allow every host; list the hosts
}
