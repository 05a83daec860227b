package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing/fstest"

	"github.com/brainrt/brain/server"
)

// The console's credential: a sign-in answers a cookie and a CSRF token;
// the console's API takes the cookie only with the token.
func ExampleNewConsole() {
	tokens, _ := server.NewTokens(server.Token{Token: "operator-token-0123456789", Side: "operator", Name: "ada"})
	kernel := server.New(server.Options{Tokens: tokens, Manager: server.NewManager(server.ManagerOptions{})})
	c, err := server.NewConsole(server.ConsoleOptions{Server: kernel, Tokens: tokens,
		Assets: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>console</title>")}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(c)
	defer ts.Close()

	req, _ := http.NewRequest("POST", ts.URL+"/console/signin", strings.NewReader(`{"token":"operator-token-0123456789"}`))
	req.Header.Set("Origin", ts.URL) // the console's own page
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var signin struct{ Name, CSRF string }
	_ = json.NewDecoder(resp.Body).Decode(&signin)
	resp.Body.Close()
	cookie := resp.Cookies()[0]
	fmt.Println("signed in:", resp.StatusCode, signin.Name)

	get := func(csrf string) int {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/sessions", nil)
		req.AddCookie(cookie)
		if csrf != "" {
			req.Header.Set("X-Brain-Csrf", csrf)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println("the cookie alone:", get(""))
	fmt.Println("with the CSRF token:", get(signin.CSRF))
	// Output:
	// signed in: 200 ada
	// the cookie alone: 401
	// with the CSRF token: 200
}
