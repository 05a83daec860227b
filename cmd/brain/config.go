package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/goccy/go-yaml"

	"github.com/brainrt/brain/examples/tools/apicall"
	"github.com/brainrt/brain/examples/tools/execrun"
	"github.com/brainrt/brain/examples/tools/fsread"
	"github.com/brainrt/brain/examples/tools/fssearch"
	"github.com/brainrt/brain/examples/tools/jseval"
	"github.com/brainrt/brain/examples/tools/netfetchjson"
	"github.com/brainrt/brain/examples/tools/pagetext"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/yamlcheck"
	"github.com/brainrt/brain/tool"
)

// serveConfig is the environment of `brain serve` and `brain mcp`
// (docs/serve.md): which handles under which grants, which tools, which
// external MCP servers.
type serveConfig struct {
	// Grants is a grants file (docs/grants.md), relative to the config;
	// required when the config names tools or artifacts. Without it the
	// environment provides no handles (a kernel whose tools come from
	// clients, apps, brain env and MCP servers).
	Grants string `yaml:"grants"`
	// Tools names built-in example tools to attach.
	Tools []string `yaml:"tools"`
	// Artifacts is a directory of <name>.tool.json artifacts to attach.
	Artifacts string `yaml:"artifacts"`
	// Bindings gives binding values per tool: tool name → binding → value.
	Bindings map[string]map[string]any `yaml:"bindings"`
	// MCPServers are external MCP servers whose tools become capabilities.
	MCPServers []mcpServerConfig `yaml:"mcp_servers"`
	// Console configures the operator console (docs/console.md).
	Console consoleConfig `yaml:"console"`
	// Limits are the kernel's quotas (limits.go, docs/operations.md).
	Limits limitsConfig `yaml:"limits"`
	// Approvals sets the approval timeout and the grace for gone peers
	// (approvals.go).
	Approvals approvalsConfig `yaml:"approvals"`
	// Policy sets, per tool or glob, how the environment's tools are
	// offered as capabilities (policy.go).
	Policy []policyConfig `yaml:"policy"`
	// Model is the model that drives turns (chat.go, docs/agent.md).
	Model modelConfig `yaml:"model"`
	// BrowserOrigins are the sites whose pages may use the kernel from a
	// browser besides its own origin (origins.go, docs/serve.md).
	BrowserOrigins []string `yaml:"browser_origins"`

	dir  string     // the config file's directory
	pos  positions  // where each key is, for errors naming a line
	host *host.Host // set by buildEnvironment when it hosts artifacts (pool metrics)
}

type mcpServerConfig struct {
	ID      string   `yaml:"id"`
	Command []string `yaml:"command"`
	Env     []string `yaml:"env"`
	URL     string   `yaml:"url"`
}

// builtinTools are the example tools a config can name.
var builtinTools = map[string]tool.Attachable{
	"fs.read":        fsread.Tool,
	"fs.search":      fssearch.Tool,
	"exec.run":       execrun.Tool,
	"net.fetch_json": netfetchjson.Tool,
	"js.eval":        jseval.Tool,
	"page.text":      pagetext.Tool,
	"api.get":        apicall.Tool,
}

// defaultTools are what `brain serve` attaches without --config: the
// example tools over ./workspace, with the fs and js handles.
var defaultTools = []string{"fs.read", "fs.search", "js.eval"}

// loadServeConfig reads a config file strictly; "" gives the default
// config, which creates ./workspace (and its grants file under dataDir).
func loadServeConfig(path, dataDir string) (*serveConfig, error) {
	if path == "" {
		if err := os.MkdirAll("workspace", 0o755); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, err
		}
		wd, _ := os.Getwd()
		g := filepath.Join(dataDir, "default-grants.yaml")
		if err := os.WriteFile(g, []byte("workspace: "+filepath.Join(wd, "workspace")+"\nfs: {}\njs: {}\n"), 0o600); err != nil {
			return nil, err
		}
		return &serveConfig{Grants: g, Tools: defaultTools, dir: wd, pos: positions{file: "(default config)"}}, nil
	}
	b, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	c := serveConfig{dir: filepath.Dir(path), pos: newPositions(path, b)} // parsed once: the kinds' walk, the errors' places
	if ast := c.pos.ast; ast != nil && len(ast.Docs) > 0 {
		if err := c.pos.checkKinds(ast.Docs[0].Body, reflect.TypeFor[serveConfig](), "$"); err != nil {
			return nil, err
		}
	}
	if err := yamlcheck.Decode(func() error { return yaml.NewDecoder(bytes.NewReader(b), yaml.Strict()).Decode(&c) }); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file has no settings: a serve config names at least its grants and tools (docs/serve.md, examples/kernel.yaml)", path)
		}
		return nil, c.pos.decodeError(err)
	}
	if c.Grants == "" && (len(c.Tools) > 0 || c.Artifacts != "") {
		return nil, c.pos.errorf("$.grants", "a grants file is required for tools and artifacts (docs/grants.md)")
	}
	for i, n := range c.Tools {
		if _, ok := builtinTools[n]; !ok {
			return nil, c.pos.errorf(fmt.Sprintf("$.tools[%d]", i), "no built-in tool %q (have %v)", n, toolNames())
		}
		if slices.Contains(c.Tools[:i], n) {
			return nil, c.pos.errorf(fmt.Sprintf("$.tools[%d]", i), "%q is listed twice", n)
		}
	}
	for i, m := range c.MCPServers {
		if m.ID == "" || (len(m.Command) == 0) == (m.URL == "") {
			return nil, c.pos.errorf(fmt.Sprintf("$.mcp_servers[%d]", i), "needs an id and exactly one of command and url")
		}
	}
	if _, err := c.policyRules(); err != nil {
		return nil, err
	}
	if _, err := c.browserOriginPatterns(); err != nil {
		return nil, err
	}
	if err := c.Limits.validate(c.pos); err != nil {
		return nil, err
	}
	if err := c.Approvals.validate(c.pos); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *serveConfig) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

func toolNames() []string {
	var out []string
	for n := range builtinTools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// maxConfigBytes bounds a serve config: a real one is a few kilobytes.
const maxConfigBytes = 1 << 20

// readConfigFile reads a serve config, refusing what could make decoding it
// expensive or crash it: more than maxConfigBytes, YAML anchors and aliases
// (an alias bomb expands a small file into billions of values) and tags
// (internal/yamlcheck); a serve config needs none of them.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; a serve config needs far fewer", path, maxConfigBytes)
	}
	if e := yamlcheck.Check(b, yamlcheck.Options{}); e != nil {
		return nil, fmt.Errorf("%s:%v (a serve config needs none)", path, e)
	}
	if e := yamlcheck.Documents(b); e != nil {
		return nil, fmt.Errorf("%s:%v", path, e)
	}
	return b, nil
}
