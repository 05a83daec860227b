package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name   string
		events string
		failed []string
		tail   string // the last line printed
		shown  []string
		hidden []string
	}{
		{"all pass", `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"noise\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}
{"Action":"pass","Package":"p","Elapsed":0.2}
`, nil, "1 packages, 1 tests passed, none failed.", []string{"ok  \tp\t0.2s"}, []string{"noise"}},
		{"subtest fails", `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestA/x"}
{"Action":"output","Package":"p","Test":"TestA/x","Output":"    a_test.go:9: boom\n"}
{"Action":"fail","Package":"p","Test":"TestA/x","Elapsed":0}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":0}
{"Action":"fail","Package":"p","Elapsed":0.3}
{"Action":"pass","Package":"q","Elapsed":0.1}
`, []string{"p TestA/x"}, "FAILED p TestA/x", []string{"a_test.go:9: boom", "FAIL\tp\t0.3s", "ok  \tq"}, nil},
		{"count 2", `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"fail","Package":"p","Elapsed":0}
`, []string{"p TestA"}, "FAILED p TestA (2 times)", nil, nil},
		{"timeout", `{"Action":"run","Package":"p","Test":"TestSlow"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
`, []string{"p TestSlow (did not finish)"}, "FAILED p TestSlow (did not finish)", []string{"panic: test timed out"}, nil},
		{"build failure", `{"ImportPath":"p [p.test]","Action":"build-output","Output":"p/a.go:3:1: syntax error\n"}
{"ImportPath":"p [p.test]","Action":"build-fail"}
{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p","Elapsed":0,"FailedBuild":"p [p.test]"}
`, []string{"p (build failed)"}, "FAILED p (build failed)", []string{"syntax error"}, nil},
		{"package fails outside tests", `{"Action":"output","Package":"p","Output":"TestMain: no database\n"}
{"Action":"fail","Package":"p","Elapsed":0}
`, []string{"p (package failed outside any test: see its output above)"}, "FAILED p (package failed", []string{"no database"}, nil},
		// A goroutine a passed test left behind panics; test2json gives its
		// output to that test. It must be shown, and repeated at the end.
		{"panic after its test ended", `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"noise of A\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestA","Output":"panic: late boom\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"goroutine 7 [running]:\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.0s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
`, []string{"p (package failed outside any test: see its output above)"}, "FAILED p (package failed",
			[]string{"p failed outside any test; its first panic or race report:\npanic: late boom\ngoroutine 7 [running]:\nFAIL\tp\t1.0s\nFAILED"}, []string{"noise of A"}},
		{"a running test's output when the binary dies", `{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"fatal error: concurrent map writes\n"}
{"Action":"fail","Package":"p","Elapsed":1}
`, []string{"p TestB (did not finish)"}, "FAILED p TestB (did not finish)", []string{"output of TestB, which did not finish:\nfatal error: concurrent map writes"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			failed, err := summarize(strings.NewReader(tt.events), &out)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(failed, "|") != strings.Join(tt.failed, "|") {
				t.Errorf("failed = %q, want %q", failed, tt.failed)
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, tt.tail) {
				t.Errorf("last line %q, want %q; output:\n%s", last, tt.tail, out.String())
			}
			for _, s := range tt.shown {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tt.hidden {
				if strings.Contains(out.String(), s) {
					t.Errorf("output shows %q of a passing test:\n%s", s, out.String())
				}
			}
		})
	}
}

// TestRealRun: through go test -json of a real failing package, the last
// lines name the failing test.
func TestRealRun(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.24\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(`package x
import "testing"
func TestOK(t *testing.T) {}
func TestBad(t *testing.T) { t.Run("case", func(t *testing.T) { t.Fatal("wrong") }) }
`), 0o644))
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	raw, _ := cmd.Output() // fails, as it should
	var out bytes.Buffer
	failed, err := summarize(bytes.NewReader(raw), &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0] != "x TestBad/case" || !strings.HasSuffix(out.String(), "FAILED x TestBad/case\n") {
		t.Fatalf("failed = %q; output:\n%s", failed, out.String())
	}
}
