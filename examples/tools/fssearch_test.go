package tools_test

import (
	"strings"
	"testing"

	"github.com/brainrt/brain/examples/tools/fssearch"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
)

func TestFSSearch(t *testing.T) {
	ws := t.TempDir()
	long := "hello " + strings.Repeat("y", 400)
	writeFiles(t, ws, map[string]string{
		"src/main.go":             "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"src/util.go":             "package main\n\nfunc helper() int { return 42 }\n",
		"README.md":               "# Demo\nHello world\nhello again\n",
		"data.bin":                "\x00\x01hello\x00",
		".git/config":             "hello from git",
		"notes/deep/dir/todo.txt": "TODO: hello\r\nsecond\r\n",
		"big.log":                 strings.Repeat("hello\n", fssearch.MaxFileBytes/6+1),
		"long.txt":                long,
	})
	envs := newBoth(t, []kernel.Provider{fsProvider(fsroot.Grants{Root: ws})}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: fssearch.Tool})
	skipped := []map[string]any{
		{"path": "big.log", "reason": "larger than 1048576 bytes (1048578 bytes)"},
		{"path": "data.bin", "reason": "binary (not UTF-8 text)"},
	}
	match := func(path string, line int, text string) map[string]any {
		return map[string]any{"path": path, "line": line, "text": text}
	}
	envs.Run(t, []toolstest.Case{
		{Name: "whole workspace", Tool: "fs.search", Input: `{"pattern":"hello"}`, Want: map[string]any{
			"matches": []any{
				match("README.md", 3, "hello again"),
				match("long.txt", 1, long[:fssearch.MaxLineBytes]+"…"),
				match("notes/deep/dir/todo.txt", 1, "TODO: hello"),
				match("src/main.go", 4, "\tprintln(\"hello\")"),
			},
			"files_searched": 5, "truncated": false, "skipped_files": 2, "skipped": skipped,
		}},
		{Name: "ignore case", Tool: "fs.search", Input: `{"pattern":"^HELLO","ignore_case":true,"path":"."}`, Want: map[string]any{
			"matches": []any{
				match("README.md", 2, "Hello world"),
				match("README.md", 3, "hello again"),
				match("long.txt", 1, long[:fssearch.MaxLineBytes]+"…"),
			},
			"files_searched": 5, "truncated": false, "skipped_files": 2, "skipped": skipped,
		}},
		{Name: "glob on the file name", Tool: "fs.search", Input: `{"pattern":"^func ","glob":"*.go"}`, Want: map[string]any{
			"matches":        []any{match("src/main.go", 3, "func main() {"), match("src/util.go", 3, "func helper() int { return 42 }")},
			"files_searched": 2, "truncated": false, "skipped_files": 0,
		}},
		{Name: "glob with **", Tool: "fs.search", Input: `{"pattern":"TODO","glob":"notes/**/*.txt"}`, Want: map[string]any{
			"matches":        []any{match("notes/deep/dir/todo.txt", 1, "TODO: hello")},
			"files_searched": 1, "truncated": false, "skipped_files": 0,
		}},
		{Name: "in a directory", Tool: "fs.search", Input: `{"pattern":"return \\d+","path":"src"}`, Want: map[string]any{
			"matches":        []any{match("src/util.go", 3, "func helper() int { return 42 }")},
			"files_searched": 2, "truncated": false, "skipped_files": 0,
		}},
		{Name: "no match", Tool: "fs.search", Input: `{"pattern":"zebra","path":"src"}`, Want: map[string]any{
			"matches": []any{}, "files_searched": 2, "truncated": false, "skipped_files": 0,
		}},
		{Name: "stops at max_matches", Tool: "fs.search", Input: `{"pattern":"hello","max_matches":1}`, Check: func(t testing.TB, out protocol.Outcome) {
			if !strings.Contains(string(out.Value), `"truncated":true`) || strings.Count(string(out.Value), `"line"`) != 1 {
				t.Errorf("value = %s, want one match and truncated", out.Value)
			}
		}},
		{Name: "invalid regular expression", Tool: "fs.search", Input: `{"pattern":"func (("}`, WantCode: "invalid_pattern", WantMessage: []string{"missing closing )"},
			NoTwin: "Go's RE2 parser and JavaScript's word their syntax errors differently (the code is the same)"},
		{Name: "invalid glob", Tool: "fs.search", Input: `{"pattern":"x","glob":"src/[a"}`, WantCode: "invalid_glob"},
		{Name: "max_matches out of range", Tool: "fs.search", Input: `{"pattern":"x","max_matches":5000}`, WantCode: protocol.CodeInvalidArgument},
		{Name: "path outside the workspace", Tool: "fs.search", Input: `{"pattern":"x","path":"../"}`, WantCode: protocol.CodePathEscape},
		{Name: "missing directory", Tool: "fs.search", Input: `{"pattern":"x","path":"nope"}`, WantCode: protocol.CodeNotFound},
	})
}
