// Command testsummary reads `go test -json` on stdin and prints a short
// log: one line per package (ok or FAIL), the output of every failing
// test, and at the end the names of the failing tests, so that a red run
// says what failed in its last lines. It exits 1 if anything failed, 0
// otherwise. test.sh pipes the suite through it:
//
//	go test -json ./... | go run ./internal/testsummary [-o failed.txt]
//
// -o also writes the failing names, one per line, to a file.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	out := flag.String("o", "", "also write the failing tests' names to this file, one per line")
	flag.Parse()
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if *out != "" {
		text := ""
		if len(failed) > 0 {
			text = strings.Join(failed, "\n") + "\n"
		}
		if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	if len(failed) > 0 {
		os.Exit(1)
	}
}

// event is one line of test2json (go doc test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output and build-fail
	FailedBuild string // a package's fail: the import path whose build failed
}

// maxLines bounds what is kept of one test's or package's output.
const maxLines = 400

// buffer keeps the last maxLines lines of one test's output.
type buffer struct {
	lines   []string
	dropped int
}

func (b *buffer) add(s string) {
	b.lines = append(b.lines, s)
	if len(b.lines) > maxLines {
		b.lines = b.lines[1:]
		b.dropped++
	}
}

func (b *buffer) write(w io.Writer) {
	if b.dropped > 0 {
		fmt.Fprintf(w, "    [%d earlier lines not shown]\n", b.dropped)
	}
	for _, l := range b.lines {
		io.WriteString(w, l)
	}
}

// summarize copies a digest of the events in r to w and returns the names
// of what failed: "pkg TestName", or "pkg (build failed)" / "pkg (package
// failed: ...)" when no test is to blame.
func summarize(r io.Reader, w io.Writer) ([]string, error) {
	bufs := map[string]*buffer{} // pkg + "\x00" + test ("" for the package)
	running := map[string][]string{}
	alarm := map[string]*buffer{} // per package: from its first panic or race report on
	type lateAlarm struct {
		pkg string
		out *buffer
	}
	var late []lateAlarm            // shown again at the very end: a log's tail is what gets read
	failedTests := map[string]int{} // per package
	var failed []string
	passed, pkgs := 0, 0
	buf := func(key string) *buffer {
		b := bufs[key]
		if b == nil {
			b = &buffer{}
			bufs[key] = b
		}
		return b
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // not an event: pass it through
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "build-output":
			buf(e.ImportPath + "\x00build").add(e.Output)
		case "build-fail":
			fmt.Fprintf(w, "FAIL\t%s [build failed]\n", e.ImportPath)
			buf(e.ImportPath + "\x00build").write(w)
			delete(bufs, e.ImportPath+"\x00build")
		case "run":
			running[e.Package] = append(running[e.Package], e.Test)
		case "output":
			if e.Test != "" && !slices.Contains(running[e.Package], e.Test) {
				// Output of a test already ended (a goroutine it left
				// behind, a race or panic the runtime printed after it)
				// is the package's: kept, it is shown if the package fails.
				key = e.Package + "\x00"
			}
			buf(key).add(e.Output)
			if alarm[e.Package] == nil && startsAlarm(e.Output) {
				alarm[e.Package] = &buffer{}
			}
			if a := alarm[e.Package]; a != nil && len(a.lines) < alarmLines {
				a.lines = append(a.lines, e.Output)
			}
		case "pass", "skip":
			if e.Test == "" {
				pkgs++
				if e.Action == "pass" {
					fmt.Fprintf(w, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
				}
			} else {
				passed++
				running[e.Package] = slices.DeleteFunc(running[e.Package], func(n string) bool { return n == e.Test })
			}
			delete(bufs, key)
		case "fail":
			if e.Test != "" {
				running[e.Package] = slices.DeleteFunc(running[e.Package], func(n string) bool { return n == e.Test })
				fmt.Fprintf(w, "--- FAIL: %s %s (%.2fs)\n", e.Package, e.Test, e.Elapsed)
				buf(key).write(w)
				delete(bufs, key)
				// A parent fails with its failing subtests: name the leaves.
				name := e.Package + " " + e.Test
				if !slices.ContainsFunc(failed, func(n string) bool { return isParentOf(name, n) }) {
					failed = append(failed, name)
				}
				failedTests[e.Package]++
				continue
			}
			pkgs++
			fmt.Fprintf(w, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
			for _, n := range running[e.Package] { // what the running tests printed
				if b := bufs[e.Package+"\x00"+n]; b != nil {
					fmt.Fprintf(w, "  output of %s, which did not finish:\n", n)
					b.write(w)
				}
			}
			buf(key).write(w)
			delete(bufs, key)
			for _, n := range running[e.Package] { // a timeout or a panic
				failed = append(failed, e.Package+" "+n+" (did not finish)")
				failedTests[e.Package]++
			}
			switch {
			case e.FailedBuild != "":
				failed = append(failed, e.Package+" (build failed)")
			case failedTests[e.Package] == 0:
				failed = append(failed, e.Package+" (package failed outside any test: see its output above)")
				if a := alarm[e.Package]; a != nil {
					late = append(late, lateAlarm{e.Package, a})
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	fmt.Fprintf(w, "\n%d packages, %d tests passed", pkgs, passed)
	if len(failed) == 0 {
		fmt.Fprintln(w, ", none failed.")
		return nil, nil
	}
	// With -count, a test can fail more than once: name it once, with how
	// many times.
	times := map[string]int{}
	var names []string
	for _, n := range failed {
		if times[n] == 0 {
			names = append(names, n)
		}
		times[n]++
	}
	fmt.Fprintf(w, ", %d failed:\n", len(failed))
	for _, l := range late {
		fmt.Fprintf(w, "%s failed outside any test; its first panic or race report:\n", l.pkg)
		l.out.write(w)
	}
	for _, n := range names {
		if times[n] > 1 {
			fmt.Fprintf(w, "FAILED %s (%d times)\n", n, times[n])
		} else {
			fmt.Fprintf(w, "FAILED %s\n", n)
		}
	}
	return names, nil
}

// alarmLines bounds the excerpt of a package's first panic or race
// report repeated at the end of the summary.
const alarmLines = 60

// startsAlarm reports whether a line of output begins a panic, a fatal
// runtime error or a race report.
func startsAlarm(line string) bool {
	for _, p := range []string{"panic: ", "fatal error: ", "WARNING: DATA RACE", "testing: race detected"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// isParentOf reports whether test b ("pkg Test/sub") is a subtest of a.
func isParentOf(a, b string) bool { return strings.HasPrefix(b, a+"/") }
