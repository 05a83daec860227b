package scaleclient

import (
	"reflect"
	"testing"
	"time"
)

func TestSlowWindows(t *testing.T) {
	ms := time.Millisecond
	calls := []slowCall{
		{at: 3210 * ms, took: 250 * ms}, {at: 3250 * ms, took: 210 * ms}, {at: 3299 * ms, took: 180 * ms},
		{at: 50 * ms, took: 30 * ms},
		{at: 7000 * ms, took: 40 * ms}, {at: 7099 * ms, took: 45 * ms},
	}
	got := slowWindows(calls)
	want := []SlowWindow{{AtMs: 3200, Calls: 3, MaxMs: 250}, {AtMs: 7000, Calls: 2, MaxMs: 45}, {AtMs: 0, Calls: 1, MaxMs: 30}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slowWindows = %+v, want %+v", got, want)
	}
	many := make([]slowCall, 0, 20)
	for i := range 20 {
		many = append(many, slowCall{at: time.Duration(i) * 100 * ms, took: 21 * ms})
	}
	if got := slowWindows(many); len(got) != 10 || got[0].AtMs != 0 || got[9].AtMs != 900 {
		t.Errorf("of 20 windows of one call each, slowWindows kept %+v, want the first ten", got)
	}
	if got := slowWindows(nil); len(got) != 0 {
		t.Errorf("slowWindows(nil) = %+v, want none", got)
	}
}
