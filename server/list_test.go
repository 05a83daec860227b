package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/brainrt/brain/server"
)

// listPages pages through GET /v1/sessions with limit, as token, and
// returns the ids in the order listed and the size of each page.
func listPages(t *testing.T, f *fixture, token string, limit int) (ids []string, sizes []int) {
	ids, sizes, _ = listPagesCursors(t, f, token, limit)
	return ids, sizes
}

// listPagesCursors is listPages, with the next cursors the pages gave.
func listPagesCursors(t *testing.T, f *fixture, token string, limit int) (ids []string, sizes []int, cursors []string) {
	t.Helper()
	cursor := ""
	for range 1000 { // bounded: a list whose pages never end fails below
		path := fmt.Sprintf("/v1/sessions?limit=%d", limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		status, body := f.get("GET", path, token)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		var page struct {
			Sessions []server.SessionInfo
			Next     *string
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Sessions) > limit {
			t.Fatalf("GET %s: %d sessions", path, len(page.Sessions))
		}
		for _, s := range page.Sessions {
			ids = append(ids, s.ID)
		}
		sizes = append(sizes, len(page.Sessions))
		if page.Next == nil {
			return ids, sizes, cursors
		}
		if !strings.HasPrefix(*page.Next, "c1.") && *page.Next <= cursor {
			t.Fatalf("GET %s: next %q does not move on", path, *page.Next)
		}
		cursor = *page.Next
		cursors = append(cursors, cursor)
	}
	t.Fatal("the pages never end")
	return nil, nil, nil
}

// TestListSessionsPages: GET /v1/sessions pages with limit and cursor —
// every session once, in id order, live and stored merged (a session
// both live and stored is one row), a next cursor on every page but the
// last; a client pages through its tenant's sessions only; without a
// limit the answer is as before (every session, no next, for fewer than
// the default limit); a bad limit or cursor is a 400 naming it.
func TestListSessionsPages(t *testing.T) {
	st := &listingStore{memStore: memStore{frames: map[string][][]byte{}}}
	f, _ := newLimited(t, server.ManagerOptions{Store: st}, server.Options{})
	create := func(token, id string) {
		if status, body := f.send("POST", "/v1/sessions", token, `{"id":"`+id+`"}`); status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, status, body)
		}
	}
	var mine, all []string
	for i := range 7 {
		id := fmt.Sprintf("m%02d", i)
		create(clientToken, id)
		mine = append(mine, id)
		create(otherClientToken, fmt.Sprintf("o%02d", i))
	}
	// Stored sessions of nobody's tenant (an operator's to see), one of
	// them also live.
	st.extra = []string{"a-stored", "m03", "z-stored"}
	all = append(all, "a-stored", "z-stored")
	for i := range 7 {
		all = append(all, fmt.Sprintf("m%02d", i), fmt.Sprintf("o%02d", i))
	}
	slices.Sort(all)

	for _, limit := range []int{1, 3, 16, 17, 1000} {
		got, sizes := listPages(t, f, opsToken, limit)
		if !slices.Equal(got, all) {
			t.Fatalf("operator, pages of %d: %v, want %v", limit, got, all)
		}
		if want := (len(all) + limit - 1) / limit; len(sizes) < want || len(sizes) > want+1 {
			t.Fatalf("operator, pages of %d: %d pages %v", limit, len(sizes), sizes)
		}
	}
	for _, limit := range []int{2, 7, 100} {
		if got, _ := listPages(t, f, clientToken, limit); !slices.Equal(got, mine) {
			t.Fatalf("client, pages of %d: %v, want its tenant's %v", limit, got, mine)
		}
	}
	// The answer without paging parameters: every session, no next.
	status, body := f.get("GET", "/v1/sessions", opsToken)
	if status != http.StatusOK || strings.Contains(body, `"next"`) || strings.Count(body, `"id"`) != len(all) {
		t.Fatalf("GET /v1/sessions: %d %s", status, body)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "limit=-1", "cursor=a.b", "cursor=" + strings.Repeat("a", 200)} {
		status, body := f.get("GET", "/v1/sessions?"+q, opsToken)
		name, _, _ := strings.Cut(q, "=")
		if status != http.StatusBadRequest || !strings.Contains(body, name) {
			t.Errorf("GET /v1/sessions?%s: %d %s, want 400 naming %s", q, status, body, name)
		}
	}
	// A client that deletes what it lists goes on to the next page: its
	// cursor still opens once the session its page ended at is gone.
	status, body = f.get("GET", "/v1/sessions?limit=2", clientToken)
	var page struct{ Next string }
	if err := json.Unmarshal([]byte(body), &page); status != http.StatusOK || err != nil || page.Next == "" {
		t.Fatalf("first page: %d %s", status, body)
	}
	for _, id := range mine[:2] {
		if status, body := f.get("DELETE", "/v1/sessions/"+id, clientToken); status/100 != 2 {
			t.Fatalf("delete %s: %d %s", id, status, body)
		}
	}
	if status, body := f.get("GET", "/v1/sessions?limit=2&cursor="+url.QueryEscape(page.Next), clientToken); status != http.StatusOK || !strings.Contains(body, `"`+mine[2]+`"`) {
		t.Fatalf("the next page after deleting the first: %d %s, want it from %s", status, body, mine[2])
	}
}

// TestListCursorTellsNothingOfOtherTenants: a client's page that ends
// short of its limit (its scan stopped among other tenants' sessions)
// gives a sealed cursor, not the id the scan stopped at — which told a
// probe every other tenant's ids — and the pages still list exactly the
// tenant's sessions; a sealed cursor altered, or cut, is a 400 naming the
// cursor.
func TestListCursorTellsNothingOfOtherTenants(t *testing.T) {
	st := &listingStore{memStore: memStore{frames: map[string][][]byte{}}}
	f, _ := newLimited(t, server.ManagerOptions{Store: st}, server.Options{})
	var mine, theirs []string
	for i := range 60 {
		id := fmt.Sprintf("secret-customer-%02d", i)
		if i%25 == 7 { // a few of the client's own among many others'
			id = fmt.Sprintf("mine-%02d", i)
			mine = append(mine, id)
		} else {
			theirs = append(theirs, id)
		}
		token := otherClientToken
		if strings.HasPrefix(id, "mine-") {
			token = clientToken
		}
		if status, body := f.send("POST", "/v1/sessions", token, `{"id":"`+id+`"}`); status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, status, body)
		}
	}
	slices.Sort(mine)
	got, sizes, cursors := listPagesCursors(t, f, clientToken, 1)
	if !slices.Equal(got, mine) {
		t.Fatalf("pages of 1: %v, want the tenant's %v", got, mine)
	}
	sealed := 0
	for i, c := range cursors {
		switch {
		case strings.HasPrefix(c, "c1."):
			sealed++
		case !slices.Contains(mine, c):
			t.Fatalf("cursor %d is %q, neither sealed nor one of the tenant's sessions", i, c)
		}
		for _, other := range theirs {
			if strings.Contains(c, other) {
				t.Fatalf("cursor %d %q tells another tenant's session %s", i, c, other)
			}
		}
	}
	if sealed == 0 || !slices.Contains(sizes, 0) {
		t.Fatalf("no short page (sizes %v, %d sealed cursors): the test does not test", sizes, sealed)
	}
	// Two cursors of the same position differ (a fresh nonce each), so
	// that equal positions are not told apart either.
	_, _, again := listPagesCursors(t, f, clientToken, 1)
	if len(again) != len(cursors) || (again[0] == cursors[0] && strings.HasPrefix(again[0], "c1.")) {
		t.Fatalf("cursors %v, then %v", cursors, again)
	}
	var c string
	for _, c = range cursors {
		if strings.HasPrefix(c, "c1.") {
			break
		}
	}
	flipped := []byte(c)
	flipped[len(flipped)-2] ^= 'A' ^ 'B'
	for _, bad := range []string{string(flipped), c[:len(c)-4], "c1.", "c1.!!", "c2." + c[3:]} {
		status, body := f.get("GET", "/v1/sessions?limit=1&cursor="+url.QueryEscape(bad), clientToken)
		if status != http.StatusBadRequest || !strings.Contains(body, "cursor") {
			t.Errorf("cursor %q: %d %s, want 400 naming the cursor", bad, status, body)
		}
	}
	// A plain id is a cursor only if it names a session of the client's:
	// any other — another tenant's, one that does not exist — is refused
	// alike, so that ids made up cannot bisect where others' sessions are
	// (a probe recovered one in 70 requests this way).
	for _, id := range []string{theirs[3], "secret-customer-03x", "a", "zzz"} {
		status, body := f.get("GET", "/v1/sessions?limit=1&cursor="+id, clientToken)
		if status != http.StatusBadRequest || !strings.Contains(body, "cursor") {
			t.Errorf("cursor %q (no session of the client's): %d %s, want 400", id, status, body)
		}
	}
	if status, body := f.get("GET", "/v1/sessions?limit=1&cursor="+mine[0], clientToken); status != http.StatusOK || !strings.Contains(body, mine[1]) {
		t.Errorf("cursor %q (the client's own): %d %s, want the page after it", mine[0], status, body)
	}
	// A sealed cursor is the tenant's it was given to.
	if status, body := f.get("GET", "/v1/sessions?limit=1&cursor="+url.QueryEscape(c), otherClientToken); status != http.StatusBadRequest {
		t.Errorf("another tenant's sealed cursor: %d %s, want 400", status, body)
	}
}
