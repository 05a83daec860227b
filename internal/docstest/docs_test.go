package docstest

// TestDocs runs the shell blocks of README.md and docs/*.md as a newcomer
// would paste them into one terminal.
//
// Conventions (also in docs/operations.md, "The docs test"):
//
//   - A fenced block whose info string is sh, bash or shell is run. Any
//     other fence (text, json, yaml, go, none) is not: use ```text for
//     example output.
//   - Each file runs in its own scratch copy of the repository (the files
//     of the module, without .git and without what brain creates:
//     brain-data, workspace, artifacts at the top), with a `brain` built
//     from the repository first on PATH. The blocks of one file run in
//     order in ONE bash (set -euo pipefail), so a `cd` or a variable
//     carries over, as in a terminal. A failing command fails the test,
//     naming the file and line of its block.
//   - `<!-- docs-test: skip (reason) -->` on the line before a fence (blank
//     lines between are allowed) skips that block; the reason is required.
//   - `<!-- docs-test: background until "TEXT" -->` runs the block in the
//     background in its own process group, waits (at most 120 s) until its
//     output contains TEXT, and goes on; if it exits first, the test fails
//     with its output. Every background block is stopped with SIGINT (then
//     SIGKILL after 10 s) when the file is done, pass or fail.
//   - Files run one after another (they may use the same ports). The whole
//     test is bounded (BRAIN_DOCS_TEST_TIMEOUT, default 10m). The scripts
//     run with GOFLAGS=-trimpath, so that `go run` in a fresh copy reuses
//     the build cache.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// block is one fenced shell block.
type block struct {
	file       string
	line       int // of the opening fence, from 1
	code       string
	skip       string // the reason, when skipped
	background string // TEXT to wait for, when run in the background
}

var (
	markerRE = regexp.MustCompile(`^<!--\s*docs-test:\s*(.*?)\s*-->$`)
	skipRE   = regexp.MustCompile(`^skip\s*\((.+)\)$`)
	bgRE     = regexp.MustCompile(`^background\s+until\s+"([^"]+)"$`)
	fenceRE  = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
)

// parse extracts the shell blocks of one markdown file. A marker that is
// malformed, or not followed by a shell block, is an error: a typo must not
// run (or skip) something silently.
func parse(name string, src []byte) ([]block, error) {
	var out []block
	var pending string // the last marker's text
	pendingLine := 0
	lines := strings.Split(string(src), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r")
		trimmed := strings.TrimSpace(l)
		if m := markerRE.FindStringSubmatch(trimmed); m != nil {
			if pending != "" {
				return nil, fmt.Errorf("%s:%d: docs-test marker not followed by a shell block (next marker at line %d)", name, pendingLine, i+1)
			}
			pending, pendingLine = m[1], i+1
			continue
		}
		f := fenceRE.FindStringSubmatch(l)
		if f == nil {
			if trimmed != "" && pending != "" {
				return nil, fmt.Errorf("%s:%d: docs-test marker not followed by a shell block", name, pendingLine)
			}
			continue
		}
		indent, fence, lang := f[1], f[2], f[3]
		start := i + 1
		var body []string
		for i++; i < len(lines); i++ {
			c := strings.TrimRight(lines[i], "\r")
			if strings.HasPrefix(strings.TrimSpace(c), fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(c), fence[:1])) == "" {
				break
			}
			body = append(body, strings.TrimPrefix(c, indent))
		}
		isShell := lang == "sh" || lang == "bash" || lang == "shell"
		if !isShell {
			if pending != "" {
				return nil, fmt.Errorf("%s:%d: docs-test marker before a %q block, which is never run", name, pendingLine, lang)
			}
			continue
		}
		b := block{file: name, line: start, code: strings.Join(body, "\n")}
		if pending != "" {
			switch {
			case skipRE.MatchString(pending):
				b.skip = skipRE.FindStringSubmatch(pending)[1]
			case bgRE.MatchString(pending):
				b.background = bgRE.FindStringSubmatch(pending)[1]
			default:
				return nil, fmt.Errorf(`%s:%d: unknown docs-test marker %q (want skip (reason) or background until "TEXT")`, name, pendingLine, pending)
			}
			pending = ""
		}
		out = append(out, b)
	}
	if pending != "" {
		return nil, fmt.Errorf("%s:%d: docs-test marker at the end of the file", name, pendingLine)
	}
	return out, nil
}

// TestParse checks the block extraction and the markers.
func TestParse(t *testing.T) {
	src := "# t\n\n```sh\necho one\n```\n\n<!-- docs-test: skip (needs a key) -->\n```sh\nexit 1\n```\n" +
		"<!-- docs-test: background until \"ready\" -->\n\n```bash\nserve\n```\n```text\nnot run\n```\n" +
		"1. a step\n   ```sh\n   echo indented\n   ```\n"
	bs, err := parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []block{
		{file: "t.md", line: 3, code: "echo one"},
		{file: "t.md", line: 8, code: "exit 1", skip: "needs a key"},
		{file: "t.md", line: 13, code: "serve", background: "ready"},
		{file: "t.md", line: 20, code: "echo indented"},
	}
	if fmt.Sprint(bs) != fmt.Sprint(want) {
		t.Errorf("parse = %+v\nwant    %+v", bs, want)
	}
	for _, bad := range []struct{ name, src, want string }{
		{"no reason", "<!-- docs-test: skip -->\n```sh\nx\n```\n", "unknown docs-test marker"},
		{"before text", "<!-- docs-test: skip (x) -->\n```text\nx\n```\n", "never run"},
		{"dangling", "<!-- docs-test: skip (x) -->\nprose\n", "not followed by a shell block"},
		{"at end", "<!-- docs-test: skip (x) -->\n", "at the end of the file"},
		{"unquoted", "<!-- docs-test: background until ready -->\n```sh\nx\n```\n", "unknown docs-test marker"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := parse("t.md", []byte(bad.src)); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("err = %v, want %q", err, bad.want)
			}
		})
	}
}

func TestDocs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	limit := 10 * time.Minute
	if v := os.Getenv("BRAIN_DOCS_TEST_TIMEOUT"); v != "" {
		if limit, err = time.ParseDuration(v); err != nil {
			t.Fatalf("BRAIN_DOCS_TEST_TIMEOUT: %v", err)
		}
	}
	if d, ok := t.Deadline(); ok && time.Until(d)-30*time.Second < limit {
		limit = time.Until(d) - 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	machineWide(t, ctx)

	files := []string{"README.md"}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	if only := os.Getenv("BRAIN_DOCS_TEST_ONLY"); only != "" { // for iterating on one page
		files = strings.Split(only, ",")
	}
	var all [][]block
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := parse(f, src)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, bs)
	}

	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(bin, "brain"), "./cmd/brain")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/brain: %v\n%s", err, out)
	}
	for i, f := range files {
		bs := all[i]
		t.Run(f, func(t *testing.T) {
			runnable := 0
			for _, b := range bs {
				if b.skip == "" {
					runnable++
				}
			}
			if runnable == 0 {
				t.Logf("%s: no shell block to run (%d skipped)", f, len(bs))
				return
			}
			runFile(t, ctx, root, bin, bs)
		})
	}
}

// runFile runs the blocks of one file in a scratch copy of the repository.
func runFile(t *testing.T, ctx context.Context, root, bin string, bs []block) {
	scratch := t.TempDir()
	if err := copyRepo(root, scratch); err != nil {
		t.Fatal(err)
	}
	meta := t.TempDir() // the script, block files, background logs: outside the copy
	var sb strings.Builder
	var bgLogs [][2]string // file:line, log path
	fmt.Fprintf(&sb, `set -euo pipefail
__pids=()
__stop() {
  for p in "${__pids[@]}"; do kill -INT -- "-$p" 2>/dev/null || true; done
  for p in "${__pids[@]}"; do
    for _ in $(seq 100); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || true
  done
}
trap __stop EXIT
__wait_for() { # pid log text: bounded poll until the log contains text
  for _ in $(seq 1200); do
    if grep -qF -- "$3" "$2"; then return 0; fi
    if ! kill -0 "$1" 2>/dev/null; then echo "docs-test: the background block exited before printing \"$3\":"; cat "$2"; return 1; fi
    sleep 0.1
  done
  echo "docs-test: no \"$3\" within 120 s:"; cat "$2"; return 1
}
`)
	for i, b := range bs {
		if b.skip != "" {
			fmt.Fprintf(&sb, "\n# %s:%d skipped: %s\n", b.file, b.line, b.skip)
			continue
		}
		bf := filepath.Join(meta, fmt.Sprintf("block%d.sh", i))
		if err := os.WriteFile(bf, []byte(b.code+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "\necho %s > %s\n", shellQuote(fmt.Sprintf("%s:%d", b.file, b.line)), filepath.Join(meta, "current"))
		fmt.Fprintf(&sb, "echo %s\n", shellQuote(fmt.Sprintf("::docs-test %s:%d%s", b.file, b.line, map[bool]string{true: " (background)"}[b.background != ""])))
		if b.background != "" {
			log := filepath.Join(meta, fmt.Sprintf("block%d.log", i))
			fmt.Fprintf(&sb, ": > %s\nsetsid bash -euo pipefail %s > %s 2>&1 < /dev/null &\n__pids+=($!)\necho $! >> %s\n", log, bf, log, filepath.Join(meta, "pids"))
			bgLogs = append(bgLogs, [2]string{fmt.Sprintf("%s:%d", b.file, b.line), log})
			fmt.Fprintf(&sb, "__wait_for $! %s %s\n", log, shellQuote(b.background))
			continue
		}
		fmt.Fprintf(&sb, "source %s\n", bf)
	}
	for _, l := range bgLogs { // what the background blocks printed, for the log
		fmt.Fprintf(&sb, "echo %s; head -n 15 %s\n", shellQuote("::docs-test output of the background block at "+l[0]+" (first lines)"), l[1])
	}
	sb.WriteString("\necho '::docs-test done'\n")
	script := filepath.Join(meta, "script.sh")
	if err := os.WriteFile(script, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = scratch
	// -trimpath: compiled packages do not depend on the directory, so each
	// page's `go run ./cmd/brain` in its fresh copy reuses the build cache
	// instead of compiling brain again.
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BRAIN_DOCS_TEST=1",
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 15 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	// Whatever happened, no background block outlives the test.
	if pids, _ := os.ReadFile(filepath.Join(meta, "pids")); len(pids) > 0 {
		sc := bufio.NewScanner(bytes.NewReader(pids))
		for sc.Scan() {
			if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
	if err != nil {
		at, _ := os.ReadFile(filepath.Join(meta, "current"))
		t.Fatalf("the block at %s failed (%v); output:\n%s", strings.TrimSpace(string(at)), err, tail(out.String(), 80))
	}
	if !strings.Contains(out.String(), "::docs-test done") {
		t.Fatalf("the script stopped early; output:\n%s", tail(out.String(), 80))
	}
	t.Logf("output:\n%s", tail(out.String(), 400))
}

// copyRepo copies the module at root to dst, leaving out .git, node_modules
// and what brain creates in a working directory.
func copyRepo(root, dst string) error {
	skipTop := map[string]bool{".git": true, "brain-data": true, "workspace": true, "artifacts": true, "brain-env-data": true}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() && (skipTop[rel] || d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return nil // sockets and the like
	})
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// TestGitignore: what brain and the docs' commands create in a working
// directory is ignored by git, and the example workspace is not.
func TestGitignore(t *testing.T) {
	root, _ := filepath.Abs("../..")
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		b, err := os.ReadFile(filepath.Join(root, ".gitignore"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"brain-data/", "/workspace/", "/artifacts/"} {
			if !strings.Contains(string(b), "\n"+want+"\n") {
				t.Errorf(".gitignore lacks %s", want)
			}
		}
		return
	}
	type path struct {
		path    string
		ignored bool
	}
	paths := []path{
		{"brain-data/tokens.json", true},
		{"workspace/notes.txt", true},
		{"artifacts/fs.read.tool.json", true},
		{"brain", true},
		{"kernel-data/tokens.json", true},
		{"examples/workspace/notes.txt", false},
		{"cmd/brain/main.go", false},
	}
	// And what the docs' commands write: every --data directory, every
	// `brain build -o` directory and `go build -o` binary they name.
	for _, p := range docsOutputs(t, root) {
		paths = append(paths, path{p, true})
	}
	for _, tt := range paths {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", tt.path)
		cmd.Dir = root
		err := cmd.Run()
		if got := err == nil; got != tt.ignored {
			t.Errorf("git check-ignore %s: ignored = %v, want %v (%v)", tt.path, got, tt.ignored, err)
		}
	}
}

// docsOutputs returns what the commands of README.md and docs/ write in
// the repository: a file in each --data directory and `brain build -o`
// directory they name, and each `go build -o` binary.
func docsOutputs(t *testing.T, root string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	out := map[string]bool{}
	flag := regexp.MustCompile(`(--data|\s-o)\s+([a-z][a-z0-9_.-]*)(\s|$)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, m := range flag.FindAllStringSubmatch(line, -1) {
				if m[1] != "--data" && strings.Contains(line, "go build") {
					out[m[2]] = true // a binary
				} else {
					out[m[2]+"/x"] = true
				}
			}
		}
	}
	if !out["chat-data/x"] || !out["ts-artifacts/x"] {
		t.Fatalf("the docs' outputs %v lack chat-data and ts-artifacts, which docs/console.md and the README write", out)
	}
	return slices.Sorted(maps.Keys(out))
}
