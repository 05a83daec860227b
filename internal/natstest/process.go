package natstest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Real nats-server processes, for what an in-process server cannot show:
// a SIGKILLed server (no shutdown, no leadership handed over, its
// listener gone at once) and one started again on the same data.

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of a nats-server built from the module's own
// dependency (go build github.com/nats-io/nats-server/v2), once per test
// binary, into a directory shared by test binaries of the same version:
// go build's cache makes a rebuild quick, and the binary is renamed into
// place, so concurrent test binaries never see half of one.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("building nats-server needs the go command on PATH: %w", err)
			return
		}
		version := "unknown"
		if out, err := exec.Command(goTool, "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2").Output(); err == nil {
			version = strings.TrimSpace(string(out))
		}
		dir := filepath.Join(os.TempDir(), "brain-natstest-"+version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "nats-server")
		if version != "unknown" {
			if _, err := os.Stat(buildPath); err == nil {
				return
			}
		}
		tmp, err := os.CreateTemp(dir, "nats-server.*")
		if err != nil {
			buildErr = err
			return
		}
		_ = tmp.Close()
		out, err := exec.Command(goTool, "build", "-o", tmp.Name(), "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			_ = os.Remove(tmp.Name())
			buildErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
			return
		}
		buildErr = os.Rename(tmp.Name(), buildPath)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Server is one nats-server process of a [ProcCluster].
type Server struct {
	Name string
	URL  string // nats://127.0.0.1:port

	bin             string
	dir             string
	port, routePort int
	routes          string
	log             string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// ProcCluster is a cluster of nats-server processes with JetStream on
// loopback, each with its own data directory.
type ProcCluster struct {
	t       testing.TB
	Servers []*Server
}

// StartProcCluster starts n nats-server processes clustered over routes
// on loopback and waits until each accepts connections (JetStream may
// still be electing its leaders: see [ProcCluster.WaitJetStream]); t's
// cleanup kills them. Unlike [StartCluster]'s servers they advertise each
// other to clients, as a deployment's would.
func StartProcCluster(t testing.TB, n int) *ProcCluster {
	t.Helper()
	bin := Binary(t)
	ports := freePorts(t, 2*n)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	c := &ProcCluster{t: t}
	for i := range n {
		s := &Server{Name: fmt.Sprintf("nats%d", i+1), URL: fmt.Sprintf("nats://127.0.0.1:%d", ports[i]),
			bin: bin, dir: t.TempDir(), port: ports[i], routePort: ports[n+i], routes: strings.Join(routes, ",")}
		s.log = filepath.Join(s.dir, "nats-server.log")
		c.Servers = append(c.Servers, s)
	}
	for _, s := range c.Servers {
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range c.Servers {
			s.Kill()
		}
	})
	for _, s := range c.Servers {
		if err := s.waitListening(20 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// URLs returns every server's client URL.
func (c *ProcCluster) URLs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.URL
	}
	return out
}

// URL returns every server's client URL joined by commas, as nats.Connect
// (and brain's --nats) takes them.
func (c *ProcCluster) URL() string { return strings.Join(c.URLs(), ",") }

// Server returns the server named name, or nil.
func (c *ProcCluster) Server(name string) *Server {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// StreamLeader returns the name of the server leading stream (a key-value
// bucket's stream is KV_<bucket>), asking the servers that run.
func (c *ProcCluster) StreamLeader(ctx context.Context, stream string) (string, error) {
	var errs []error
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		leader, err := s.streamLeader(ctx, stream)
		if err == nil && leader != "" {
			return leader, nil
		}
		errs = append(errs, fmt.Errorf("%s: %v", s.Name, err))
	}
	return "", fmt.Errorf("no leader for stream %s: %w", stream, errors.Join(errs...))
}

func (s *Server) streamLeader(ctx context.Context, stream string) (string, error) {
	nc, err := nats.Connect(s.URL, nats.Timeout(2*time.Second))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.INFO."+stream, nil)
	if err != nil {
		return "", err
	}
	var info struct {
		Cluster *struct {
			Leader string `json:"leader"`
		} `json:"cluster"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return "", err
	}
	if info.Error != nil {
		return "", errors.New(info.Error.Description)
	}
	if info.Cluster == nil {
		return "", errors.New("no cluster info")
	}
	return info.Cluster.Leader, nil
}

// start runs the server's process.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("%s runs already", s.Name)
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "-n", s.Name, "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-js", "-sd", filepath.Join(s.dir, "data"),
		"--cluster_name", "brain-test", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", s.routePort), "--routes", s.routes)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", s.Name, err)
	}
	_ = logf.Close() // the child has its own descriptor
	s.cmd = cmd
	return nil
}

// Start runs the server again (same name, ports and data) after Kill,
// and waits until it accepts connections.
func (s *Server) Start() error {
	if err := s.start(); err != nil {
		return err
	}
	return s.waitListening(20 * time.Second)
}

// Kill SIGKILLs the server and waits for it to exit; a server not
// running is left alone.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// Running reports whether the server's process runs.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Log returns the server's log so far (all its runs).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// waitListening polls until the server greets a connection.
func (s *Server) waitListening(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "nats://"), time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, rerr := bufio.NewReader(c).ReadSlice('\n')
			_ = c.Close()
			if rerr == nil && bytes.HasPrefix(line, []byte("INFO ")) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not accept connections after %s; its log:\n%s", s.Name, within, s.Log())
		}
		time.Sleep(50 * time.Millisecond) // polling a process starting
	}
}

// freePorts returns n distinct loopback ports free when asked.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// WaitJetStream polls until the cluster's JetStream answers (it has
// elected its meta leader), for at most within.
func (c *ProcCluster) WaitJetStream(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := c.jetStreamAnswers()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream does not answer after %s: %w", within, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a cluster electing its leaders
	}
}

func (c *ProcCluster) jetStreamAnswers() error {
	nc, err := nats.Connect(c.URL(), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	m, err := nc.Request("$JS.API.INFO", nil, 2*time.Second)
	if err != nil {
		return err
	}
	var info struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return err
	}
	if info.Error != nil {
		return errors.New(info.Error.Description)
	}
	return nil
}

// MoveLeader makes server to the leader of stream (a stepdown of its
// leader with to preferred), and waits until it is, for at most within.
func (c *ProcCluster) MoveLeader(ctx context.Context, stream, to string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		leader, err := c.StreamLeader(ctx, stream)
		if err == nil && leader == to {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stream %s: leader %q after %s, want %s (%v)", stream, leader, within, to, err)
		}
		if err == nil {
			if err := c.stepDown(ctx, stream, to); err != nil && time.Now().After(deadline) {
				return err
			}
		}
		time.Sleep(200 * time.Millisecond) // polling an election the stepdown started
	}
}

func (c *ProcCluster) stepDown(ctx context.Context, stream, to string) error {
	nc, err := nats.Connect(c.URL(), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": to}})
	m, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
	if err != nil {
		return err
	}
	var resp struct {
		Success bool `json:"success"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || !resp.Success {
		return fmt.Errorf("step down the leader of %s: %s", stream, m.Data)
	}
	return nil
}
