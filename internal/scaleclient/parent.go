package scaleclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Child is a running clients' process.
type Child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *strings.Builder
}

// EnvClientsGOGC names the environment variable that sets the clients'
// process's GOGC. By default it is off: the clients stand in for machines
// other than the node's, and on one machine their collector's marking
// would take the node's two cores from it in the middle of a load (on
// this machine it doubled the p99 at 3,000 clients). With it off, the
// clients' process collects only near childMemoryLimit, which a load of
// this package's bounds does not reach. Set it (to 100, say) to measure
// with the clients' collector on.
const EnvClientsGOGC = "BRAIN_SCALE_CLIENTS_GOGC"

// childMemoryLimit is the clients' process's soft memory limit
// (GOMEMLIMIT): with GOGC off, where it collects.
const childMemoryLimit = "4GiB"

func childGOGC() string {
	if v := os.Getenv(EnvClientsGOGC); v != "" {
		return v
	}
	return "off"
}

// Start runs exe (a test binary whose TestMain calls [RunIfRequested]) as
// the clients' process of cfg. Close it when done.
func Start(exe string, cfg Config) (*Child, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envConfig+"="+string(raw), "GOGC="+childGOGC(), "GOMEMLIMIT="+childMemoryLimit)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, in: in, out: bufio.NewScanner(out), stderr: &strings.Builder{}}
	c.out.Buffer(nil, 1<<20)
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// do sends one command and returns the rest of its answer's line after
// want.
func (c *Child) do(cmd, want string) (string, error) {
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return "", fmt.Errorf("%s: %w (%s)", cmd, err, c.stderr)
	}
	if !c.out.Scan() {
		return "", fmt.Errorf("%s: the clients' process ended: %v %s", cmd, c.out.Err(), c.stderr)
	}
	rest, ok := strings.CutPrefix(c.out.Text(), want)
	if !ok {
		return "", fmt.Errorf("%s: answered %q", cmd, c.out.Text())
	}
	return strings.TrimSpace(rest), nil
}

// Connect opens clients until n are connected, each in its own session
// with [Capability] registered.
func (c *Child) Connect(n int) error {
	_, err := c.do(fmt.Sprintf("connect %d", n), "connected ")
	return err
}

// Load makes rate round trips a second for d, spread over every client,
// and returns what came of them.
func (c *Child) Load(rate float64, d time.Duration) (Result, error) {
	rest, err := c.do(fmt.Sprintf("load %g %g", rate, d.Seconds()), "result ")
	if err != nil {
		return Result{}, err
	}
	var r Result
	err = json.Unmarshal([]byte(rest), &r)
	return r, err
}

// Close closes every client's connection and waits for the process to
// end (killing it if it has not within a minute).
func (c *Child) Close() error {
	_, err := c.do("close", "closed")
	_ = c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case werr := <-done:
		return errors.Join(err, werr)
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		return errors.Join(err, errors.New("the clients' process did not end within a minute: killed"), <-done)
	}
}
