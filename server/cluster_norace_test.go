//go:build !race

package server_test

// loadSessions is TestClusterLoad's session count.
const loadSessions = 100
