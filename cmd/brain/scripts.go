package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/internal/regularfile"
	"github.com/brainrt/brain/tool"
)

// JavaScript artifacts (runtime js/1, built from TypeScript by brain
// build) are hosted by package host/jshost; every other artifact by the
// WebAssembly host. These helpers choose by the manifest's runtime field.

// artifactRuntime reads the runtime field of the manifest at path; the
// host that loads the artifact then reads the whole manifest strictly.
func artifactRuntime(path string) (string, error) {
	b, err := regularfile.Read(path, tool.MaxManifestBytes) // not a FIFO's open, which blocks
	if err != nil {
		return "", err
	}
	var m struct {
		Runtime string `json:"runtime"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return m.Runtime, nil
}

// scriptHost makes the JavaScript host on first use; its bytecode cache
// sits beside the WebAssembly host's compilation cache.
type scriptHost struct {
	cacheDir string
	log      *slog.Logger
	h        *jshost.Host
}

func (s *scriptHost) get() (*jshost.Host, error) {
	if s.h == nil {
		h, err := jshost.New(&jshost.Options{CacheDir: s.cacheDir, Logger: s.log})
		if err != nil {
			return nil, err
		}
		s.h = h
	}
	return s.h, nil
}

// isScriptRuntime reports whether an artifact of runtime rt goes to the
// JavaScript host: js/1, and any other js/N, which that host refuses
// saying which it runs.
func isScriptRuntime(rt string) bool { return strings.HasPrefix(rt, "js/") }

// loadArtifact loads the artifact at path through the host its runtime
// needs.
func loadArtifact(path string, wasm *host.Host, js *scriptHost) (tool.Attachable, error) {
	rt, err := artifactRuntime(path)
	if err != nil {
		return nil, err
	}
	if isScriptRuntime(rt) {
		h, err := js.get()
		if err != nil {
			return nil, err
		}
		return h.LoadManifest(path)
	}
	return wasm.LoadManifest(path)
}

// loadArtifactDir loads every *.tool.json in dir, each through the host
// its runtime needs.
func loadArtifactDir(dir string, wasm *host.Host, js *scriptHost) ([]tool.Attachable, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tool.json"))
	if err != nil {
		return nil, err
	}
	var out []tool.Attachable
	for _, p := range paths {
		a, err := loadArtifact(p, wasm, js)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
