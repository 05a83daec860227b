package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reading a bucket's entry from the bucket's leader. A key-value Get is a
// direct get, which any replica of the bucket may answer — a follower
// included, with what it has applied so far — so it need not see a write
// just made (NATS's key-value docs: no read-your-writes through direct
// gets; send the get to the stream's leader for that). The store's
// buckets are read to decide: a lease is read exactly when a write was
// just refused — the entry is at another revision than this node
// recorded — to learn why (a renewal whose answer was lost and that the
// bucket's next leader stored, another node's take, a delete), and a
// follower's older entry made a renewal update at a revision already gone
// and take its own lease for "taken by another node" (a session moved
// during a NATS leader election, with nobody else holding it); a
// session's owner record is read to decide who may reach it, and one not
// seen yet would let another tenant's token claim a session just created
// on another node. Every read of these buckets goes to the leader: the
// regular message-get API, which only a stream's leader answers.

// kvOperationHeader marks a delete or purge of a key (nats.go's kv.go).
const kvOperationHeader = "KV-Operation"

// kvEntry is a bucket's entry as its leader has it.
type kvEntry struct {
	value    []byte
	revision uint64
}

// leaderGet returns key's entry in bucket kv as the bucket's leader has
// it, or jetstream.ErrKeyNotFound when there is none (never written,
// deleted, or expired). A bucket without a leader is nats.ErrNoResponders
// or a timeout, which the store's retry rides out. With one replica, the
// only one is the leader: the direct get is read.
func (s *Store) leaderGet(ctx context.Context, kv jetstream.KeyValue, key string) (kvEntry, error) {
	if s.opts.Replicas <= 1 {
		e, err := kv.Get(ctx, key)
		if err != nil {
			return kvEntry{}, err
		}
		return kvEntry{value: e.Value(), revision: e.Revision()}, nil
	}
	bucket := kv.Bucket()
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return kvEntry{}, err
	}
	msg, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return kvEntry{}, err
	}
	return parseMsgGet(msg)
}

// readLease returns session id's lease entry as the lease bucket's leader
// has it (leaderGet).
func (l *Leases) readLease(ctx context.Context, id string) (kvEntry, error) {
	return l.s.leaderGet(ctx, l.kv, id)
}

// parseMsgGet reads a message-get answer of a bucket's stream.
func parseMsgGet(msg *nats.Msg) (kvEntry, error) {
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
			Data     []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return kvEntry{}, fmt.Errorf("store: read a bucket's entry: the answer does not decode: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return kvEntry{}, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return kvEntry{}, fmt.Errorf("nats: %w", resp.Error)
	case resp.Message == nil:
		return kvEntry{}, jetstream.ErrInvalidJetStreamResponse
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return kvEntry{}, fmt.Errorf("store: read a bucket's entry: its headers do not decode: %w", err)
		}
		if h.Get(kvOperationHeader) != "" {
			return kvEntry{}, jetstream.ErrKeyNotFound // a delete or purge marker
		}
	}
	return kvEntry{value: resp.Message.Data, revision: resp.Message.Sequence}, nil
}
