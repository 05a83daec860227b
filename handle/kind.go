package handle

import "fmt"

// Kind names a handle. It is the word a tool puts in its `requires` list and
// an environment in its `provides` list.
type Kind string

// The handles an environment can provide.
const (
	KindExec Kind = "exec"
	KindFS   Kind = "fs"
	KindNet  Kind = "net"
	KindJS   Kind = "js"
	KindPage Kind = "page"
)

// Kinds lists every handle kind in a stable order.
func Kinds() []Kind { return []Kind{KindExec, KindFS, KindNet, KindJS, KindPage} }

// ParseKind returns the Kind named by s, or an error naming s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown handle %q (want one of exec, fs, net, js, page)", s)
}
