package fsroot

import "github.com/brainrt/brain/provide/grant"

// Defaults applied by [New] when a limit is zero.
const (
	// DefaultMaxFileBytes is the size limit for ReadFile and WriteFile.
	DefaultMaxFileBytes int64 = 16 << 20
	// DefaultMaxEntries is the limit on entries listed by ReadDir, Walk and
	// Glob.
	DefaultMaxEntries = 10000
)

// Grants are the policy of one fs handle. The tool never sees them.
type Grants struct {
	// Root is the directory the handle is confined to. Required. A relative
	// path is resolved against the working directory when [New] runs.
	Root string `yaml:"root"`
	// ReadOnly refuses every operation that changes the tree (WriteFile,
	// MkdirAll, Remove, Rename, Symlink, Link) with code denied.
	ReadOnly bool `yaml:"read_only"`
	// MaxFileBytes bounds the files ReadFile returns and WriteFile writes;
	// larger ones fail with too_large. 0 means [DefaultMaxFileBytes].
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxEntries bounds how many entries ReadDir lists from one directory,
	// and how many entries one Walk or Glob reads from directories in total
	// (the directories Glob prunes are not read); beyond it they fail with
	// too_large. 0 means [DefaultMaxEntries].
	MaxEntries int `yaml:"max_entries"`
}

// Validate reports the first bad field as a *[grant.FieldError] whose Field
// is the YAML name ("root", "max_file_bytes", "max_entries"). It does not
// touch the disk: [New] reports a root that cannot be opened.
func (g Grants) Validate() error {
	switch {
	case g.Root == "":
		return grant.Errorf("root", "is required: name the directory the fs handle is confined to")
	case g.MaxFileBytes < 0:
		return grant.Errorf("max_file_bytes", "must not be negative (0 means the default, %d)", DefaultMaxFileBytes)
	case g.MaxEntries < 0:
		return grant.Errorf("max_entries", "must not be negative (0 means the default, %d)", DefaultMaxEntries)
	}
	return nil
}
