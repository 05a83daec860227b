// Command benchtable prints brain's benchmarks beside their floors and peers
// as ratios of medians, from `go test -bench` output files (bench.sh runs it).
//
//	go run ./internal/benchtable brain.txt anchors.txt
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtable <bench output>...")
		os.Exit(2)
	}
	var results []Result
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
		rs, err := Parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchtable: %s: %v\n", path, err)
			os.Exit(1)
		}
		results = append(results, rs...)
	}
	write(os.Stdout, Summarise(results))
}

func write(w io.Writer, m map[string]Median) {
	fmt.Fprintln(w, "| path | brain | floor or peer | ratio | target | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, row := range Rows {
		fmt.Fprintln(w, row.Format(m))
	}
}
