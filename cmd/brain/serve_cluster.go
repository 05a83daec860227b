package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/brainrt/brain/internal/telemetry"
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/store"
)

// clusterReplicas is the replication factor of the stream and buckets when
// brain runs as one node of a cluster (--node-id): R3, so a NATS cluster of
// three keeps every event and lease through the loss of one server.
const clusterReplicas = 3

// checkClusterFlags validates --nats, --node-id, --advertise and
// --lease-ttl together, before anything starts.
func checkClusterFlags(a serveArgs) error {
	if a.nodeID == "" {
		if a.advertise != "" || a.leaseTTL != 0 {
			return errors.New("--advertise and --lease-ttl need --node-id (cluster mode)")
		}
		return nil
	}
	if a.nats == "" {
		return errors.New("--node-id needs --nats: a cluster's nodes share an external NATS cluster (docs/cluster.md)")
	}
	if !server.ValidSessionID(a.nodeID) {
		return fmt.Errorf("--node-id %q: use 1 to 128 of A-Z a-z 0-9 _ -", a.nodeID)
	}
	if a.leaseTTL != 0 && a.leaseTTL < 500*time.Millisecond {
		return fmt.Errorf("--lease-ttl %s: at least 500ms", a.leaseTTL)
	}
	if a.advertise != "" {
		u, err := url.Parse(a.advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("--advertise %q: want the node's base URL, like http://10.0.0.5:7777", a.advertise)
		}
	}
	return nil
}

// advertiseURL is the address other nodes forward this node's sessions'
// connections to: --advertise, or the listener's own address when it is
// a specific one.
func advertiseURL(a serveArgs, listen net.Addr, scheme string) (string, error) {
	if a.advertise != "" {
		return a.advertise, nil
	}
	ta, ok := listen.(*net.TCPAddr)
	if !ok || ta.IP.IsUnspecified() {
		return "", fmt.Errorf("--addr %s listens on every interface: give --advertise, the URL other nodes reach this one at", listen)
	}
	return scheme + "://" + listen.String(), nil
}

// clusterJoin is what the manager of a cluster's node needs: its lease and
// holder functions and the lease TTL (all zero without --node-id).
type clusterJoin struct {
	lease  server.LeaseFunc
	holder server.HolderFunc
	ttl    time.Duration
}

// joinCluster makes this kernel one node of a cluster when --node-id is
// set: it opens the session leases and returns what the manager needs. The leases are renewed until the returned close, which
// releases whatever the stop (the manager's Close) did not release; it
// runs before the store closes. Without --node-id it returns nil and a
// no-op.
func joinCluster(ctx context.Context, a serveArgs, st *store.Store, listen net.Addr, scheme string, logger *slog.Logger) (*clusterJoin, func(), error) {
	if a.nodeID == "" {
		return &clusterJoin{}, func() {}, nil
	}
	addr, err := advertiseURL(a, listen, scheme)
	if err != nil {
		return nil, nil, err
	}
	leases, err := st.Leases(ctx, &store.LeaseOptions{Node: a.nodeID, Addr: addr, TTL: a.leaseTTL})
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	logger.Info("cluster: joined", slog.String("node", a.nodeID), slog.String("advertise", addr), slog.Duration("lease_ttl", leases.TTL()))
	lease := func(ctx context.Context, id string) (server.Lease, error) {
		x, err := leases.Acquire(ctx, id)
		if err != nil {
			return nil, err
		}
		return x, nil
	}
	holder := func(ctx context.Context, id string) (string, bool, error) {
		h, held, err := leases.Holder(ctx, id)
		return h.Node, held, err
	}
	return &clusterJoin{lease: lease, holder: holder, ttl: leases.TTL()}, func() {
		if err := leases.Close(); err != nil {
			logger.Warn("cluster: release leases", slog.String("error", err.Error()))
		}
		logger.Info("cluster: sessions handed over", slog.String("node", a.nodeID))
	}, nil
}

// storeStat is the store's health for /metrics (brain_store_ready); a
// store not open yet is not ready.
func storeStat(st *store.Store) telemetry.StoreStat {
	if st == nil {
		return telemetry.StoreStat{State: "starting"}
	}
	h := st.Health()
	return telemetry.StoreStat{Ready: h.Ready, State: string(h.State), Reachable: h.Reachable, Servers: h.Servers}
}

// storeReady is /readyz's question: nil while the store can serve, what
// is wrong with it otherwise ("the session store has no quorum: 1 of 3
// NATS servers reachable").
func storeReady(st *store.Store) func() error {
	return func() error {
		if h := st.Health(); !h.Ready {
			return errors.New(h.Message)
		}
		return nil
	}
}
