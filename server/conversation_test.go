package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestConversationAPI: GET /v1/sessions/{id}/conversation answers, beside
// the turn and the messages it always did, the seq it is as of, each
// turn's start (who) and end (reason, error), and the text the running
// step has streamed so far: what a reader past the replay window can no
// longer learn from the events. ?after=N answers what came after seq N.
func TestConversationAPI(t *testing.T) {
	f := newOpsFixture(t)
	client, _ := f.tok.Identify(clientToken)
	s, release, err := f.mgr.AcquireAs(testutil.Context(t), client, "conv", true)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := s.StartTurn(session.Operator("ada"), "hi"); err != nil {
		t.Fatal(err)
	}
	s.StreamText(1, "Hello")
	if err := s.AppendMessage(1, protocol.ChatMessage{Role: protocol.RoleAssistant, Text: "Hello"}); err != nil {
		t.Fatal(err)
	}
	s.FinishTurn(1, protocol.TurnError, "the model went away")
	ended := s.LastSeq()
	if _, err := s.StartTurn(session.Operator("ada"), "again"); err != nil {
		t.Fatal(err)
	}
	s.StreamText(2, "half ")
	s.StreamText(2, "an answer")
	last := s.LastSeq()

	type turn struct {
		Turn      int    `json:"turn"`
		Seq       uint64 `json:"seq"`
		StartedBy string `json:"startedBy"`
		Reason    string `json:"reason"`
		Error     string `json:"error"`
		EndSeq    uint64 `json:"endSeq"`
	}
	type answer struct {
		Seq      *uint64 `json:"seq"`
		Turn     *int    `json:"turn"`
		Running  *bool   `json:"running"`
		Messages []struct {
			Seq     uint64               `json:"seq"`
			Turn    int                  `json:"turn"`
			Message protocol.ChatMessage `json:"message"`
		} `json:"messages"`
		Turns     []turn `json:"turns"`
		Streaming *struct {
			Turn int    `json:"turn"`
			Seq  uint64 `json:"seq"`
			Text string `json:"text"`
		} `json:"streaming"`
	}
	for _, tt := range []struct {
		name     string
		query    string
		messages []string // their texts
		turns    string   // turn|startedBy|reason|error; a "; " between turns
	}{
		{"all", "", []string{"hi", "Hello", "again"}, "1|operator (ada)|error|the model went away; 2|operator (ada)||"},
		{"after turn 1 ended", fmt.Sprintf("?after=%d", ended), []string{"again"}, "2|operator (ada)||"},
		{"after the latest event", fmt.Sprintf("?after=%d", last), nil, "2|operator (ada)||"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do("GET", "/v1/sessions/conv/conversation"+tt.query, operatorToken, "")
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, body)
			}
			var a answer
			if err := json.Unmarshal([]byte(body), &a); err != nil {
				t.Fatal(err)
			}
			if a.Seq == nil || *a.Seq != last || a.Turn == nil || *a.Turn != 2 || a.Running == nil || !*a.Running || a.Messages == nil || a.Turns == nil {
				t.Fatalf("seq, turn, running, messages, turns: %s", body)
			}
			var texts []string
			for _, m := range a.Messages {
				texts = append(texts, m.Message.Text)
			}
			if fmt.Sprint(texts) != fmt.Sprint(tt.messages) {
				t.Errorf("messages %q, want %q", texts, tt.messages)
			}
			got := ""
			for i, r := range a.Turns {
				if i > 0 {
					got += "; "
				}
				got += fmt.Sprintf("%d|%s|%s|%s", r.Turn, r.StartedBy, r.Reason, r.Error)
				if r.Seq == 0 || (r.Reason != "") != (r.EndSeq > r.Seq) {
					t.Errorf("turn %d: seq %d, end seq %d", r.Turn, r.Seq, r.EndSeq)
				}
			}
			if got != tt.turns {
				t.Errorf("turns %q, want %q", got, tt.turns)
			}
			if a.Streaming == nil || a.Streaming.Turn != 2 || a.Streaming.Text != "half an answer" || a.Streaming.Seq != last {
				t.Errorf("streaming %+v, want turn 2's %q up to seq %d", a.Streaming, "half an answer", last)
			}
		})
	}
	t.Run("a bad after", func(t *testing.T) {
		for _, q := range []string{"?after=x", "?after=-1", "?after=1.5"} {
			if status, body := f.do("GET", "/v1/sessions/conv/conversation"+q, operatorToken, ""); status != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400", q, status, body)
			}
		}
	})
}
