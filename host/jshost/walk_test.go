package jshost_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/tool"
)

// TestWalkIsTheHandles: a TypeScript tool's fs.walk is the fs handle's
// Walk — the grant's max_entries bounds the whole walk (too_large, op
// walk), where the prelude's own walk, a readDir a directory, listed any
// number; entries come in lexical order, SKIP_DIR skips a directory, and
// an error the callback throws ends the walk as it is.
func TestWalkIsTheHandles(t *testing.T) {
	root := t.TempDir()
	for d := range 3 {
		for f := range 5 {
			p := filepath.Join(root, fmt.Sprintf("d%d", d), fmt.Sprintf("f%d.txt", f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	src := register + `
register({ name: "t.walk", requires: ["fs"], async run({ handles }, input) {
  const seen = [];
  try {
    await handles.fs.walk(".", (p, info) => {
      seen.push(p + (info.isDir ? "/" : ""));
      if (input.skip && p === input.skip) return handles.fs.SKIP_DIR;
      if (input.throwAt && p === input.throwAt) throw new Error("stop at " + p);
    });
  } catch (e) {
    return { seen, error: (e.code || "") + " " + (e.op || "") + " " + e.message };
  }
  return { seen };
} });`
	walk := func(maxEntries int, input string) string {
		fs, err := fsroot.New(fsroot.Grants{Root: root, MaxEntries: maxEntries})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		hs := tool.Handles{FS: fs}
		inst := provision(t, nil, payload{name: "t.walk", requires: []handle.Kind{handle.KindFS}, src: src}, hs)
		out := invoke(context.Background(), inst, hs, "s", "c1", input)
		if out.Err != nil {
			t.Fatalf("walk: %+v", out.Err)
		}
		return string(out.Value)
	}
	if got := walk(5, `{}`); !strings.Contains(got, `"error":"too_large walk `) {
		t.Errorf("a walk past max_entries 5: %s, want too_large from the walk", got)
	}
	got := walk(0, `{"skip":"d1"}`)
	want := `{"seen":["./","d0/","d0/f0.txt","d0/f1.txt","d0/f2.txt","d0/f3.txt","d0/f4.txt","d1/","d2/","d2/f0.txt","d2/f1.txt","d2/f2.txt","d2/f3.txt","d2/f4.txt"]}`
	if got != want {
		t.Errorf("walk skipping d1:\n%s\nwant\n%s", got, want)
	}
	if got := walk(0, `{"throwAt":"d0/f1.txt"}`); !strings.Contains(got, `"error":"  stop at d0/f1.txt"`) || strings.Contains(got, "d0/f2.txt") {
		t.Errorf("a walk whose callback throws: %s", got)
	}
}
