package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/store"
)

// TestOnAppend: every append is reported with its duration and error.
func TestOnAppend(t *testing.T) {
	type report struct {
		d   time.Duration
		err error
	}
	var mu sync.Mutex
	var got []report
	st := open(t, t.TempDir(), &store.Options{OnAppend: func(d time.Duration, err error) {
		mu.Lock()
		got = append(got, report{d, err})
		mu.Unlock()
	}})
	j := journal(t, st, "s")
	appendAll(t, j, ev(1, "a"), ev(2, "a"))
	if err := j.Append(ev(5, "a")); err == nil {
		t.Fatal("an out-of-order append succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0].err != nil || got[1].err != nil || got[2].err == nil || got[0].d <= 0 {
		t.Fatalf("reports %+v, want two successes with a duration and a failure", got)
	}
}
