package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestClusterFailureTableNamesItsTests: every row of docs/cluster.md's
// failure table names at least one test, every test it names exists, and
// every subtest it quotes (`TestX` ("the subtest's name")) is a t.Run of
// that test's file — a row cannot point at a test that was renamed or
// never written.
func TestClusterFailureTableNamesItsTests(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "cluster.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Failures\n")
	if !ok {
		t.Fatal("docs/cluster.md has no Failures section")
	}
	table, _, _ = strings.Cut(table, "\n## ")

	// Where each test is defined: its file's text.
	defined := map[string]string{}
	funcRE := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "third_party" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	named := regexp.MustCompile("`(Test\\w+)`(?:\\s*\\(\"([^\"]+)\")?")
	rows := 0
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| what happens") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Errorf("a row without three cells: %s", line)
			continue
		}
		rows++
		tests := named.FindAllStringSubmatch(cells[2], -1)
		if len(tests) == 0 {
			t.Errorf("the row %q names no test", cells[0])
		}
		for _, m := range tests {
			src, ok := defined[m[1]]
			if !ok {
				t.Errorf("the row %q names %s, which no test file defines", cells[0], m[1])
				continue
			}
			if sub := strings.TrimSpace(strings.TrimSuffix(m[2], "…")); sub != "" && !strings.Contains(src, `t.Run("`+sub) {
				t.Errorf("the row %q names %s (%q), which is no subtest of it", cells[0], m[1], sub)
			}
		}
	}
	if rows < 10 {
		t.Fatalf("docs/cluster.md's failure table has %d rows", rows)
	}
}
