package session

import "errors"

var (
	// ErrNotRunning is returned by Manager methods given a session id that
	// is not running on this manager.
	ErrNotRunning = errors.New("session: not running")
	// ErrNotStartable is returned by Manager.Start for an app outside the
	// startable list; the name is refused before any registry lookup.
	ErrNotStartable = errors.New("session: app not startable")
	// ErrBusy is returned by Manager.Call and SendKey when the session's
	// mailbox is full.
	ErrBusy = errors.New("session: busy")
	// ErrTimeout is returned by Manager.Call and SendKey when the update did
	// not answer within the call timeout; the update may still apply.
	ErrTimeout = errors.New("session: timed out")
	// ErrLimit is returned by Manager.Start when a per-principal or per-node
	// cap on live sessions is reached.
	ErrLimit = errors.New("session: limit reached")
	// ErrInvalidID is returned for a session, app or widget id that is not
	// 1-32 characters of [A-Za-z0-9_-].
	ErrInvalidID = errors.New("session: invalid id")
	// ErrExists is returned by Manager.Start for an id already running and by
	// Registry.Register for a name already registered.
	ErrExists = errors.New("session: already exists")
	// ErrCircuitOpen is returned by Manager.Call while a tool's circuit
	// breaker is open after repeated faults.
	ErrCircuitOpen = errors.New("session: circuit open")
	// ErrClosed is returned by Manager methods after Close.
	ErrClosed = errors.New("session: manager closed")
	// ErrStateTooLarge is returned (as a tool error for an update, as an
	// error for Start, Adopt and Restore) when a session's snapshot would
	// exceed ManagerConfig.MaxStateBytes.
	ErrStateTooLarge = errors.New("session: state too large")
	// ErrCommandLost is returned by Manager.Call and SendKey when the
	// session stopped or moved to another node while the command the
	// call's update started was running: that update was applied, the
	// command's message was not. It is deliberately not ErrNotRunning,
	// which tells a caller that nothing ran and a retry is safe: retrying
	// would apply the update that started the command again.
	ErrCommandLost = errors.New("session: command lost")
	// ErrUnknownResource is returned by Manager.ReadResource for a name the
	// session does not offer.
	ErrUnknownResource = errors.New("session: unknown resource")

	// ErrNotReplicated marks a save the Store refused for a reason
	// outside the session: its copies on other nodes could not take it
	// (the owner is cut off from them, or another node took the session
	// over). The call may be retried, and it never counts toward a tool's
	// circuit breaker: a partition must not keep the tools closed for the
	// breaker's timeout after it heals.
	ErrNotReplicated = errors.New("session: the new state could not be replicated")

	// ErrWidget marks a call to a widget that is not in the current view, no
	// longer offers the action, or is now of another kind. It never counts
	// toward a tool's circuit breaker.
	ErrWidget = errors.New("widget unavailable")
	// ErrInvalidArgs marks arguments a widget action refuses.
	ErrInvalidArgs = errors.New("invalid arguments")
)
