package server_test

import (
	"errors"
	"testing"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func (f *fixture) dialBench(b *testing.B) *wsClient {
	c := f.dial(clientToken, "s1", "?after=0")
	c.t = f.t
	return c
}
