package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// appRender is a streaming render capability owned by app id.
func appRender(id, name string) protocol.Capability {
	c := renderCap(name, true)
	c.Side, c.Origin = protocol.SideApp, protocol.Origin{Kind: protocol.OriginApp, ID: id}
	return c
}

// checkCallOwners fails unless, for every call id among evs, all its
// events have one owner, and every id that had a partial render_invoked
// has exactly one capability_outcome: a peer that drew a call's partials
// sees how it ended, and no peer sees events of a call it does not own.
func checkCallOwners(t *testing.T, evs []session.Event) {
	t.Helper()
	owner := map[string]session.Peer{}
	streamed := map[string]bool{}
	outcomes := map[string]int{}
	for _, ev := range evs {
		id := protocol.CallIDOf(ev.Msg)
		if id == "" {
			continue
		}
		if o, ok := owner[id]; ok && !o.Same(ev.Owner) {
			t.Fatalf("call %s: a %s owned by %v after events owned by %v", id, ev.Msg.MessageType(), ev.Owner, o)
		}
		owner[id] = ev.Owner
		if m, ok := ev.Msg.(*protocol.RenderInvoked); ok && m.Partial {
			streamed[id] = true
		}
		if _, ok := ev.Msg.(*protocol.CapabilityOutcome); ok {
			outcomes[id]++
		}
	}
	for id, n := range outcomes {
		if n != 1 {
			t.Fatalf("call %s has %d outcomes", id, n)
		}
	}
	for id := range streamed {
		if outcomes[id] != 1 {
			t.Fatalf("call %s streamed partials and has %d outcomes, want 1", id, outcomes[id])
		}
	}
}

// TestAttackRenderStreamRegistration: the capability a stream was
// reserved for changes hands or definition while its props stream.
func TestAttackRenderStreamRegistration(t *testing.T) {
	t.Run("registered again by another app: a new call, partials ended for the first", func(t *testing.T) {
		s := session.New("steal", nil)
		if err := s.Register(session.App("a"), appRender("a", "app.chart")); err != nil {
			t.Fatal(err)
		}
		rs, err := s.StreamRender(protocol.AudienceLLM, "app.chart")
		if err != nil {
			t.Fatal(err)
		}
		if !rs.AppendArguments(`{"title":"secret plan`) {
			t.Fatal("no partial")
		}
		if err := s.Deregister(session.App("a"), "app.chart"); err != nil {
			t.Fatal(err)
		}
		if err := s.Register(session.App("b"), appRender("b", "app.chart")); err != nil {
			t.Fatal(err)
		}
		if rs.AppendArguments(` for Q3"}`) {
			t.Fatal("a partial went out after the capability changed hands")
		}
		answer(t, s, session.App("b"), "app.chart", func(*protocol.CapabilityInvoked) json.RawMessage { return json.RawMessage(`{"shown":true}`) })
		out := s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"secret plan for Q3"}`))
		wantValue(t, out, `{"shown":true}`)
		evs := allEvents(t, s)
		checkCallOwners(t, evs)
		if got := fmt.Sprint(trail(evs, rs.CallID())); got != "[render_invoked capability_outcome]" {
			t.Fatalf("events of the streamed id: %s, want the partial and its end", got)
		}
		inv := only[*protocol.CapabilityInvoked](evs)
		if len(inv) != 1 || inv[0].CallID == rs.CallID() {
			t.Fatalf("calls %+v: want one, with an id of its own", inv)
		}
	})

	t.Run("registered again requiring approval: partials ended, the call awaits approval under a new id", func(t *testing.T) {
		s := session.New("approve", nil)
		if err := s.Register(session.App("a"), appRender("a", "app.chart")); err != nil {
			t.Fatal(err)
		}
		rs, _ := s.StreamRender(protocol.AudienceLLM, "app.chart")
		rs.Props(json.RawMessage(`{"title":"x"}`))
		c := appRender("a", "app.chart")
		c.RequiresApproval = true
		if err := s.Register(session.App("a"), c); err != nil {
			t.Fatal(err)
		}
		sub := watch(t, s)
		done := make(chan protocol.Outcome, 1)
		go func() { done <- s.InvokeStreamed(context.Background(), rs, json.RawMessage(`{"title":"x"}`)) }()
		req, _ := waitFor[*protocol.ApprovalRequested](t, sub, nil)
		if req.CallID == rs.CallID() {
			t.Fatal("the call whose props streamed before approval was required awaits approval under the same id")
		}
		if err := s.Approve(session.Client, &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionRejected, DecidedBy: "ada"}); err != nil {
			t.Fatal(err)
		}
		wantCode(t, recv(t, done, "outcome"), protocol.CodeRejected)
		checkCallOwners(t, allEvents(t, s))
	})

	t.Run("deregistered: the call is not_found and ends the partials", func(t *testing.T) {
		s := session.New("gone", nil)
		_ = s.Register(session.App("a"), appRender("a", "app.chart"))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "app.chart")
		rs.Props(json.RawMessage(`{"title":"x"}`))
		_ = s.Deregister(session.App("a"), "app.chart")
		wantCode(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"x"}`)), protocol.CodeNotFound)
		evs := allEvents(t, s)
		checkCallOwners(t, evs)
		if s.PendingCalls() != 0 || len(only[*protocol.CapabilityInvoked](evs)) != 0 {
			t.Fatal("a call was made")
		}
	})

	t.Run("registered again unchanged: the same id", func(t *testing.T) {
		s := session.New("same", nil)
		_ = s.Register(session.App("a"), appRender("a", "app.chart"))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "app.chart")
		rs.Props(json.RawMessage(`{"title":"x"}`))
		_ = s.Register(session.App("a"), appRender("a", "app.chart")) // no change, no event
		answer(t, s, session.App("a"), "app.chart", func(*protocol.CapabilityInvoked) json.RawMessage { return json.RawMessage(`{}`) })
		wantValue(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"x"}`)), `{}`)
		evs := allEvents(t, s)
		checkCallOwners(t, evs)
		if got := fmt.Sprint(trail(evs, rs.CallID())); got != "[render_invoked capability_invoked render_invoked capability_outcome]" {
			t.Fatalf("events of the call: %s", got)
		}
	})
}

// TestAttackRenderStreamLifecycle: a stream closed, invoked, cancelled and
// raced in every order ends with exactly one outcome and no call left.
func TestAttackRenderStreamLifecycle(t *testing.T) {
	t.Run("Close and InvokeStreamed race: one of them wins", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		for round := range 200 {
			rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			rs.Props(json.RawMessage(`{"title":"r` + fmt.Sprint(round) + `"}`))
			var wg sync.WaitGroup
			var out protocol.Outcome
			wg.Go(rs.Close)
			wg.Go(func() { out = s.InvokeStreamed(context.Background(), rs, json.RawMessage(`{"title":"x"}`)) })
			wg.Wait()
			evs := eventsAfter(t, s, 0)
			trailOf := fmt.Sprint(trail(evs, rs.CallID()))
			switch {
			case out.IsOK() && trailOf == "[render_invoked capability_invoked render_invoked capability_outcome]":
			case !out.IsOK() && out.Err.Code == protocol.CodeInvalidRequest && trailOf == "[render_invoked capability_outcome]":
			default:
				t.Fatalf("round %d: outcome %+v, events %s", round, out, trailOf)
			}
		}
		checkCallOwners(t, allEvents(t, s))
		if s.PendingCalls() != 0 {
			t.Fatalf("%d calls pending", s.PendingCalls())
		}
	})

	t.Run("invoked with a cancelled context: one cancelled outcome", func(t *testing.T) {
		s := session.New("cancelled", nil)
		c := renderCap("slow.show", true)
		if err := s.RegisterAgent(c, newGate(false)); err != nil {
			t.Fatal(err)
		}
		rs, _ := s.StreamRender(protocol.AudienceLLM, "slow.show")
		rs.Props(json.RawMessage(`{"title":"x"}`))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantCode(t, s.InvokeStreamed(ctx, rs, json.RawMessage(`{"title":"x"}`)), protocol.CodeCancelled)
		checkCallOwners(t, allEvents(t, s))
		if s.PendingCalls() != 0 {
			t.Fatal("a call is left pending")
		}
	})

	t.Run("the peer cancels the reserved id before the call: nothing to cancel", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		rs.Props(json.RawMessage(`{"title":"x"}`))
		if err := s.Cancel(rs.CallID(), "no"); err == nil {
			t.Fatal("cancelling a stream that is no call succeeded")
		}
		wantValue(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"x"}`)), `{"shown":true}`)
		checkCallOwners(t, allEvents(t, s))
	})

	t.Run("streams are bounded per session, and give their slot back", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		var open []*session.RenderStream
		for {
			rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
			if err != nil {
				wantErrCode(t, err, protocol.CodeQuotaExceeded)
				break
			}
			open = append(open, rs)
			if len(open) > 1000 {
				t.Fatal("no bound on the streams open in a session")
			}
		}
		if len(open) != 8 {
			t.Fatalf("%d streams open at once, want 8", len(open))
		}
		open[0].Close()
		open[0].Close() // twice: one slot back, not two
		wantValue(t, s.InvokeStreamed(waitCtx(t), open[1], json.RawMessage(`{}`)), `{"shown":true}`)
		_ = s.InvokeStreamed(waitCtx(t), open[1], json.RawMessage(`{}`)) // again: invalid_request, no slot
		for range 2 {
			if _, err := s.StreamRender(protocol.AudienceLLM, "note.show"); err != nil {
				t.Fatalf("a slot was not given back: %v", err)
			}
		}
		if _, err := s.StreamRender(protocol.AudienceLLM, "note.show"); err == nil {
			t.Fatal("a slot was given back twice")
		}
	})
}

// TestAttackRenderStreamBounds: hostile argument streams cost bounded
// events, bytes and time.
func TestAttackRenderStreamBounds(t *testing.T) {
	t.Run("many MB of arguments in tiny and huge fragments", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		for _, frag := range []int{1, 7, 600, 64 << 10, 8 << 20} {
			t.Run(fmt.Sprint(frag), func(t *testing.T) {
				before := s.LastSeq()
				rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
				defer rs.Close()
				start := time.Now()
				rs.AppendArguments(`{"title":"big","body":"`)
				piece := strings.Repeat("é", frag/2+1)[:frag]
				// The time of each 512 KiB of the stream: a cost per
				// fragment that grows with what the stream holds shows as
				// its last quarter slower than its first.
				const part = 512 << 10
				var parts []time.Duration
				mark := start
				for total := 0; total < 8<<20; total += len(piece) {
					rs.AppendArguments(piece)
					if (total+len(piece))/part > total/part {
						parts = append(parts, time.Since(mark))
						mark = time.Now()
					}
				}
				took := time.Since(start)
				evs := eventsAfter(t, s, before)
				n, bytes := 0, 0
				for _, ev := range evs {
					if m, ok := ev.Msg.(*protocol.RenderInvoked); ok {
						n++
						bytes += len(m.Props)
						if !json.Valid(m.Props) {
							t.Fatalf("partial props are not JSON: %.80q", m.Props)
						}
					}
				}
				if n > 64 || bytes > 4<<20 {
					t.Fatalf("%d partials, %d bytes of props: over the bounds (64, 4 MiB)", n, bytes)
				}
				// Against the stream's own start, not a fixed bound: 8 MiB
				// in 1-byte fragments took 1.5 to 21 s under -race on two
				// cores, by the load beside it. Linear: the fastest part of
				// the last quarter about as fast as the fastest of the first
				// (a cost growing with the stream's size: 25 times slower;
				// load alone, beside a CPU spinner: up to 2.2 times); a
				// load spike must last through the whole last quarter, at
				// eight times the first's, to fail it.
				if q := len(parts) / 4; q > 0 {
					first, last := slices.Min(parts[:q]), slices.Min(parts[len(parts)-q:])
					t.Logf("512 KiB at best in the first quarter %v, in the last %v", first, last)
					if last > 8*first+10*time.Millisecond {
						t.Fatalf("8 MiB of arguments in %d-byte fragments: the last quarter's 512 KiB took at best %v, the first's %v: the cost grows with the stream", frag, last, first)
					}
				}
				if took > 2*time.Minute { // stuck, whatever the load
					t.Fatalf("8 MiB of arguments in %d-byte fragments took %v", frag, took)
				}
				t.Logf("%d-byte fragments: %d partials, %d bytes, %v", frag, n, bytes, took)
			})
		}
	})

	t.Run("a quadratic number cannot stall a stream", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		defer rs.Close()
		start := time.Now()
		rs.AppendArguments(`{"title":"n","n":`)
		for range 8 {
			rs.AppendArguments(strings.Repeat("1", 16<<10))
		}
		for range 7 {
			rs.AppendArguments(strings.Repeat("+", 16<<10))
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("240 KiB of number bytes took %v", took)
		}
	})

	t.Run("invalid UTF-8, deep nesting, not an object: dropped", func(t *testing.T) {
		s := streamSession(t, nil, renderCap("note.show", true))
		for _, args := range []string{
			"{\"title\":\"\xff\xfe",
			`{"title":` + strings.Repeat("[", 100000),
			strings.Repeat(`"`, 100000),
			`[{"title":"x"}`,
			"{\"title\":\"\xed\xa0\x80\"", // a UTF-16 surrogate in UTF-8
		} {
			before := s.LastSeq()
			rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
			for i := 0; i < len(args); i += 4096 {
				rs.AppendArguments(args[i:min(i+4096, len(args))])
			}
			for _, ev := range eventsAfter(t, s, before) {
				if m, ok := ev.Msg.(*protocol.RenderInvoked); ok {
					t.Fatalf("arguments %.40q streamed props %.80q", args, m.Props)
				}
			}
			rs.Close()
		}
	})
}

// TestAttackRenderStreamRestore: a kernel that dies with streams open
// leaves nothing pending and the partials ended, once.
func TestAttackRenderStreamRestore(t *testing.T) {
	j := &memJournal{}
	s := session.New("restore", &session.Options{Journal: j})
	if err := s.Register(session.App("a"), appRender("a", "app.chart")); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterAgent(renderCap("note.show", true), returns(`{"shown":true}`, nil)); err != nil {
		t.Fatal(err)
	}
	dangling, _ := s.StreamRender(protocol.AudienceLLM, "app.chart")
	dangling.Props(json.RawMessage(`{"title":"cut"}`))
	closed, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
	closed.Props(json.RawMessage(`{"title":"closed"}`))
	closed.Close()
	made, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
	made.Props(json.RawMessage(`{"title":"made"}`))
	wantValue(t, s.InvokeStreamed(waitCtx(t), made, json.RawMessage(`{"title":"made"}`)), `{"shown":true}`)
	// The app's call is dispatched and the kernel dies before its result.
	inflight, _ := s.StreamRender(protocol.AudienceLLM, "app.chart")
	inflight.Props(json.RawMessage(`{"title":"inflight"}`))
	sub := watch(t, s)
	go s.InvokeStreamed(context.Background(), inflight, json.RawMessage(`{"title":"inflight"}`))
	waitFor[*protocol.CapabilityInvoked](t, sub, func(m *protocol.CapabilityInvoked) bool { return m.CallID == inflight.CallID() })
	// Here the process dies: dangling never closes.
	evs := j.events(t)

	j2 := &memJournal{}
	r, err := session.Restore("restore", evs, &session.Options{Journal: j2}, func(r *session.Session) error {
		return r.RegisterAgent(renderCap("note.show", true), returns(`{"shown":true}`, nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	all := allEvents(t, r)
	for _, id := range []string{dangling.CallID(), closed.CallID(), made.CallID()} {
		if n := len(only[*protocol.CapabilityOutcome](filterCall(all, id))); n != 1 {
			t.Fatalf("call %s has %d outcomes after the restore, want 1", id, n)
		}
	}
	outs := only[*protocol.CapabilityOutcome](filterCall(all, dangling.CallID()))
	if outs[0].Outcome.Err == nil || outs[0].Outcome.Err.Code != protocol.CodeCancelled {
		t.Fatalf("the dangling stream ended with %+v, want cancelled", outs[0].Outcome)
	}
	if ev := lastOf(all, dangling.CallID()); !ev.Owner.Same(session.App("a")) {
		t.Fatalf("the dangling stream's end is owned by %v, want the app", ev.Owner)
	}
	// The in-flight call waits for the app again; its result still lands once.
	if err := r.Result(session.App("a"), &protocol.CapabilityResult{CallID: inflight.CallID(), Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, r)
	checkCallOwners(t, allEvents(t, r))

	// Restoring the restored session's journal adds no second end.
	again, err := session.Restore("restore", append(append([]session.Event(nil), evs...), j2.events(t)...), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.LastSeq() != r.LastSeq() || again.PendingCalls() != 0 {
		t.Fatalf("the second restore: seq %d (want %d), %d pending", again.LastSeq(), r.LastSeq(), again.PendingCalls())
	}
	checkCallOwners(t, allEvents(t, again))
}

func filterCall(evs []session.Event, id string) []session.Event {
	var out []session.Event
	for _, ev := range evs {
		if protocol.CallIDOf(ev.Msg) == id {
			out = append(out, ev)
		}
	}
	return out
}

func lastOf(evs []session.Event, id string) session.Event {
	f := filterCall(evs, id)
	return f[len(f)-1]
}

// waitIdle waits until s has no pending call.
func waitIdle(t *testing.T, s *session.Session) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for s.PendingCalls() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still pending", s.PendingCalls())
		}
		runtime.Gosched()
	}
}

// TestAttackRenderStreamGoroutines: streams closed, invoked, refused and
// abandoned to a deregistration leave no goroutine behind.
func TestAttackRenderStreamGoroutines(t *testing.T) {
	s := streamSession(t, nil, renderCap("note.show", true))
	base := liveGoroutines()
	for round := range 300 {
		rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
		if err != nil {
			t.Fatal(err)
		}
		rs.AppendArguments(`{"title":"` + strings.Repeat("g", 700))
		switch round % 3 {
		case 0:
			rs.Close()
		case 1:
			_ = s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"g"}`))
		case 2:
			_ = s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"nope":1}`)) // refused
		}
	}
	deadline := time.Now().Add(waitLimit)
	for liveGoroutines() > base+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after 300 streams, %d before (idle handler workers not counted)", liveGoroutines(), base)
		}
		runtime.Gosched()
	}
	if s.PendingCalls() != 0 {
		t.Fatalf("%d calls pending", s.PendingCalls())
	}
}

// TestAttackRenderStreamPrefixes streams random documents in random
// fragments: every partial is a JSON object that shows no more than the
// arguments said — each string a prefix of the final one, each number a
// prefix of its digits, no key or element the document lacks — and each
// partial extends the one before.
func TestAttackRenderStreamPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	s := streamSession(t, nil, renderCap("note.show", true))
	seen := 0
	for doc := range 300 {
		in := randomDoc(r, 3)
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		before := s.LastSeq()
		rs, _ := s.StreamRender(protocol.AudienceLLM, "note.show")
		for i := 0; i < len(b); {
			n := 1 + r.IntN(900)
			rs.AppendArguments(string(b[i:min(i+n, len(b))]))
			i += n
		}
		rs.Close()
		var want any
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		var prev any
		for _, p := range partials(eventsAfter(t, s, before), rs.CallID()) {
			var got any
			d := json.NewDecoder(strings.NewReader(string(p.Props)))
			d.UseNumber()
			if err := d.Decode(&got); err != nil {
				t.Fatalf("doc %d: partial %s: %v", doc, p.Props, err)
			}
			if why := prefixOf(got, want); why != "" {
				t.Fatalf("doc %d: partial %s shows more than %s: %s", doc, p.Props, b, why)
			}
			if prev != nil {
				if why := prefixOf(prev, got); why != "" {
					t.Fatalf("doc %d: partial %s does not extend the one before: %s", doc, p.Props, why)
				}
			}
			prev = got
			seen++
		}
	}
	if seen < 300 {
		t.Fatalf("only %d partials from 300 documents", seen)
	}
	t.Logf("%d partials checked", seen)
}

// randomDoc is a random JSON object: strings with escapes and multi-byte
// characters, numbers, literals, arrays and objects.
func randomDoc(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for i := range 1 + r.IntN(5) {
		m[fmt.Sprintf("k%d_%s", i, strings.Repeat("é", r.IntN(3)))] = randomValue(r, depth-1)
	}
	return m
}

func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(7)
	if depth <= 0 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		return r.IntN(2) == 0
	case 1:
		return nil
	case 2:
		return json.Number([]string{"0", "-12", "3.25", "1e9", "-4.5E-3", "123456789"}[r.IntN(6)])
	case 3, 4:
		var b strings.Builder
		for range r.IntN(1500) {
			b.WriteString([]string{"a", " ", "\"", "\\", "\n", "é", "😀", "<", "\u2028"}[r.IntN(9)])
		}
		return b.String()
	case 5:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth-1)
		}
		return a
	}
	return randomDoc(r, depth-1)
}

// prefixOf explains how got shows more than want, or returns "".
func prefixOf(got, want any) string {
	switch g := got.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return fmt.Sprintf("an object where %T", want)
		}
		for k, v := range g {
			wv, ok := w[k]
			if !ok {
				return fmt.Sprintf("key %q", k)
			}
			if why := prefixOf(v, wv); why != "" {
				return k + ": " + why
			}
		}
	case []any:
		w, ok := want.([]any)
		if !ok || len(g) > len(w) {
			return fmt.Sprintf("an array of %d", len(g))
		}
		for i := range g {
			if why := prefixOf(g[i], w[i]); why != "" {
				return fmt.Sprintf("[%d]: %s", i, why)
			}
		}
	case string:
		if w, ok := want.(string); !ok || !strings.HasPrefix(w, g) {
			return fmt.Sprintf("string %.40q", g)
		}
	case json.Number:
		if w, ok := want.(json.Number); !ok || !strings.HasPrefix(w.String(), g.String()) {
			return fmt.Sprintf("number %s", g)
		}
	default:
		if got != want {
			return fmt.Sprintf("%v", got)
		}
	}
	return ""
}

// TestAttackForgedPartial: render_invoked goes from the kernel to peers
// only; a peer that sends one — partial or not, for a call id a stream
// reserved or any other — is refused and nothing is emitted.
func TestAttackForgedPartial(t *testing.T) {
	s := session.New("forged", nil)
	if err := s.Register(session.App("a"), appRender("a", "app.chart")); err != nil {
		t.Fatal(err)
	}
	rs, _ := s.StreamRender(protocol.AudienceLLM, "app.chart")
	defer rs.Close()
	for _, p := range []session.Peer{session.App("a"), session.App("b"), session.Client} {
		for _, id := range []string{rs.CallID(), "c-made-up"} {
			before := s.LastSeq()
			reply := s.HandleFrame(p, &protocol.Frame{ID: "f", Msg: &protocol.RenderInvoked{CapabilityName: "app.chart", CallID: id, Props: json.RawMessage(`{"title":"forged"}`), Partial: true}})
			if reply == nil || reply.Msg.MessageType() != protocol.TypeError {
				t.Fatalf("%v sending render_invoked for %s: reply %+v, want an error", p, id, reply)
			}
			if s.LastSeq() != before {
				t.Fatalf("%v's forged render_invoked emitted an event", p)
			}
		}
	}
	// A result for the reserved id before the call exists is refused, and
	// is not applied to the call once it is made.
	rs.Props(json.RawMessage(`{"title":"x"}`))
	if err := s.Result(session.App("a"), &protocol.CapabilityResult{CallID: rs.CallID(), Result: json.RawMessage(`{"early":true}`)}); err == nil {
		t.Fatal("a result for a call not yet made was accepted")
	}
	answer(t, s, session.App("a"), "app.chart", func(*protocol.CapabilityInvoked) json.RawMessage { return json.RawMessage(`{"late":true}`) })
	wantValue(t, s.InvokeStreamed(waitCtx(t), rs, json.RawMessage(`{"title":"x"}`)), `{"late":true}`)
}

// TestAttackRenderStreamHeap measures what open streams hold: 8 streams
// (a session's most) each fed 256 KiB of arguments in 1 KiB fragments
// keep their text and their last partial, well under 1 MiB each. (The
// session's log is kept tiny so that its partial events are not counted.)
func TestAttackRenderStreamHeap(t *testing.T) {
	s := streamSession(t, &session.Options{LogSize: 1}, renderCap("note.show", true))
	var streams []*session.RenderStream
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	piece := strings.Repeat("m", 1<<10)
	for range 8 {
		rs, err := s.StreamRender(protocol.AudienceLLM, "note.show")
		if err != nil {
			t.Fatal(err)
		}
		rs.AppendArguments(`{"title":"heap","body":"`)
		for range 255 {
			rs.AppendArguments(piece)
		}
		streams = append(streams, rs)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("8 open streams of 255 KiB of arguments hold %d KiB", held>>10)
	if held > 8<<20 {
		t.Fatalf("8 open streams hold %d KiB, want at most 8 MiB", held>>10)
	}
	for _, rs := range streams {
		rs.Close()
	}
}

// liveGoroutines counts the goroutines that are not idle handler workers
// (a session keeps those for a while, and exits them on its own).
func liveGoroutines() int {
	n, _ := testutil.BusyGoroutines()
	return n
}
