package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/tool"
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
// out. Every tool is checked against what a host loads before the first
// file is written.
func commit(out string, tools []staged) ([]Artifact, error) {
	manifests := make([][]byte, len(tools))
	for i, s := range tools { // claimed already: a backstop, before any write
		if err := nameError(s.art.Manifest.Name); err != nil {
			return nil, fmt.Errorf("build %s: %w", s.art.Package, err)
		}
		mj, err := json.MarshalIndent(s.art.Manifest, "", "  ")
		if err != nil {
			return nil, err
		}
		manifests[i] = append(mj, '\n')
		if err := loadable(s, len(manifests[i])); err != nil {
			return nil, fmt.Errorf("build %s: %w", s.art.Package, err)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	arts := make([]Artifact, 0, len(tools))
	for i, s := range tools {
		a := s.art
		a.PayloadPath = filepath.Join(out, a.Manifest.Name+s.ext)
		a.ManifestPath = filepath.Join(out, a.Manifest.Name+".tool.json")
		if err := writePayload(a.PayloadPath, s); err != nil {
			return arts, err
		}
		if err := writeFile(a.ManifestPath, bytes.NewReader(manifests[i])); err != nil {
			return arts, err
		}
		arts = append(arts, a)
	}
	return arts, nil
}

// loadable refuses a tool a host would refuse to load: a manifest of more
// than tool.MaxManifestBytes, a Go payload of more than
// abi.MaxPayloadBytes (a bundle's bound is checked where it is made).
func loadable(s staged, manifestBytes int) error {
	if manifestBytes > tool.MaxManifestBytes {
		return fmt.Errorf("tool %q: its manifest has %d bytes, more than the %d (%d MiB) a host loads: shorten its schemas and descriptions",
			s.art.Manifest.Name, manifestBytes, tool.MaxManifestBytes, tool.MaxManifestBytes>>20)
	}
	if s.payloadFile == "" {
		return nil
	}
	fi, err := os.Stat(s.payloadFile)
	if err != nil {
		return err
	}
	if fi.Size() > abi.MaxPayloadBytes {
		return fmt.Errorf("tool %q: its payload has %d bytes, more than the %d (%d MiB) a host loads: drop large dependencies or embedded data (read data through a handle at run time)",
			s.art.Manifest.Name, fi.Size(), abi.MaxPayloadBytes, abi.MaxPayloadBytes>>20)
	}
	return nil
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
