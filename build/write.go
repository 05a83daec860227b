package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// staged is a built tool not yet written: every tool of a build is built
// and its name claimed (see names) before the first file is written, so a
// build that fails writes nothing.
type staged struct {
	art Artifact // ManifestPath and PayloadPath are set by commit
	ext string   // of the payload: ".wasm" or ".mjs"
	// The payload is either in memory (a JavaScript bundle, at most
	// jshost.MaxPayloadBytes) or a file in the build's temporary
	// directory (a Go payload, up to tens of MB).
	payload     []byte
	payloadFile string
}

// commit writes the staged tools to out: <name><ext> and <name>.tool.json
// each. Their names have been checked (checkName), so every file is in
// out.
func commit(out string, tools []staged) ([]Artifact, error) {
	for _, s := range tools { // claimed already: a backstop, before any write
		if err := nameError(s.art.Manifest.Name); err != nil {
			return nil, fmt.Errorf("build %s: %w", s.art.Package, err)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	arts := make([]Artifact, 0, len(tools))
	for _, s := range tools {
		a := s.art
		a.PayloadPath = filepath.Join(out, a.Manifest.Name+s.ext)
		a.ManifestPath = filepath.Join(out, a.Manifest.Name+".tool.json")
		mj, err := json.MarshalIndent(a.Manifest, "", "  ")
		if err != nil {
			return arts, err
		}
		if err := writePayload(a.PayloadPath, s); err != nil {
			return arts, err
		}
		if err := writeFile(a.ManifestPath, bytes.NewReader(append(mj, '\n'))); err != nil {
			return arts, err
		}
		arts = append(arts, a)
	}
	return arts, nil
}

// writePayload writes the payload of s to path.
func writePayload(path string, s staged) error {
	if s.payloadFile == "" {
		return writeFile(path, bytes.NewReader(s.payload))
	}
	f, err := os.Open(s.payloadFile)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFile(path, f)
}

// writeFile writes r to path through a temporary file beside it, renamed
// over path: a symbolic link at path (one a cloned project ships in its
// output directory, say) is replaced, never followed, so nothing is
// written outside path's directory, and no reader sees half a file.
func writeFile(path string, r io.Reader) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".brain-build-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
