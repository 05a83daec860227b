package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/brainrt/brain/examples/tools/execrun"
	"github.com/brainrt/brain/examples/tools/toolstest"
	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/proc"
)

func TestExecRun(t *testing.T) {
	ws := newWorkspace(t)
	writeFiles(t, ws, map[string]string{"sub/marker": ""})
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Join(ws, "sub"), proc.DefaultUser, proc.DefaultUser); err != nil {
			t.Fatal(err)
		}
	}
	envs := newBoth(t, []kernel.Provider{execProvider(proc.Grants{Root: ws, Allow: []string{"echo", "true", "sh"}, MaxOutputBytes: 64})}, nil)
	envs.MustAttach(t, kernel.Attachment{Tool: execrun.Tool})
	ok := func(exit int, stdout, stderr string) map[string]any {
		return map[string]any{"exit_code": exit, "stdout": stdout, "stderr": stderr, "truncated": false}
	}
	envs.Run(t, []toolstest.Case{
		{Name: "echo", Tool: "exec.run", Input: `{"program":"echo","args":["hello","world"]}`, Want: ok(0, "hello world\n", "")},
		{Name: "true", Tool: "exec.run", Input: `{"program":"true"}`, Want: ok(0, "", "")},
		{Name: "no shell: arguments are text", Tool: "exec.run", Input: `{"program":"echo","args":["$(id)",";","rm","-rf","*"]}`, Want: ok(0, "$(id) ; rm -rf *\n", "")},
		{Name: "non-zero exit and stderr", Tool: "exec.run", Input: `{"program":"sh","args":["-c","echo oops >&2; exit 3"]}`, Want: ok(3, "", "oops\n")},
		{Name: "stdin", Tool: "exec.run", Input: `{"program":"sh","args":["-c","read x; echo got $x"],"stdin":"abc\n"}`, Want: ok(0, "got abc\n", "")},
		{Name: "working directory", Tool: "exec.run", Input: `{"program":"sh","args":["-c","echo *"],"dir":"sub"}`, Want: ok(0, "marker\n", "")},
		{Name: "output over the cap", Tool: "exec.run",
			Input: `{"program":"sh","args":["-c","i=0; while [ $i -lt 100 ]; do echo 0123456789; i=$((i+1)); done"]}`,
			Check: func(t testing.TB, out protocol.Outcome) {
				var o execrun.Output
				if err := json.Unmarshal(out.Value, &o); err != nil {
					t.Fatal(err)
				}
				if !o.Truncated || len(o.Stdout) != 64 || o.ExitCode != 0 {
					t.Errorf("output = %+v, want 64 bytes of stdout and truncated", o)
				}
			}},
		{Name: "program not allowed", Tool: "exec.run", Input: `{"program":"cat","args":["/etc/passwd"]}`, WantCode: protocol.CodeDenied, WantMessage: []string{"cat"}},
		{Name: "absolute path not allowed", Tool: "exec.run", Input: `{"program":"/bin/cat"}`, WantCode: protocol.CodeDenied},
		{Name: "directory outside the workspace", Tool: "exec.run", Input: `{"program":"true","dir":"../"}`, WantCode: protocol.CodePathEscape},
		{Name: "deadline", Tool: "exec.run", Input: `{"program":"sh","args":["-c","while :; do :; done"],"timeout_ms":300}`, WantCode: protocol.CodeTimeout},
		{Name: "negative timeout", Tool: "exec.run", Input: `{"program":"true","timeout_ms":-1}`, WantCode: protocol.CodeInvalidArgument},
		{Name: "missing program", Tool: "exec.run", Input: `{"args":["x"]}`, WantCode: protocol.CodeInvalidInput},
	})
}
