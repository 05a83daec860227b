//go:build race

package server_test

// loadSessions is TestClusterLoad's session count: fewer under the race
// detector, which slows the kernel about tenfold.
const loadSessions = 20
