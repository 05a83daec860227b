// Package server is the kernel's HTTP face: a WebSocket endpoint per
// session speaking the frames of docs/protocol.md to clients and apps, an
// MCP endpoint per session for agent drivers, token authentication that
// decides which side a connection speaks for, and the session manager that
// creates, restores and hibernates sessions.
package server
