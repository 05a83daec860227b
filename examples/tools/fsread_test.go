package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/examples/tools/fsread"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/fsroot"
)

func TestFSRead(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "workspace")
	writeFiles(t, ws, map[string]string{
		"notes.txt":     "hello from the workspace\n",
		"docs/a.md":     "# A\n",
		"empty.txt":     "",
		"image.bin":     "\x89PNG\r\n\x1a\n\xff\xfe",
		"big.txt":       strings.Repeat("x", 1025),
		"docs/utf8.txt": "héllo — ✓",
	})
	writeFiles(t, base, map[string]string{"secret.txt": "outside the workspace"})
	if err := os.Symlink("../secret.txt", filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	envs := newBoth(t, []kernel.Provider{fsProvider(fsroot.Grants{Root: ws, MaxFileBytes: 1024})}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: fsread.Tool})
	noSecret := func(t testing.TB, out protocol.Outcome) {
		if strings.Contains(string(out.Value), "outside") || (out.Err != nil && (strings.Contains(out.Err.Message, "outside the workspace") || strings.Contains(out.Err.Message, base))) {
			t.Errorf("the outcome leaks the outside file or the host path: %+v %s", out.Err, out.Value)
		}
	}
	envs.Run(t, []toolstest.Case{
		{Name: "reads a file", Tool: "fs.read", Input: `{"path":"notes.txt"}`,
			Want: `{"text":"hello from the workspace\n","bytes":25}`},
		{Name: "reads a nested UTF-8 file", Tool: "fs.read", Input: `{"path":"docs/utf8.txt"}`,
			Want: map[string]any{"text": "héllo — ✓", "bytes": len("héllo — ✓")}},
		{Name: "reads an empty file", Tool: "fs.read", Input: `{"path":"empty.txt"}`, Want: `{"text":"","bytes":0}`},
		{Name: "dot-dot escape", Tool: "fs.read", Input: `{"path":"../x"}`, WantCode: protocol.CodePathEscape, Check: noSecret},
		{Name: "dot-dot to a real outside file", Tool: "fs.read", Input: `{"path":"docs/../../secret.txt"}`, WantCode: protocol.CodePathEscape, Check: noSecret},
		{Name: "absolute path", Tool: "fs.read", Input: `{"path":"/etc/passwd"}`, WantCode: protocol.CodePathEscape, Check: noSecret},
		{Name: "symlink out of the workspace", Tool: "fs.read", Input: `{"path":"link.txt"}`, WantCode: protocol.CodePathEscape, Check: noSecret},
		{Name: "missing file", Tool: "fs.read", Input: `{"path":"nope.txt"}`, WantCode: protocol.CodeNotFound},
		{Name: "binary file", Tool: "fs.read", Input: `{"path":"image.bin"}`, WantCode: "not_text", WantMessage: []string{"image.bin", "not UTF-8"}},
		{Name: "file over the grant's size", Tool: "fs.read", Input: `{"path":"big.txt"}`, WantCode: protocol.CodeTooLarge},
		{Name: "input of the wrong type", Tool: "fs.read", Input: `{"path":7}`, WantCode: protocol.CodeInvalidInput},
		{Name: "missing input field", Tool: "fs.read", Input: `{}`, WantCode: protocol.CodeInvalidInput},
		{Name: "unknown input field", Tool: "fs.read", Input: `{"path":"notes.txt","mode":"rw"}`, WantCode: protocol.CodeInvalidInput},
	})
}
