//go:build !linux

package browser

import (
	"errors"
	"net"
	"os/exec"
)

// errNoIsolation is why the page handle is unavailable off Linux: only
// there can Chromium run in a network namespace whose one way out is the
// proxy, and without one its WebRTC and other UDP traffic leave unchecked.
var errNoIsolation = errors.New("the page handle needs Linux network namespaces to confine Chromium to its proxy")

func isolate(*exec.Cmd) {}

func checkIsolation() error { return errNoIsolation }

func listenIn(int, string) (net.Listener, string, error) { return nil, "", errNoIsolation }

func killNamespace(string) {}
