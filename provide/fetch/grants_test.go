package fetch_test

import (
	"errors"
	"testing"

	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/grant"
)

func TestGrantsValidate(t *testing.T) {
	hosts := func(h ...string) fetch.Grants { return fetch.Grants{AllowHosts: h} }
	tests := []struct {
		name  string
		g     fetch.Grants
		field string // "" means valid
	}{
		{"one name", hosts("api.example.com"), ""},
		{"wildcard below a registrable domain", hosts("*.example.com"), ""},
		{"wildcard below a second-level public suffix", hosts("*.example.co.uk"), ""},
		{"IP literals", hosts("192.0.2.7", "::1", "[2001:db8::1]"), ""},
		{"upper case and trailing dot", hosts("API.Example.com."), ""},
		{"everything set", fetch.Grants{AllowHosts: []string{"a.example"}, Schemes: []string{"http", "https"}, Ports: []int{80, 8443}, AllowCIDRs: []string{"10.0.0.0/8", "127.0.0.1/32", "fd00::/8"}, MaxResponseBytes: 1, Timeout: 1, MaxRedirects: -1}, ""},

		{"no hosts", fetch.Grants{}, "allow_hosts"},
		{"star", hosts("*"), "allow_hosts[0]"},
		{"star dot com", hosts("api.example.com", "*.com"), "allow_hosts[1]"},
		{"star dot co.uk", hosts("*.co.uk"), "allow_hosts[0]"},
		{"private public suffix", hosts("*.github.io"), "allow_hosts[0]"},
		{"unknown top-level domain", hosts("*.test"), "allow_hosts[0]"},
		{"inner wildcard", hosts("api.*.example.com"), "allow_hosts[0]"},
		{"trailing wildcard", hosts("api.*"), "allow_hosts[0]"},
		{"partial wildcard", hosts("*api.example.com"), "allow_hosts[0]"},
		{"empty", hosts(""), "allow_hosts[0]"},
		{"decimal address", hosts("2130706433"), "allow_hosts[0]"},
		{"hex address", hosts("0x7f000001"), "allow_hosts[0]"},
		{"short address", hosts("127.1"), "allow_hosts[0]"},
		{"non-ASCII", hosts("bücher.example"), "allow_hosts[0]"},
		{"URL instead of host", hosts("https://api.example.com"), "allow_hosts[0]"},
		{"host with port", hosts("api.example.com:443"), "allow_hosts[0]"},
		{"zone", hosts("fe80::1%eth0"), "allow_hosts[0]"},
		{"scheme", fetch.Grants{AllowHosts: []string{"a.example"}, Schemes: []string{"https", "ftp"}}, "schemes[1]"},
		{"port 0", fetch.Grants{AllowHosts: []string{"a.example"}, Ports: []int{0}}, "ports[0]"},
		{"port too big", fetch.Grants{AllowHosts: []string{"a.example"}, Ports: []int{443, 70000}}, "ports[1]"},
		{"cidr without length", fetch.Grants{AllowHosts: []string{"a.example"}, AllowCIDRs: []string{"10.0.0.1"}}, "allow_cidrs[0]"},
		{"all v4", fetch.Grants{AllowHosts: []string{"a.example"}, AllowCIDRs: []string{"0.0.0.0/0"}}, "allow_cidrs[0]"},
		{"all v6", fetch.Grants{AllowHosts: []string{"a.example"}, AllowCIDRs: []string{"10.0.0.0/8", "::/0"}}, "allow_cidrs[1]"},
		{"negative size", fetch.Grants{AllowHosts: []string{"a.example"}, MaxResponseBytes: -1}, "max_response_bytes"},
		{"negative timeout", fetch.Grants{AllowHosts: []string{"a.example"}, Timeout: -1}, "timeout"},
		{"redirects below -1", fetch.Grants{AllowHosts: []string{"a.example"}, MaxRedirects: -2}, "max_redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var fe *grant.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v (%T), want a *grant.FieldError for %s", err, err, tt.field)
			}
			if fe.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, tt.field, err)
			}
		})
	}
}
