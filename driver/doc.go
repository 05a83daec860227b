// Package driver is brain's built-in agent loop: it runs one turn of a
// session against a model.
//
// A turn, as [Driver.Run] runs it (a [session.TurnRunner]):
//
//  1. Read the session's registry again: the llm-audience capabilities
//     become the model's tools, their input schemas passed through
//     unchanged, and the system prompt is the configured prompt followed by
//     the session's <CAPABILITIES> section (every promptFragment included).
//     While the registry's revision ([session.Session.RegistryRevision])
//     and the conversation's tool names are unchanged, the last step's
//     tools, prompt and name mapping are what it gives, and are reused.
//  2. Send the conversation and stream the answer: text pieces become
//     assistant_delta events, the whole answer a conversation_message.
//  3. Run every tool call the answer makes through [session.Session.Invoke]
//     as the llm invoker — approval, validation, timeouts and render as for
//     any invoker — parallel calls concurrently. Every outcome, errors
//     included, goes back to the model as the tool result (the Outcome
//     JSON: {"ok":false,"error":{"code":"rejected","message":"…feedback"}}).
//  4. Repeat until the model answers without tool calls (reason completed),
//     the step limit is reached (step_limit), the turn is cancelled
//     (cancelled) or the model fails (error).
//
// Providers restrict tool names to [a-zA-Z0-9_-]{1,64}; names are mapped
// reversibly and without collisions (see docs/agent.md, "Tool names"). The
// providers are [NewOpenAI] (the Chat Completions API: OpenAI, Ollama,
// vLLM, llama.cpp's server, LM Studio) and [NewAnthropic] (the Messages
// API), both through the providers' official SDKs.
package driver
