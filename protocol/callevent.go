package protocol

// CallIDOf returns the call id of a call event — approval_requested,
// approval_decided, approval_withdrawn, capability_invoked, render_invoked
// or capability_outcome, the events a session emits about one call — and
// "" for any other message (commands peers send, such as capability_result
// or capability_approve, are not events and give "" too).
func CallIDOf(m Message) string {
	switch m := m.(type) {
	case *ApprovalRequested:
		return m.CallID
	case *ApprovalDecided:
		return m.CallID
	case *ApprovalWithdrawn:
		return m.CallID
	case *CapabilityInvoked:
		return m.CallID
	case *RenderInvoked:
		return m.CallID
	case *CapabilityOutcome:
		return m.CallID
	}
	return ""
}
