// Package provide turns one grants file into the providers of an
// environment.
//
// [Grants] holds a section per handle — fs, exec, net, js, page — each the
// grants of that handle's provider (packages fsroot, proc, fetch, script
// and browser), plus the workspace the fs and exec handles default to. A
// section that is absent means the handle is not provided. The YAML form,
// every key and its default, is in docs/grants.md:
//
//	workspace: ./workspace
//	fs:   {read_only: false}
//	exec: {allow: [ls, grep, git], timeout: 30s}
//	net:  {allow_hosts: [api.github.com, "*.example.com"]}
//	js:   {timeout: 5s}
//
// [Load] and [Parse] read it strictly: an unknown key, a value of the wrong
// type, a duration without a unit, a rule a section's Validate refuses and
// a contradiction between sections (exec.root outside the fs root, a
// workspace that does not exist) are each an *[Error] that names the file,
// the line and column of the offending key, and the field:
//
//	grants.yaml:12:5: net.allow_hosts[1]: "*": "*" would allow every host; list the hosts
//
// [Providers] returns a kernel.Provider for each section, and [Environment]
// builds and sets up a kernel.Environment from them:
//
//	g, err := provide.Load("grants.yaml")
//	if err != nil {
//		return err // file:line:col: field: message
//	}
//	env, receipt, err := provide.Environment(ctx, g, nil)
//	if err != nil {
//		return err
//	}
//	defer env.Close()
//	// receipt.Provides: the sections that opened; receipt.Failures: the
//	// others, with a code and a reason.
package provide
