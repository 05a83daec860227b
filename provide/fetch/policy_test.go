package fetch_test

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/brainrt/brain/provide/fetch"
)

func TestCheckAddr(t *testing.T) {
	plain, err := fetch.NewPolicy(fetch.Grants{AllowHosts: []string{"api.test"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	withCIDRs, err := fetch.NewPolicy(fetch.Grants{
		AllowHosts: []string{"api.test"},
		AllowCIDRs: []string{"127.0.0.1/32", "10.0.0.0/8", "fd00::/8", "::ffff:192.168.1.0/120"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr   string
		policy *fetch.Policy
		class  string // "" means allowed
	}{
		{"8.8.8.8", plain, ""},
		{"1.1.1.1", plain, ""},
		{"172.32.0.1", plain, ""},
		{"100.128.0.1", plain, ""},
		{"169.255.0.1", plain, ""},
		{"2606:4700:4700::1111", plain, ""},
		{"::ffff:8.8.8.8", plain, ""},
		{"64:ff9b::808:808", plain, ""}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", plain, ""},  // 6to4 of 8.8.8.8

		{"127.0.0.1", plain, "loopback"},
		{"127.255.255.254", plain, "loopback"},
		{"10.1.2.3", plain, "private"},
		{"172.16.0.1", plain, "private"},
		{"172.31.255.255", plain, "private"},
		{"192.168.1.1", plain, "private"},
		{"100.64.0.1", plain, "CGNAT"},
		{"100.127.255.255", plain, "CGNAT"},
		{"169.254.169.254", plain, "link-local"},
		{"0.0.0.0", plain, "unspecified"},
		{"0.1.2.3", plain, "unspecified"},
		{"224.0.0.1", plain, "multicast"},
		{"239.255.255.250", plain, "multicast"},
		{"255.255.255.255", plain, "broadcast"},
		{"240.0.0.1", plain, "reserved"},
		{"192.0.2.1", plain, "documentation"},
		{"198.18.0.1", plain, "benchmarking"},
		{"::", plain, "unspecified"},
		{"::1", plain, "loopback"},
		{"::ffff:127.0.0.1", plain, "loopback"},
		{"::ffff:10.0.0.1", plain, "private"},
		{"::ffff:169.254.169.254", plain, "link-local"},
		{"::127.0.0.1", plain, "reserved"}, // IPv4-compatible, deprecated
		{"64:ff9b::7f00:1", plain, "loopback (embedded"},
		{"64:ff9b::a9fe:a9fe", plain, "link-local (embedded"},
		{"64:ff9b:1::1", plain, "NAT64"},
		{"2002:7f00:1::", plain, "loopback (embedded"},
		{"2002:a9fe:a9fe::1", plain, "link-local (embedded"},
		// Teredo: server 65.54.227.120, client stored inverted: 127.0.0.1.
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", plain, "loopback (embedded"},
		{"fc00::1", plain, "unique local"},
		{"fd12:3456::1", plain, "unique local"},
		{"fe80::1", plain, "link-local"},
		{"fe80::1%eth0", plain, "zone"},
		{"fec0::1", plain, "site-local"},
		{"ff02::1", plain, "multicast"},
		{"2001:db8::1", plain, "documentation"},
		{"100::1", plain, "discard"},

		{"127.0.0.1", withCIDRs, ""},
		{"::ffff:127.0.0.1", withCIDRs, ""},
		{"127.0.0.2", withCIDRs, "loopback"},
		{"10.9.9.9", withCIDRs, ""},
		{"fd00::5", withCIDRs, ""},
		{"fc00::5", withCIDRs, "unique local"},
		{"192.168.1.7", withCIDRs, ""},
		{"192.168.2.7", withCIDRs, "private"},
	}
	for _, tt := range tests {
		name := tt.addr
		if tt.policy == withCIDRs {
			name += " with allow_cidrs"
		}
		t.Run(name, func(t *testing.T) {
			err := tt.policy.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.class == "" {
				if err != nil {
					t.Fatalf("CheckAddr = %v, want allowed", err)
				}
				return
			}
			wantDenied(t, err, "allow_cidrs")
			if !strings.Contains(err.Error(), tt.class) {
				t.Errorf("message %q does not name %q", err, tt.class)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	p, err := fetch.NewPolicy(fetch.Grants{
		AllowHosts: []string{"api.example.com", "*.svc.example.org", "192.0.2.7", "[2001:db8::7]"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url  string
		rule string // "" means allowed
	}{
		{"https://api.example.com/v1", ""},
		{"https://API.Example.COM./v1", ""},
		{"https://api.example.com:443/", ""},
		{"https://user:pass@api.example.com/", ""},
		{"https://a.svc.example.org/", ""},
		{"https://a.b.svc.example.org/", ""},
		{"https://192.0.2.7/", ""},
		{"https://[2001:db8::7]/", ""},

		{"https://svc.example.org/", "allow_hosts"}, // a wildcard does not match its apex
		{"https://evilsvc.example.org/", "allow_hosts"},
		{"https://api.example.com.evil.com/", "allow_hosts"},
		{"https://evil.com/", "allow_hosts"},
		{"https://2130706433/", "allow_hosts"},
		{"https://0x7f000001/", "allow_hosts"},
		{"https://127.1/", "allow_hosts"},
		{"https://0177.0.0.1/", "allow_hosts"},
		{"https://[::1]/", "allow_hosts"},
		{"https://b%C3%BCcher.example/", "allow_hosts"},
		{"http://api.example.com/", "schemes"},
		{"ftp://api.example.com/", "schemes"},
		{"//api.example.com/", "schemes"},
		{"https://api.example.com:8443/", "ports"},
		{"https://api.example.com:0/", "ports"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			err = p.CheckURL(u)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("CheckURL = %v, want allowed", err)
				}
				return
			}
			wantDenied(t, err, tt.rule)
		})
	}
}
