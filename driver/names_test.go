package driver

import (
	"strings"
	"testing"
)

func TestNameMap(t *testing.T) {
	long := strings.Repeat("a.", 40) // 80 bytes
	tests := []struct {
		name  string
		names []string
		want  map[string]string
	}{
		{"valid names are kept", []string{"fs_read", "web-search"}, map[string]string{"fs_read": "fs_read", "web-search": "web-search"}},
		{"dots become underscores", []string{"fs.read", "__capabilities.list"}, map[string]string{"fs.read": "fs_read", "__capabilities.list": "__capabilities_list"}},
		{"a collision gets a hash", []string{"fs.read", "fs_read"}, map[string]string{"fs_read": "fs_read", "fs.read": "fs_read_4074bc02"}},
		{"two mapped names collide", []string{"a.b", "a:b"}, map[string]string{"a.b": "a_b"}},
		{"long names are cut and hashed", []string{long}, nil},
		{"unicode", []string{"météo.get"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newNameMap(tt.names)
			seen := map[string]string{}
			for _, n := range tt.names {
				w := m.wire(n)
				if !validToolName(w) {
					t.Errorf("%q maps to %q, which the providers refuse", n, w)
				}
				if other, ok := seen[w]; ok && other != n {
					t.Errorf("%q and %q both map to %q", n, other, w)
				}
				seen[w] = n
				if back, ok := m.capability(w); !ok || back != n {
					t.Errorf("%q maps to %q, which maps back to %q", n, w, back)
				}
				if want, ok := tt.want[n]; ok && w != want {
					t.Errorf("%q maps to %q, want %q", n, w, want)
				}
			}
			// The mapping depends only on the set, not on its order.
			rev := make([]string, len(tt.names))
			for i, n := range tt.names {
				rev[len(rev)-1-i] = n
			}
			m2 := newNameMap(rev)
			for _, n := range tt.names {
				if m.wire(n) != m2.wire(n) {
					t.Errorf("%q maps to %q or %q depending on order", n, m.wire(n), m2.wire(n))
				}
			}
		})
	}
	if _, ok := newNameMap([]string{"fs.read"}).capability("nope"); ok {
		t.Error("an unknown provider name mapped to a capability")
	}
}

func FuzzNameMap(f *testing.F) {
	f.Add("fs.read", "fs_read", "")
	f.Add(strings.Repeat("x", 70), strings.Repeat("x", 71), "é")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		names := []string{a, b, c}
		m := newNameMap(names)
		seen := map[string]string{}
		for _, n := range names {
			w := m.wire(n)
			if !validToolName(w) {
				t.Fatalf("%q maps to invalid %q", n, w)
			}
			if o, ok := seen[w]; ok && o != n {
				t.Fatalf("%q and %q both map to %q", n, o, w)
			}
			seen[w] = n
			if back, _ := m.capability(w); back != n {
				t.Fatalf("%q → %q → %q", n, w, back)
			}
		}
	})
}
