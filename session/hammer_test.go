package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// seqReader reads a subscription from its start, checking that seqs have no
// gaps and that no snapshot interrupts them, until it has read target.
type seqReader struct {
	sub    *session.Subscription
	from   uint64
	read   atomic.Uint64 // the last seq read
	target atomic.Uint64 // 0 until the test knows the last seq
	done   chan struct{}
}

func startReader(t *testing.T, s *session.Session, from uint64) *seqReader {
	r := &seqReader{sub: s.Subscribe(from), from: from, done: make(chan struct{})}
	r.read.Store(from)
	go func() {
		defer close(r.done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for {
			if tg := r.target.Load(); tg != 0 && r.read.Load() >= tg {
				return
			}
			ev, err := r.sub.Next(ctx)
			if err != nil {
				t.Errorf("reader from %d, at %d: %v", r.from, r.read.Load(), err)
				return
			}
			if _, ok := ev.Msg.(*protocol.Snapshot); ok {
				t.Errorf("reader from %d got a snapshot at %d", r.from, ev.Seq)
				return
			}
			if want := r.read.Load() + 1; ev.Seq != want {
				t.Errorf("reader from %d got seq %d, want %d", r.from, ev.Seq, want)
				return
			}
			r.read.Store(ev.Seq)
		}
	}()
	return r
}

// TestHammer: registers, deregisters, invocations of every kind, approvals,
// cancels and subscribers from many goroutines at once. Afterwards every
// call that started has exactly one outcome event, ending its events, and
// every subscriber read gap-free seqs.
func TestHammer(t *testing.T) {
	const goroutines, ops = 8, 200
	s := session.New("hammer", &session.Options{LogSize: 1 << 17, FinishedMemory: 1 << 14})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	blockCap := agentCap("h.block")
	approveCap := agentCap("h.approve")
	approveCap.RequiresApproval = true
	fireCap := agentCap("h.fire")
	fireCap.FireAndForget = true
	renderCap := clientCap("h.client")
	renderCap.Render = &protocol.RenderSpec{Source: protocol.RenderSource{Kind: protocol.SourceIframe, URL: "https://ui.example/"},
		Targets: []protocol.RenderTarget{protocol.TargetChat}}
	timeoutCap := clientCap("h.timeout")
	timeoutCap.CallTimeoutMs = ms(1)
	must(s.RegisterAgent(agentCap("h.echo"), echo))
	must(s.RegisterAgent(blockCap, session.HandlerFunc(func(ctx context.Context, _ *session.Call) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})))
	must(s.RegisterAgent(approveCap, echo))
	must(s.RegisterAgent(fireCap, echo))
	must(s.Register(session.Client, renderCap, timeoutCap))

	// The client answers h.client; nobody answers h.timeout.
	answer(t, s, session.Client, "h.client", func(inv *protocol.CapabilityInvoked) json.RawMessage { return inv.Input })
	readers := []*seqReader{startReader(t, s, 0)}
	var readersMu sync.Mutex

	var (
		invokedPastValidation atomic.Int64
		startedMu             sync.Mutex
		started               []string
		blocked               = make(chan string, goroutines*ops)
	)
	refused := map[protocol.Code]bool{protocol.CodeNotFound: true, protocol.CodeForbidden: true,
		protocol.CodeInvalidInput: true, protocol.CodeInvalidRequest: true}
	invoke := func(ctx context.Context, name string, input json.RawMessage) protocol.Outcome {
		out := s.Invoke(ctx, protocol.AudienceLLM, name, input)
		if out.IsOK() || !refused[out.Err.Code] {
			invokedPastValidation.Add(1)
		}
		return out
	}
	start := func(name string) string {
		id, err := s.Start(protocol.AudienceLLM, name, textInput)
		if err != nil {
			t.Errorf("Start %s: %v", name, err)
			return ""
		}
		startedMu.Lock()
		started = append(started, id)
		startedMu.Unlock()
		return id
	}
	wantOutcome := func(what string, out protocol.Outcome, codes ...protocol.Code) {
		for _, c := range codes {
			if c == "" && out.IsOK() || !out.IsOK() && out.Err.Code == c {
				return
			}
		}
		t.Errorf("%s: outcome %s, want one of %q", what, jsonOf(t, out), codes)
	}
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			own := clientCap(fmt.Sprintf("g%d.tool", g))
			turn := clientCap(fmt.Sprintf("g%d.turn", g))
			turn.Scope = protocol.ScopeTurn
			for j := range ops {
				input := json.RawMessage(fmt.Sprintf(`{"text":"g%d op%d"}`, g, j))
				switch j % 10 {
				case 0:
					if err := s.Register(session.Client, own, turn); err != nil {
						t.Errorf("register: %v", err)
					}
					// Another origin may not take the name.
					if err := s.Register(session.App("intruder"), appCap("intruder", own.Name)); err == nil {
						t.Errorf("an app took %s", own.Name)
					}
				case 1:
					wantOutcome("echo", invoke(context.Background(), "h.echo", input), "")
				case 2:
					if id := start("h.block"); id != "" {
						blocked <- id
					}
				case 3:
					out := invoke(context.Background(), "h.client", input)
					if !out.IsOK() || !jsonEqual(out.Value, input) {
						t.Errorf("h.client: %s", jsonOf(t, out))
					}
				case 4:
					id := start("h.approve")
					var err error
					switch j % 3 {
					case 0:
						err = s.Approve(session.Client, approveOf(s, id, "h"))
					case 1:
						err = s.Approve(session.Client, &protocol.CapabilityApprove{CallID: id, Decision: protocol.DecisionRejected, DecidedBy: "h"})
					default:
						err = s.Cancel(id, "")
					}
					if err != nil {
						t.Errorf("deciding %s: %v", id, err)
					}
				case 5:
					wantOutcome("fire", invoke(context.Background(), "h.fire", input), "")
				case 6:
					wantOutcome("cancelled caller", invoke(cancelled, own.Name, input), protocol.CodeCancelled)
					wantOutcome("timeout", invoke(context.Background(), "h.timeout", input), protocol.CodeTimeout)
				case 7:
					if err := s.Deregister(session.Client, own.Name); err != nil {
						t.Errorf("deregister: %v", err)
					}
					wantOutcome("deregistered", invoke(context.Background(), own.Name, input), protocol.CodeNotFound)
					wantOutcome("bad input", invoke(context.Background(), "h.echo", json.RawMessage(`{"text":1}`)), protocol.CodeInvalidInput)
				case 8: // cancel someone's blocked call
					select {
					case id := <-blocked:
						if err := s.Cancel(id, "hammer"); err != nil {
							t.Errorf("cancel %s: %v", id, err)
						}
					default:
					}
					if g == 0 {
						s.EndTurn(protocol.TurnCompleted, "")
					}
				case 9: // a subscriber comes and goes; readers of the whole run join
					from := s.LastSeq()
					if from > 5 {
						from -= 5
					}
					sub := s.Subscribe(from)
					ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
					for k := range 3 {
						ev, err := sub.Next(ctx)
						if err != nil || ev.Seq != from+uint64(k)+1 {
							t.Errorf("transient subscriber from %d: seq %d, %v", from, ev.Seq, err)
							break
						}
					}
					cancel()
					go sub.Close()
					sub.Close()
					if j%50 == 9 {
						readersMu.Lock()
						readers = append(readers, startReader(t, s, s.LastSeq()))
						readersMu.Unlock()
					}
					_ = s.PromptSection()
					_ = s.Snapshot()
					wantOutcome("list", invoke(context.Background(), session.CapabilitiesListName, nil), "")
				}
			}
		})
	}
	wg.Wait()
	close(blocked)
	for id := range blocked {
		if err := s.Cancel(id, "end"); err != nil {
			t.Errorf("cancel %s: %v", id, err)
		}
	}

	// Wait until every started call has its outcome (approved calls finish
	// after Approve returns).
	startedSet := map[string]bool{}
	for _, id := range started {
		if startedSet[id] {
			t.Fatalf("call id %s returned twice", id)
		}
		startedSet[id] = true
	}
	all := s.Subscribe(0)
	defer all.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var evs []session.Event
	pending := len(startedSet)
	for pending > 0 || uint64(len(evs)) < s.LastSeq() {
		ev, err := all.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the started calls' outcomes (%d left): %v", pending, err)
		}
		evs = append(evs, ev)
		if o, ok := ev.Msg.(*protocol.CapabilityOutcome); ok && startedSet[o.CallID] {
			pending--
		}
	}

	// Stop the readers at one more event.
	target := s.LastSeq() + 1
	readersMu.Lock()
	for _, r := range readers {
		r.target.Store(target)
	}
	readersMu.Unlock()
	must(s.Register(session.Client, clientCap("h.end")))
	for _, r := range readers {
		recv(t, r.done, fmt.Sprintf("the reader from %d to reach %d (at %d)", r.from, target, r.read.Load()))
		r.sub.Close()
		if r.read.Load() != target {
			t.Errorf("reader from %d stopped at %d, want %d", r.from, r.read.Load(), target)
		}
	}

	// Every call: exactly one outcome, its last event.
	outcomes := map[string]int{}
	lastEvent := map[string]protocol.Type{}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		id := protocol.CallIDOf(ev.Msg)
		if id == "" {
			continue
		}
		if outcomes[id] > 0 {
			t.Errorf("call %s has a %s event after its outcome", id, ev.Msg.MessageType())
		}
		if _, ok := ev.Msg.(*protocol.CapabilityOutcome); ok {
			outcomes[id]++
		}
		lastEvent[id] = ev.Msg.MessageType()
	}
	for id, typ := range lastEvent {
		if outcomes[id] != 1 || typ != protocol.TypeCapabilityOutcome {
			t.Errorf("call %s: %d outcomes, last event %s", id, outcomes[id], typ)
		}
	}
	for id := range startedSet {
		if outcomes[id] != 1 {
			t.Errorf("started call %s has %d outcome events", id, outcomes[id])
		}
	}
	if want := int(invokedPastValidation.Load()) + len(startedSet); len(outcomes) != want {
		t.Errorf("%d calls have outcomes; %d invocations passed validation and %d were started", len(outcomes), invokedPastValidation.Load(), len(startedSet))
	}
	if snap := s.Snapshot(); len(snap.PendingCalls) != 0 {
		t.Errorf("calls still pending: %s", jsonOf(t, snap.PendingCalls))
	}
	t.Logf("%d events, %d calls, %d readers", len(evs), len(outcomes), len(readers))
}
