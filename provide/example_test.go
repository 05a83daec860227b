package provide_test

import (
	"context"
	"fmt"

	"github.com/brainrt/brain/provide"
)

func ExampleParse() {
	_, err := provide.Parse([]byte(`
net:
  allow_hosts:
    - api.github.com
    - "*"
`), "grants.yaml")
	fmt.Println(err)

	_, err = provide.Parse([]byte(`
js:
  timeout: 5 seconds
`), "grants.yaml")
	fmt.Println(err)
	// Output:
	// grants.yaml:5:7: net.allow_hosts[1]: "*": "*" would allow every host; list the hosts
	// grants.yaml:3:3: js.timeout: "5 seconds" is not a duration (write one such as 500ms, 30s or 1m30s)
}

func ExampleEnvironment() {
	g, err := provide.Parse([]byte(`
net: {allow_hosts: [api.github.com]}
js:  {timeout: 2s}
page:
  allow_hosts: [docs.example.com]
  binary: /nonexistent/chromium
`), "grants.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	env, receipt, err := provide.Environment(context.Background(), g, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	fmt.Println("provides:", receipt.Provides)
	for _, f := range receipt.Failures {
		fmt.Println("failed:", f.Name, f.Code)
	}
	// Output:
	// provides: [js net]
	// failed: page unavailable
}
