//go:build brain_nomodels

package driver

import "errors"

// A brain built with -tags brain_nomodels has no model providers: the
// two SDKs are most of a release binary's size (docs/operations.md,
// "Building a release"). Everything else — serve, MCP, tools, artifacts —
// is the same; `brain chat` and an agent on a configured model refuse
// with errNoModels.

var errNoModels = errors.New("this brain was built without model providers (-tags brain_nomodels): build it without the tag to use openai or anthropic")

type openAIModel struct{ opts ProviderOptions }

type anthropicModel struct{ opts ProviderOptions }

// NewOpenAI is refused in this build (see errNoModels).
func NewOpenAI(ProviderOptions) (Model, error) { return nil, errNoModels }

// NewAnthropic is refused in this build (see errNoModels).
func NewAnthropic(ProviderOptions) (Model, error) { return nil, errNoModels }
