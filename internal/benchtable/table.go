package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Result is one line of `go test -bench` output.
type Result struct {
	Name   string // without the -GOMAXPROCS suffix
	NsOp   float64
	Allocs float64 // -1 when the line has no allocs/op
}

// Median is the median of a benchmark's runs.
type Median struct {
	NsOp   float64
	Allocs float64
	Runs   int
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op(.*)$`)
var allocsField = regexp.MustCompile(`([0-9.]+) allocs/op`)

// Parse reads benchmark lines and ignores everything else.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: ns/op %q: %w", m[1], m[2], err)
		}
		res := Result{Name: m[1], NsOp: ns, Allocs: -1}
		if a := allocsField.FindStringSubmatch(m[3]); a != nil {
			res.Allocs, _ = strconv.ParseFloat(a[1], 64)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Summarise returns the median of each benchmark's runs.
func Summarise(rs []Result) map[string]Median {
	ns := map[string][]float64{}
	allocs := map[string][]float64{}
	for _, r := range rs {
		ns[r.Name] = append(ns[r.Name], r.NsOp)
		allocs[r.Name] = append(allocs[r.Name], r.Allocs)
	}
	out := map[string]Median{}
	for name, v := range ns {
		out[name] = Median{NsOp: median(v), Allocs: median(allocs[name]), Runs: len(v)}
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Row is one path of the table: brain's benchmark, and either a floor with a
// target ratio or an absolute target.
type Row struct {
	Path        string
	Brain       string  // benchmark name
	Floor       string  // "" for an absolute target
	TargetRatio float64 // brain/floor at most this
	TargetNs    float64 // absolute, when Floor is ""
	TargetAlloc float64 // at most this many allocs; 0 = none
}

// Rows are the targets of issue 12, each beside its floor or peer.
var Rows = []Row{
	{Path: "artifact warm invoke", Brain: "BenchmarkEchoArtifact", Floor: "BenchmarkWazeroCall", TargetRatio: 2},
	{Path: "client round trip over WebSocket", Brain: "BenchmarkWSRoundTrip", Floor: "BenchmarkFloorWSEcho", TargetRatio: 2, TargetAlloc: 60},
	{Path: "client round trip, journaled", Brain: "BenchmarkWSRoundTripJournaled", Floor: "BenchmarkFloorWSEcho", TargetRatio: 3},
	{Path: "client round trip, journaled, vs its floor", Brain: "BenchmarkWSRoundTripJournaled", Floor: "BenchmarkFloorWSEchoJournaled"},
	{Path: "journaled floor (WS echo + 2 JetStream publishes) vs WS echo", Brain: "BenchmarkFloorWSEchoJournaled", Floor: "BenchmarkFloorWSEcho"},
	{Path: "MCP tools/call over HTTP vs mcp-go", Brain: "BenchmarkMCPCallToolHTTP", Floor: "BenchmarkMCPGoCallToolHTTP", TargetRatio: 1},
	{Path: "MCP tools/call over HTTP vs go-sdk", Brain: "BenchmarkMCPCallToolHTTP", Floor: "BenchmarkMCPGoSDKCallToolHTTP", TargetRatio: 1},
	{Path: "agent-side invoke", Brain: "BenchmarkInvoke", TargetNs: 3000, TargetAlloc: 10},
	{Path: "agent-side invoke vs JSON floor", Brain: "BenchmarkInvoke", Floor: "BenchmarkFloorJSONFuncCall"},
	// The js handle on QuickJS (issue 22 item 4's bar: under 50 µs; issue
	// 12's, on goja, was 30 µs, and still holds), beside the engine's own
	// call: what the handle's isolation and encoding cost.
	{Path: "js handle small call", Brain: "BenchmarkCallSmall", TargetNs: 30000},
	{Path: "js handle small call vs the engine's own", Brain: "BenchmarkCallSmall", Floor: "BenchmarkRunSmall"},
	{Path: "js handle: a new realm", Brain: "BenchmarkNewRealm"},
	// Issue 22: TypeScript tools on brain's JavaScript engine (QuickJS).
	{Path: "TypeScript tool warm invoke", Brain: "BenchmarkEchoScript", TargetNs: 100000},
	{Path: "TypeScript tool warm invoke vs the Go artifact", Brain: "BenchmarkEchoScript", Floor: "BenchmarkEchoArtifact", TargetRatio: 5},
	{Path: "TypeScript tool warm invoke vs wazero call", Brain: "BenchmarkEchoScript", Floor: "BenchmarkWazeroCall"},
	{Path: "TypeScript tool provisioning, warm cache", Brain: "BenchmarkProvisionScriptWarmCache", TargetNs: 50e6},
	{Path: "TypeScript tool: a new session's realm", Brain: "BenchmarkNewSessionScript"},
	{Path: "JavaScript engine small call (QuickJS, a reused realm)", Brain: "BenchmarkRunSmall", TargetNs: 50000},
	{Path: "JavaScript engine: a fresh VM", Brain: "BenchmarkNew"},
	{Path: "native tool invoke vs JSON floor", Brain: "BenchmarkInvokeNative", Floor: "BenchmarkFloorJSONFuncCall"},
	{Path: "journal append (default sync)", Brain: "BenchmarkAppend/default"},
}

// Format renders the row from the medians; a missing benchmark says so.
func (r Row) Format(m map[string]Median) string {
	b, ok := m[r.Brain]
	if !ok {
		return fmt.Sprintf("| %s | %s not run | | | | |", r.Path, r.Brain)
	}
	brain := fmtNs(b.NsOp) + fmtAllocs(b.Allocs)
	met := "yes"
	target := ""
	floor := ""
	ratio := ""
	switch {
	case r.Floor != "":
		f, ok := m[r.Floor]
		if !ok {
			return fmt.Sprintf("| %s | %s | %s not run | | | |", r.Path, brain, r.Floor)
		}
		floor = fmt.Sprintf("%s (%s)", fmtNs(f.NsOp), strings.TrimPrefix(r.Floor, "Benchmark"))
		q := b.NsOp / f.NsOp
		ratio = fmt.Sprintf("%.2f×", q)
		if r.TargetRatio > 0 {
			target = fmt.Sprintf("≤ %g×", r.TargetRatio)
			if q > r.TargetRatio {
				met = "no"
			}
		} else {
			met = ""
		}
	case r.TargetNs > 0:
		target = "≤ " + fmtNs(r.TargetNs)
		if b.NsOp > r.TargetNs {
			met = "no"
		}
	default:
		met = ""
	}
	if r.TargetAlloc > 0 {
		target += fmt.Sprintf(", ≤ %g allocs", r.TargetAlloc)
		if b.Allocs < 0 || b.Allocs > r.TargetAlloc {
			met = "no"
		}
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", r.Path, brain, floor, ratio, target, met)
}

func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func fmtAllocs(a float64) string {
	if a < 0 {
		return ""
	}
	return fmt.Sprintf(", %g allocs", a)
}
