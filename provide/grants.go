package provide

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/browser"
	"github.com/brainrt/brain/provide/fetch"
	"github.com/brainrt/brain/provide/fsroot"
	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/proc"
	"github.com/brainrt/brain/provide/script"
)

// Grants are the policy of one environment: a section per handle, each the
// grants of that handle's provider. A nil section means the environment
// does not provide that handle. The YAML form is documented in
// docs/grants.md; [Load] and [Parse] read it.
//
//	workspace: ./workspace
//	fs:   {read_only: false}
//	exec: {allow: [ls, grep, git], timeout: 30s}
//	net:  {allow_hosts: [api.github.com]}
//	js:   {}
type Grants struct {
	// Workspace is the directory tools work in: the fs handle's root and
	// the directory exec's working directories are confined to, unless
	// FS.Root or Exec.Root say otherwise. It must exist. Optional: without
	// it, FS.Root and Exec.Root are required.
	Workspace string `yaml:"workspace"`
	// FS grants the fs handle; FS.Root defaults to Workspace.
	FS *fsroot.Grants `yaml:"fs"`
	// Exec grants the exec handle; Exec.Root defaults to Workspace.
	Exec *proc.Grants `yaml:"exec"`
	// Net grants the net handle.
	Net *fetch.Grants `yaml:"net"`
	// JS grants the js handle.
	JS *script.Grants `yaml:"js"`
	// Page grants the page handle.
	Page *browser.Grants `yaml:"page"`
}

// Kinds returns the kinds of handle g provides, in [handle.Kinds] order.
func (g Grants) Kinds() []handle.Kind {
	var ks []handle.Kind
	for _, k := range handle.Kinds() {
		if g.has(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (g Grants) has(k handle.Kind) bool {
	switch k {
	case handle.KindFS:
		return g.FS != nil
	case handle.KindExec:
		return g.Exec != nil
	case handle.KindNet:
		return g.Net != nil
	case handle.KindJS:
		return g.JS != nil
	case handle.KindPage:
		return g.Page != nil
	}
	return false
}

// sectionOrder is the order in which [Grants.Validate] checks sections: the
// order of the file format, fs before exec, which is checked against it.
var sectionOrder = []handle.Kind{handle.KindFS, handle.KindExec, handle.KindNet, handle.KindJS, handle.KindPage}

// Validate reports the first problem in g as a *[grant.FieldError] whose
// Field is the path from the top of the grants ("workspace",
// "net.allow_hosts[1]", "exec.env.LD_PRELOAD"), or nil. It applies each
// section's own Validate to the effective grants (roots defaulted to the
// workspace, relative paths made absolute against the working directory)
// and checks what no section can check alone:
//   - the workspace and the fs and exec roots exist and are directories;
//   - exec.root is inside the fs root (fs.root, or the workspace when there
//     is no fs section), so that exec reaches no file the fs handle cannot;
//   - when the fs handle may write, no absolute exec.allow entry or
//     exec.path directory is inside the fs root, where a tool could replace
//     the program;
//   - page.max_redirects is not set: Chromium follows redirects itself.
//
// Unlike the sections' Validate methods, it looks at the file system.
func (g Grants) Validate() error {
	e := g.effective()
	if err := e.checkWorkspace(); err != nil {
		return err
	}
	for _, k := range sectionOrder {
		if err := e.checkSection(k); err != nil {
			return err
		}
	}
	return nil
}

// checkWorkspace reports a workspace that is not a directory.
func (g Grants) checkWorkspace() *grant.FieldError {
	if g.Workspace == "" {
		return nil
	}
	return checkDir("workspace", g.Workspace)
}

// checkSection validates the section of kind k, which must be effective
// grants: the section's own Validate, then the checks across sections
// that concern it. A missing section is valid.
func (g Grants) checkSection(k handle.Kind) *grant.FieldError {
	if !g.has(k) {
		return nil
	}
	switch k {
	case handle.KindFS:
		if g.FS.Root == "" {
			return grant.Errorf("fs.root", "required when there is no workspace: name the directory the fs handle is confined to")
		}
		if err := inSection("fs", g.FS.Validate()); err != nil {
			return err
		}
		return checkDir("fs.root", g.FS.Root)
	case handle.KindExec:
		if g.Exec.Root == "" {
			return grant.Errorf("exec.root", "required when there is no workspace: name the directory commands run under")
		}
		if err := inSection("exec", g.Exec.Validate()); err != nil {
			return err
		}
		if err := checkDir("exec.root", g.Exec.Root); err != nil {
			return err
		}
		return g.checkExecInFS()
	case handle.KindNet:
		return inSection("net", g.Net.Validate())
	case handle.KindJS:
		return inSection("js", g.JS.Validate())
	case handle.KindPage:
		if err := inSection("page", g.Page.Validate()); err != nil {
			return err
		}
		if g.Page.MaxRedirects != 0 {
			return grant.Errorf("page.max_redirects", "not used by the page handle: Chromium follows redirects, and each one is checked against allow_hosts like any request; remove it")
		}
	}
	return nil
}

// fsRoot returns the directory the fs handle is (or, with no fs section,
// the workspace would be) confined to, or "".
func (g Grants) fsRoot() string {
	if g.FS != nil {
		return g.FS.Root
	}
	return g.Workspace
}

// checkExecInFS checks exec against the fs root: its root must be inside,
// and, when the fs handle may write there, its programs outside.
func (g Grants) checkExecInFS() *grant.FieldError {
	fsRoot := g.fsRoot()
	if fsRoot == "" {
		return nil
	}
	realFS := realPath(fsRoot)
	if !isWithin(realFS, realPath(g.Exec.Root)) {
		what := "the fs root"
		if g.FS == nil {
			what = "the workspace"
		}
		return grant.Errorf("exec.root", "%q is outside %s %q: exec would reach files the fs handle cannot; use a directory inside it", g.Exec.Root, what, fsRoot)
	}
	if g.FS == nil || g.FS.ReadOnly {
		return nil
	}
	for i, a := range g.Exec.Allow {
		if filepath.IsAbs(a) && isWithin(realFS, realPath(a)) {
			return grant.Errorf(fmt.Sprintf("exec.allow[%d]", i), "%q is inside the fs root, where tools can replace it through the fs handle", a)
		}
	}
	for i, d := range g.Exec.Path {
		if isWithin(realFS, realPath(d)) {
			return grant.Errorf(fmt.Sprintf("exec.path[%d]", i), "%q is inside the fs root, where tools can plant programs through the fs handle", d)
		}
	}
	if len(g.Exec.Path) == 0 {
		for _, d := range defaultExecPath {
			if isWithin(realFS, realPath(d)) {
				return grant.Errorf("exec.path", "the default lookup path %s is inside the fs root, where tools can plant programs through the fs handle; list directories outside it", strings.Join(defaultExecPath, ":"))
			}
		}
	}
	return nil
}

// defaultExecPath is where proc looks program names up when exec.path is
// empty (proc's own default, which it does not export).
var defaultExecPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// inSection returns err, a section's validation error, as a *grant.FieldError
// whose field is prefixed with the section's name.
func inSection(section string, err error) *grant.FieldError {
	if err == nil {
		return nil
	}
	var fe *grant.FieldError
	if errors.As(err, &fe) {
		return &grant.FieldError{Field: section + "." + fe.Field, Msg: fe.Msg}
	}
	return &grant.FieldError{Field: section, Msg: err.Error()}
}

// checkDir reports, for field, a path that is not an existing directory.
func checkDir(field, dir string) *grant.FieldError {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return grant.Errorf(field, "directory %q does not exist", dir)
	case err != nil:
		return grant.Errorf(field, "%v", err)
	case !fi.IsDir():
		return grant.Errorf(field, "%q is not a directory", dir)
	}
	return nil
}

// realPath returns p with symbolic links resolved, or p cleaned when it
// cannot be resolved (it does not exist).
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// isWithin reports whether p is dir or below it; both clean and absolute.
func isWithin(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// effective returns a deep copy of g with the fs and exec roots defaulted
// to the workspace and relative paths (workspace, roots, page binary) made
// absolute against the working directory.
func (g Grants) effective() Grants {
	return g.resolve("")
}

// resolve returns a deep copy of g with the roots defaulted to the
// workspace and the relative paths among workspace, fs.root, exec.root and
// page.binary joined to dir (the working directory when dir is "").
func (g Grants) resolve(dir string) Grants {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		if dir != "" {
			return filepath.Join(dir, p)
		}
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	out := Grants{Workspace: abs(g.Workspace)}
	if g.FS != nil {
		fs := *g.FS
		fs.Root = abs(fs.Root)
		if fs.Root == "" {
			fs.Root = out.Workspace
		}
		out.FS = &fs
	}
	if g.Exec != nil {
		ex := *g.Exec
		ex.Root = abs(ex.Root)
		if ex.Root == "" {
			ex.Root = out.Workspace
		}
		ex.Allow = slices.Clone(ex.Allow)
		ex.Path = slices.Clone(ex.Path)
		ex.Env = maps.Clone(ex.Env)
		ex.AllowEnv = slices.Clone(ex.AllowEnv)
		if ex.User != nil {
			u := *ex.User
			ex.User = &u
		}
		out.Exec = &ex
	}
	if g.Net != nil {
		n := cloneNet(*g.Net)
		out.Net = &n
	}
	if g.JS != nil {
		js := *g.JS
		out.JS = &js
	}
	if g.Page != nil {
		p := *g.Page
		p.Grants = cloneNet(p.Grants)
		p.Binary = abs(p.Binary)
		out.Page = &p
	}
	return out
}

func cloneNet(n fetch.Grants) fetch.Grants {
	n.AllowHosts = slices.Clone(n.AllowHosts)
	n.Schemes = slices.Clone(n.Schemes)
	n.Ports = slices.Clone(n.Ports)
	n.AllowCIDRs = slices.Clone(n.AllowCIDRs)
	return n
}
