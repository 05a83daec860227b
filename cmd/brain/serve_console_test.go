package main

import (
	"strings"
	"testing"
)

func TestConsoleAddress(t *testing.T) {
	for _, tc := range []struct{ flag, kernel, want string }{
		{"", "127.0.0.1:7777", "127.0.0.1:7778"},
		{"", "0.0.0.0:443", "127.0.0.1:444"}, // loopback whatever --addr is
		{"", "127.0.0.1:0", "127.0.0.1:0"},
		{"", "not an address", "127.0.0.1:7778"},
		{"off", "127.0.0.1:7777", "off"},
		{"127.0.0.1:9000", "127.0.0.1:7777", "127.0.0.1:9000"},
	} {
		if got := consoleAddress(tc.flag, tc.kernel); got != tc.want {
			t.Errorf("consoleAddress(%q, %q) = %q, want %q", tc.flag, tc.kernel, got, tc.want)
		}
	}
}

func TestConsoleConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  consoleConfig
		want string
	}{
		{"origins", consoleConfig{FrameOrigins: []string{"https://charts.example.com", "http://127.0.0.1:9000/"}, WebComponentOrigins: []string{"https://w.example.com"}}, ""},
		{"a path", consoleConfig{FrameOrigins: []string{"https://charts.example.com/app"}}, "console.frame_origins[0]"},
		{"a scheme", consoleConfig{WebComponentOrigins: []string{"javascript:alert(1)"}}, "console.web_component_origins[0]"},
		{"no host", consoleConfig{WebComponentOrigins: []string{"https://"}}, "not an origin"},
		{"credentials", consoleConfig{FrameOrigins: []string{"https://u:p@x.example.com"}}, "not an origin"},
		{"hosts", consoleConfig{Hosts: []string{"console.example.com", "brain-1"}}, ""},
		{"a host with a port", consoleConfig{Hosts: []string{"console.example.com:443"}}, "console.hosts[0]"},
		{"a host with a scheme", consoleConfig{Hosts: []string{"ok.example.com", "https://console.example.com"}}, "console.hosts[1]"},
		{"an empty host", consoleConfig{Hosts: []string{""}}, "not a host name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
