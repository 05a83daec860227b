package browser

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Chromium runs in a network namespace of its own, made for it when it
// starts (CLONE_NEWNET), which holds nothing but a loopback interface. The
// proxy's listening socket is created inside that namespace, and is the
// only thing listening there; the proxy's own connections out are made
// from brain's namespace. So the proxy is Chromium's only way out: no UDP
// (WebRTC's STUN and TURN, QUIC), no DNS, no TCP to anything but the proxy
// can leave the namespace, whatever Chromium's flags do or fail to do.

// isolate prepares cmd, the Chromium that chromedp is about to start, to
// start in a new network namespace. chromedp's own default (kill the
// browser when brain dies) is kept.
func isolate(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
}

// checkIsolation reports whether this process may make network
// namespaces, as an error that says what is missing. It makes one on a
// thread of its own and leaves it.
func checkIsolation() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and in the new namespace: Go
			// ends it with the goroutine.
			errc <- nil
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}

// listenIn listens on addr ("127.0.0.1:port", TCP) inside the network
// namespace of process pid, after bringing its loopback interface up. The
// listener works from any goroutine: a socket belongs to the namespace it
// was made in. It also returns the namespace's identity ("net:[…]").
func listenIn(pid int, addr string) (net.Listener, string, error) {
	type result struct {
		ln  net.Listener
		ns  string
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ln, ns, restored, err := listenOnThread(pid, addr)
		if restored {
			runtime.UnlockOSThread()
		} // else the thread is left locked and Go ends it with the goroutine
		res <- result{ln, ns, err}
	}()
	r := <-res
	return r.ln, r.ns, r.err
}

// listenOnThread does listenIn's work on a locked thread and reports
// whether the thread is back in its own namespace.
func listenOnThread(pid int, addr string) (ln net.Listener, ns string, restored bool, err error) {
	path := "/proc/" + strconv.Itoa(pid) + "/ns/net"
	ns, err = os.Readlink(path)
	if err != nil {
		return nil, "", true, fmt.Errorf("read Chromium's network namespace: %w", err)
	}
	mine, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return nil, "", true, fmt.Errorf("read brain's network namespace: %w", err)
	}
	if ns == mine {
		return nil, "", true, errors.New("the browser runs in brain's own network namespace, not an isolated one")
	}
	target, err := os.Open(path)
	if err != nil {
		return nil, "", true, fmt.Errorf("open Chromium's network namespace: %w", err)
	}
	defer target.Close()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, "", true, fmt.Errorf("open this thread's network namespace: %w", err)
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, "", true, fmt.Errorf("enter Chromium's network namespace: %w", err)
	}
	defer func() {
		restored = unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil
	}()
	if err := loopbackUp(); err != nil {
		return nil, "", false, err
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, "", false, fmt.Errorf("listen for the page proxy in Chromium's network namespace: %w", err)
	}
	return ln, ns, false, nil
}

// loopbackUp brings up "lo" in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for the loopback interface: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback interface: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read the loopback interface's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring the loopback interface up: %w", err)
	}
	return nil
}

// killNamespace kills every process whose network namespace is ns: what is
// left of Chromium's process tree, which alone lives there.
func killNamespace(ns string) {
	if ns == "" {
		return
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && link == ns {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
