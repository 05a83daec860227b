// Package console holds the operator's web console: static files (HTML,
// CSS, vanilla ES modules, one vendored library) embedded in the binary and
// served by server.Console on its own listener. The console talks to the
// kernel only through the documented HTTP and WebSocket APIs (see
// docs/console.md); nothing here runs on the server.
package console

import (
	"embed"
	"io/fs"
)

//go:embed assets
var files embed.FS

// Assets returns the console's files with index.html at the root.
func Assets() fs.FS {
	sub, err := fs.Sub(files, "assets")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}
