// Package docstest runs every shell block of README.md and docs/*.md, so
// that the documentation cannot drift from what brain does. It holds only
// the test (docs_test.go); the conventions are at the top of that file and
// in docs/operations.md ("The docs test").
package docstest
