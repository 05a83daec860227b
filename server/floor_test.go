package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkFloorWSEchoJournaled is the floor of the journaled round trip
// (BenchmarkWSRoundTripJournaled), with nothing of brain in it: the
// anchors' FloorWSEcho — a 170-byte text message to a loopback
// coder/websocket echo server and back — with, before the message and
// after its echo, one acknowledged publish of a 130-byte event to a
// file-backed JetStream stream on an embedded server, over nats.go's
// in-process connection, as `brain serve` runs the journal, each waiting
// for its acknowledgement. That is what a journaled call needs at least:
// capability_invoked stored before the client sees it, the outcome stored
// before the invoker does.
func BenchmarkFloorWSEchoJournaled(b *testing.B) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			t, m, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), t, m); err != nil {
				return
			}
		}
	}))
	defer echo.Close()

	ns, err := natsserver.NewServer(&natsserver.Options{JetStream: true, StoreDir: b.TempDir(), DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(30 * time.Second) {
		b.Fatal("embedded NATS server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor.*"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	// The acknowledgement comes back on a channel subscription, which
	// nats.go's reader feeds directly: one goroutine hop fewer than
	// Request's shared reply subscription (the journal waits the same way).
	acks := make(chan *nats.Msg, 1)
	if _, err := nc.ChanSubscribe("_INBOX.floor.ack", acks); err != nil {
		b.Fatal(err)
	}
	event := &nats.Msg{Subject: "floor.s1", Reply: "_INBOX.floor.ack",
		Data: []byte(`{"v":2,"seq":12,"msg":{"type":"capability_invoked","callId":"cq3k5x7m2-42","name":"ui.echo","input":{"n":7},"invokedBy":"agent"}}`)}
	timeout := time.NewTimer(time.Hour)
	publish := func() {
		if err := nc.PublishMsg(event); err != nil {
			b.Fatal(err)
		}
		timeout.Reset(5 * time.Second)
		select {
		case ack := <-acks:
			if !bytes.HasPrefix(ack.Data, []byte(`{"stream":"FLOOR","seq":`)) {
				b.Fatalf("publish answered %s", ack.Data)
			}
		case <-timeout.C:
			b.Fatal("no acknowledgement within 5 s")
		}
	}

	c, _, err := websocket.Dial(ctx, "ws"+echo.URL[len("http"):], nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	frame := bytes.Repeat([]byte("a"), 170)
	b.ReportAllocs()
	for b.Loop() {
		publish()
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		if _, m, err := c.Read(ctx); err != nil || len(m) != len(frame) {
			b.Fatal(err)
		}
		publish()
	}
}
