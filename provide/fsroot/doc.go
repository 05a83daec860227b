// Package fsroot provides the fs handle ([handle.FS]) confined to one
// directory with [os.Root].
//
// Every path a tool passes is resolved by os.Root, which opens each
// component relative to the directory above it and refuses to leave the
// root through "..", an absolute path or a symbolic link, including one
// swapped in between two calls. On top of that the provider:
//
//   - rejects empty paths, paths with NUL bytes, absolute paths and paths
//     that leave the root lexically ("a/../../x") before touching the disk;
//   - refuses Symlink targets that are absolute or leave the root lexically,
//     so the tool cannot plant links that other programs would follow out;
//   - refuses to read or write regular files with more than one hard link
//     (checked on the opened descriptor), because os.Root cannot tell a hard
//     link to an outside file from an ordinary file;
//   - refuses Link altogether (see [FS.Link]);
//   - walks directories by opening each one through the root and checking it
//     is the directory that was listed, so a directory swapped for a symbolic
//     link during a walk is never followed;
//   - bounds file sizes ([Grants.MaxFileBytes]) and listings
//     ([Grants.MaxEntries]), and opens files without blocking so a FIFO or a
//     device cannot hang a call.
//
// Every failure is a *[handle.CapabilityError] with Handle "fs", an Op
// naming the method ("read_file", "write_file", "read_dir", "stat",
// "mkdir_all", "remove", "rename", "symlink", "link", "walk", "glob"), a
// code from package protocol and a message that names only the tool's own
// paths, never the host's root.
//
// What os.Root cannot stop — a hard link placed from outside, /proc or
// device files inside the root, bind mounts — is described in
// docs/handle-fs.md together with what this package does about it.
//
//	fsys, err := fsroot.New(fsroot.Grants{Root: "/srv/work", ReadOnly: true})
//	if err != nil {
//		return err // a *grant.FieldError naming the offending field
//	}
//	defer fsys.Close()
//	data, err := fsys.ReadFile(ctx, "notes/a.txt")
package fsroot
