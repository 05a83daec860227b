package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkInvoke-2   	  300000	      4000 ns/op	     900 B/op	      15 allocs/op
BenchmarkInvoke-2   	  300000	      5000 ns/op	     900 B/op	      15 allocs/op
BenchmarkInvoke-2   	  300000	      2000 ns/op	     900 B/op	      15 allocs/op
BenchmarkFloorWSEcho-2   	  50000	     20000 ns/op
BenchmarkWSRoundTrip-2   	  10000	    140000 ns/op	   40000 B/op	     608 allocs/op
BenchmarkAppend/default-2	  10000	     30000 ns/op
PASS
`

func TestParseAndMedian(t *testing.T) {
	rs, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 {
		t.Fatalf("parsed %d results, want 6", len(rs))
	}
	m := Summarise(rs)
	if got := m["BenchmarkInvoke"]; got.NsOp != 4000 || got.Allocs != 15 || got.Runs != 3 {
		t.Errorf("Invoke median = %+v, want 4000 ns, 15 allocs, 3 runs", got)
	}
	if got := m["BenchmarkFloorWSEcho"]; got.Allocs != -1 {
		t.Errorf("a line without allocs/op has Allocs %v, want -1", got.Allocs)
	}
	if _, ok := m["BenchmarkAppend/default"]; !ok {
		t.Error("sub-benchmark name lost")
	}
}

func TestRowFormat(t *testing.T) {
	m := Summarise(must(Parse(strings.NewReader(sample))))
	tests := []struct {
		name string
		row  Row
		want string
	}{
		{"ratio missed", Row{Path: "p", Brain: "BenchmarkWSRoundTrip", Floor: "BenchmarkFloorWSEcho", TargetRatio: 2, TargetAlloc: 60},
			"| p | 140.0 µs, 608 allocs | 20.0 µs (FloorWSEcho) | 7.00× | ≤ 2×, ≤ 60 allocs | no |"},
		{"absolute missed", Row{Path: "p", Brain: "BenchmarkInvoke", TargetNs: 3000, TargetAlloc: 10},
			"| p | 4.0 µs, 15 allocs |  |  | ≤ 3.0 µs, ≤ 10 allocs | no |"},
		{"absolute met", Row{Path: "p", Brain: "BenchmarkInvoke", TargetNs: 5000},
			"| p | 4.0 µs, 15 allocs |  |  | ≤ 5.0 µs | yes |"},
		{"not run", Row{Path: "p", Brain: "BenchmarkNope"}, "| p | BenchmarkNope not run | | | | |"},
		{"floor not run", Row{Path: "p", Brain: "BenchmarkInvoke", Floor: "BenchmarkNope", TargetRatio: 1},
			"| p | 4.0 µs, 15 allocs | BenchmarkNope not run | | | |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.row.Format(m); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
