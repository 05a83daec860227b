package mcpbridge

// VetFast and VetLine are vetFast and vetLine, for the external tests.
var (
	VetFast = vetFast
	VetLine = vetLine
)
