// Package natstest starts in-process NATS clusters for tests.
package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// StartCluster starts n in-process NATS servers with JetStream, clustered
// over routes on loopback, and returns their client URLs; t's cleanup
// shuts them down. Route ports are picked free first: a cluster of port -1
// routes cannot name its peers. Servers do not advertise each other to
// clients (NoAdvertise), so a client knows only the URL it was given and a
// proxy in front of one server can partition a node.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	urls := make([]string, n)
	for i := range n {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		ns, err := natsserver.NewServer(&natsserver.Options{
			ServerName: fmt.Sprintf("nats%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), JetStreamMaxMemory: 32 << 20, JetStreamMaxStore: 256 << 20,
			NoSigs: true, NoLog: true, DisableJetStreamBanner: true,
			Cluster: natsserver.ClusterOpts{Name: "brain-test", Host: "127.0.0.1", Port: ports[i], NoAdvertise: true},
			Routes:  natsserver.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(20 * time.Second) {
			t.Fatalf("nats server %d not ready", i+1)
		}
		urls[i] = ns.ClientURL()
	}
	return urls
}
