// Package behave misbehaves on request: spin forever, allocate until memory
// runs out, or crash with a runtime panic (a trap). Otherwise it answers.
package behave

import "github.com/brainrt/brain/tool"

type In struct {
	Do string `json:"do" jsonschema:"loop, bomb, crash, or anything else to answer"`
}

var (
	sink  int
	hoard [][]byte
)

var Tool = tool.New(tool.Spec{Name: "behave", Description: "Misbehaves on request."},
	func(ctx *tool.Context[tool.None, tool.None], in In) (string, error) {
		switch in.Do {
		case "loop":
			for i := 0; ; i++ {
				sink = i
			}
		case "bomb":
			for {
				b := make([]byte, 8<<20)
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1
				}
				hoard = append(hoard, b)
			}
		case "crash":
			var m map[string]int
			m["boom"] = 1 // a nil map write: a runtime panic
		}
		return "fine", nil
	})
