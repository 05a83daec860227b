package handle

import "context"

// Net fetches over HTTP(S). Hosts, schemes, ports and the addresses that may
// actually be dialled are decided by grants; every redirect is checked
// again. A request beyond the grants fails with denied, a body beyond the
// size cap with too_large.
type Net interface {
	Fetch(ctx context.Context, req Request) (Response, error)
}

// Request is one HTTP request.
type Request struct {
	// Method defaults to GET.
	Method string `json:"method,omitempty"`
	// URL is absolute: scheme, host, optional port, path.
	URL string `json:"url"`
	// Header holds request headers.
	Header map[string][]string `json:"header,omitempty"`
	// Body is sent as the request body.
	Body []byte `json:"body,omitempty"`
}

// Response is a complete HTTP response.
type Response struct {
	// Status is the HTTP status code. A 4xx or 5xx status is not an error.
	Status int `json:"status"`
	// Header holds the response headers.
	Header map[string][]string `json:"header,omitempty"`
	// Body is the whole body.
	Body []byte `json:"body"`
	// URL is the final URL after redirects.
	URL string `json:"url"`
}
