package handle

import (
	"context"
	"encoding/json"
)

// Page is one headless browser tab, opened for a call and closed after it.
// Navigation follows the same host rules as [Net].
type Page interface {
	// Navigate loads url and waits for the document to be ready.
	Navigate(ctx context.Context, url string) error
	// Text returns the visible text of the first element matching the CSS
	// selector; "" means the whole body.
	Text(ctx context.Context, selector string) (string, error)
	// Evaluate runs a JavaScript expression in the page and returns its
	// value encoded as JSON.
	Evaluate(ctx context.Context, expression string) (json.RawMessage, error)
	// Screenshot returns a PNG of the viewport.
	Screenshot(ctx context.Context) ([]byte, error)
}
