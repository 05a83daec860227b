package proc

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/brainrt/brain/provide/grant"
)

// Defaults applied to zero-valued [Grants] fields.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxOutputBytes = 1 << 20 // per stream
	DefaultMaxProcesses   = 64
	// DefaultUser is the uid (and, when /etc/passwd does not name the
	// user, gid) children run as when brain runs as root: "nobody".
	DefaultUser = 65534
)

// Landlock modes for [Grants].Landlock.
const (
	LandlockOff        = "off"
	LandlockBestEffort = "best-effort"
	LandlockRequired   = "required"
)

// defaultPath is where program names are looked up when Grants.Path is
// empty.
var defaultPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// Grants is the policy of one exec handle. Tools never see it. The zero
// value of every field but Root and Allow means its default.
//
//	exec:
//	  root: /srv/work
//	  allow: [git, go, /opt/tools/bin/lint]
//	  allow_env: [GOFLAGS]
//	  timeout: 2m
type Grants struct {
	// Root is the directory every working directory is confined under (the
	// fs handle's root). Required, absolute. When brain runs as root the
	// child runs as User, which must be able to enter Root (and write it,
	// if tools are to write).
	Root string `yaml:"root"`
	// Allow lists the programs a tool may run: a name, looked up in Path
	// once at setup, or an absolute path. Required.
	Allow []string `yaml:"allow"`
	// Path lists the directories names in Allow are looked up in, in
	// order. Default /usr/local/bin, /usr/bin, /bin.
	Path []string `yaml:"path"`
	// Env holds variables every program gets. PATH defaults to Path
	// joined with ":". Nothing is inherited from brain's own environment.
	Env map[string]string `yaml:"env"`
	// AllowEnv names the variables a command may set. Dynamic-loader
	// variables (LD_*, GCONV_PATH, GLIBC_TUNABLES, …) are refused here and
	// in Env: they load code into any allowed program.
	AllowEnv []string `yaml:"allow_env"`
	// Timeout bounds each command; a command may ask for less. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxOutputBytes caps stdout and stderr, each; a command may ask for
	// less. Output past the cap is read and discarded, and the result is
	// marked Truncated. Default 1 MiB.
	MaxOutputBytes int64 `yaml:"max_output_bytes"`
	// MaxProcesses is RLIMIT_NPROC for the child, which the kernel counts
	// per uid: every process of User, across concurrent calls, shares it.
	// Enforced only when brain runs as root (see the package doc). Default
	// 64.
	MaxProcesses int `yaml:"max_processes"`
	// Landlock confines the child's file access to Root (read-write) and
	// the system's read-only directories: "off", "best-effort" (default:
	// confine when the kernel supports Landlock) or "required" (New fails
	// without it).
	Landlock string `yaml:"landlock"`
	// Network lets the child use the network. False (the default) runs it
	// in a new, empty network namespace, which needs root.
	Network bool `yaml:"network"`
	// User is the uid children run as when brain runs as root; nil means
	// DefaultUser (65534, nobody). 0 is refused: a root child ignores
	// MaxProcesses. When brain does not run as root, User must be nil or
	// brain's own uid.
	User *int `yaml:"user"`
}

// loaderVars are variables that make the dynamic loader or libc load code
// or data chosen by whoever sets them. Allowing one would turn "may run
// git" into "may run anything", so they are refused even when listed.
var loaderVars = []string{
	"GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES",
	"LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE", "NLSPATH", "RESOLV_HOST_CONF",
	"RES_OPTIONS",
}

// isLoaderVar reports whether name is a dynamic-loader or libc variable
// that [Grants] refuse.
func isLoaderVar(name string) bool {
	if strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") {
		return true
	}
	for _, v := range loaderVars {
		if name == v {
			return true
		}
	}
	return false
}

// checkEnvName returns why name cannot be an environment variable name, or
// "".
func checkEnvName(name string) string {
	switch {
	case name == "":
		return "empty variable name"
	case strings.ContainsAny(name, "=\x00"):
		return fmt.Sprintf("variable name %q contains '=' or NUL", name)
	case isLoaderVar(name):
		return fmt.Sprintf("%s is a dynamic-loader variable; it is never allowed", name)
	}
	return ""
}

// Validate checks the grants without touching the file system and returns
// a *grant.FieldError naming the first wrong field, or nil. [New] calls it
// and then checks what needs the file system (Root exists, Allow entries
// resolve).
func (g Grants) Validate() error {
	if g.Root == "" {
		return grant.Errorf("root", "required: the directory commands run under")
	}
	if !filepath.IsAbs(g.Root) {
		return grant.Errorf("root", "%q is not an absolute path", g.Root)
	}
	if len(g.Allow) == 0 {
		return grant.Errorf("allow", "empty: list the programs a tool may run")
	}
	for i, a := range g.Allow {
		field := fmt.Sprintf("allow[%d]", i)
		switch {
		case a == "":
			return grant.Errorf(field, "empty program name")
		case strings.ContainsRune(a, 0):
			return grant.Errorf(field, "contains NUL")
		case strings.ContainsRune(a, '/') && !filepath.IsAbs(a):
			return grant.Errorf(field, "%q: use a name looked up in path, or an absolute path", a)
		case strings.ContainsRune(a, '/') && filepath.Clean(a) != a:
			return grant.Errorf(field, "%q is not a clean path (want %q)", a, filepath.Clean(a))
		case a == "." || a == "..":
			return grant.Errorf(field, "%q is not a program name", a)
		}
	}
	for i, d := range g.Path {
		if !filepath.IsAbs(d) {
			return grant.Errorf(fmt.Sprintf("path[%d]", i), "%q is not an absolute directory", d)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g.Env)) { // sorted: several bad names give the same error every time
		v := g.Env[name]
		if msg := checkEnvName(name); msg != "" {
			return grant.Errorf("env."+name, "%s", msg)
		}
		if strings.ContainsRune(v, 0) {
			return grant.Errorf("env."+name, "value contains NUL")
		}
	}
	for i, name := range g.AllowEnv {
		if msg := checkEnvName(name); msg != "" {
			return grant.Errorf(fmt.Sprintf("allow_env[%d]", i), "%s", msg)
		}
	}
	if g.Timeout < 0 {
		return grant.Errorf("timeout", "negative (%v)", g.Timeout)
	}
	if g.MaxOutputBytes < 0 {
		return grant.Errorf("max_output_bytes", "negative (%d)", g.MaxOutputBytes)
	}
	// 0 is "unset" (the default); a negative count can only be a mistake.
	if g.MaxProcesses < 0 {
		return grant.Errorf("max_processes", "must be at least 1 (or 0 for the default %d), got %d", DefaultMaxProcesses, g.MaxProcesses)
	}
	switch g.Landlock {
	case "", LandlockOff, LandlockBestEffort, LandlockRequired:
	default:
		return grant.Errorf("landlock", "%q: want off, best-effort or required", g.Landlock)
	}
	if g.User != nil {
		if u := *g.User; u == 0 {
			return grant.Errorf("user", "0 (root): a root child ignores max_processes; choose an unprivileged uid")
		} else if u < 0 || u > 1<<32-2 {
			return grant.Errorf("user", "%d is not a valid uid", u)
		}
	}
	return nil
}

// withDefaults returns g with every zero field but Env replaced by its
// default (New builds the environment, PATH default included).
func (g Grants) withDefaults() Grants {
	if len(g.Path) == 0 {
		g.Path = defaultPath
	}
	if g.Timeout == 0 {
		g.Timeout = DefaultTimeout
	}
	if g.MaxOutputBytes == 0 {
		g.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if g.MaxProcesses == 0 {
		g.MaxProcesses = DefaultMaxProcesses
	}
	if g.Landlock == "" {
		g.Landlock = LandlockBestEffort
	}
	return g
}
