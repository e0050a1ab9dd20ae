package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Command is work an app's Update asks the runtime to run after the update
// is applied: it runs on its own goroutine, outside the session's actor, so
// the session serves other calls meanwhile. It reports progress with
// ProgressFrom(ctx) (the progress of the call that started it) and ends by
// returning the message the runtime then delivers to Update; nil delivers
// nothing. ctx is cancelled when the call that started it is cancelled,
// when it outlives ManagerConfig.CommandTimeout and when the session stops
// or moves to another node: a command should then return promptly, and the
// message it returns is still applied while the session runs here, so the
// app can record how the work ended.
//
// A command in flight is not part of the model: a snapshot holds the model
// of the last applied update, so a session handed to another node (or
// recovered after its owner's loss) runs no command, and the call waiting
// for it fails with ErrCommandLost, saying so (never ErrNotRunning, which
// would invite a retry of the update that started it). An app that must
// not lose track of its work records it in the model only when the
// command's message arrives.
type Command func(ctx context.Context) Msg

// WithCommand is what an Update returns to set the model to m and start c
// once m is saved. The call that delivered the message completes when c's
// message has been applied, with that update's result. A nil c starts
// nothing.
func WithCommand(m Model, c Command) Model {
	if c == nil {
		return m
	}
	return withCommand{model: m, cmd: c}
}

// withCommand is a model paired with the command its update started; the
// runtime unwraps it before anything sees the model.
type withCommand struct {
	model Model
	cmd   Command
}

// unwrapCommand splits what an Update returned into the model and its
// command.
func unwrapCommand(m Model) (Model, Command, error) {
	wc, ok := m.(withCommand)
	if !ok {
		return m, nil, nil
	}
	if _, nested := wc.model.(withCommand); nested {
		return nil, nil, errors.New("update returned WithCommand of WithCommand; start one command per update")
	}
	return wc.model, wc.cmd, nil
}

// Defaults of the command settings.
const (
	// DefaultMaxCommands is how many commands one session may run at once.
	DefaultMaxCommands = 4
	// DefaultCommandTimeout is how long a command may run.
	DefaultCommandTimeout = 10 * time.Minute
)

// running is one command in flight: the call that started it waits on
// done, which receives exactly one answer: the reply of the update that
// applied the command's message, or why there is none.
type running struct {
	done   chan reply
	cancel context.CancelFunc
}

// startCommand starts cmd for the call whose context is ctx, unless the
// session is stopping. Actor goroutine only: the count it checks before
// Update's state is saved (roomForCommand) can only have shrunk since.
func (a *actor) startCommand(ctx context.Context, cmd Command, what string) (*running, error) {
	cctx, cancel := context.WithTimeout(ctx, a.mgr.cfg.CommandTimeout)
	run := &running{done: make(chan reply, 1), cancel: cancel}
	a.qmu.Lock()
	if a.stopping {
		a.qmu.Unlock()
		cancel()
		return nil, fmt.Errorf("session `%s` stopped before the command of %s could start; the update that asked for it was applied: %w", a.info.ID, what, ErrCommandLost)
	}
	if a.cmds == nil {
		a.cmds = map[*running]struct{}{}
	}
	a.cmds[run] = struct{}{}
	a.mgr.cmds.Add(1)
	a.qmu.Unlock()
	go a.runCommand(cctx, ctx, cmd, run, what)
	return run, nil
}

// roomForCommand refuses a command past the session's bound, before the
// update that asked for it is saved.
func (a *actor) roomForCommand(what string) error {
	a.qmu.Lock()
	n := len(a.cmds)
	a.qmu.Unlock()
	if n >= a.mgr.cfg.MaxCommands {
		return fmt.Errorf("%s: session `%s` already runs %d commands, its limit (session-commands); the update was not applied: retry once one has finished: %w", what, a.info.ID, n, ErrBusy)
	}
	return nil
}

// runCommand runs cmd and queues its message for Update, answering run
// itself when there is nothing to apply or the session stopped.
func (a *actor) runCommand(ctx, callCtx context.Context, cmd Command, run *running, what string) {
	defer a.mgr.cmds.Done()
	msg, err := a.callCommand(ctx, cmd)
	run.cancel()
	a.qmu.Lock()
	delete(a.cmds, run)
	a.qmu.Unlock()
	switch {
	case err != nil:
		run.done <- reply{res: errorResult(fmt.Errorf("%s: %w; the session keeps its last applied state", what, err)), fault: true}
	case msg == nil:
		run.done <- reply{res: Result{Text: what + ": its command finished with nothing to apply"}}
	default:
		// The call's own context, so its progress reporter reaches the
		// update; handle does not abandon a completion whose call gave up.
		r := &request{ctx: callCtx, msg: msg, what: what, reply: run.done}
		if err := a.enqueueCompletion(r); err != nil {
			run.done <- reply{err: err}
		}
	}
}

// callCommand runs cmd, turning a panic into an error.
func (a *actor) callCommand(ctx context.Context, cmd Command) (msg Msg, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.mgr.log.Error("command panicked", "session", a.info.ID, "app", a.info.App, "panic", fmt.Sprint(p))
			msg, err = nil, fmt.Errorf("command panicked: %v", p)
		}
	}()
	return cmd(ctx), nil
}

// enqueueCompletion queues a command's message past the mailbox bound (the
// commands in flight bound these), unless the session is stopping.
func (a *actor) enqueueCompletion(r *request) error {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	if a.stopping {
		return a.lostCommand(r.what)
	}
	a.queue = append(a.queue, r)
	if !a.draining {
		a.draining = true
		a.mgr.workers.run(a)
	}
	return nil
}

// lostCommand is the error of a call whose command's message the session
// can no longer apply.
func (a *actor) lostCommand(what string) error {
	return fmt.Errorf("session `%s` stopped or moved to another node while the command of %s was running; its result was not applied and the session keeps the state of its last applied update, which includes the update that started the command: %w", a.info.ID, what, ErrCommandLost)
}

// cancelCommands cancels every command in flight. Callers hold qmu.
func (a *actor) cancelCommands() {
	for run := range a.cmds {
		run.cancel()
	}
}

// commands returns how many commands the session runs (tests).
func (a *actor) commands() int {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	return len(a.cmds)
}

// awaitCommand waits for the answer of the command a call started, and of
// any its message's update started in turn.
func (m *Manager) awaitCommand(ctx context.Context, a *actor, run *running) (Result, bool, error) {
	for {
		select {
		case rep := <-run.done:
			if rep.cmd != nil {
				run = rep.cmd
				continue
			}
			return rep.res, rep.fault, rep.err
		case <-ctx.Done():
			return Result{}, false, fmt.Errorf("call cancelled while its command ran; the command is cancelled and the message it ends with is still applied: %w", ctx.Err())
		case <-a.done:
			select {
			case rep := <-run.done:
				if rep.cmd == nil {
					return rep.res, rep.fault, rep.err
				}
			default:
			}
			return Result{}, false, a.lostCommand("this call")
		}
	}
}

// waitCommands waits for every command goroutine to return (Close). When
// ctx ends first, the goroutine waiting on their behalf stays until the
// last of them returns: a command that ignores its context outlives Close.
func (m *Manager) waitCommands(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		m.cmds.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for commands to return after their cancellation: %w", ctx.Err())
	}
}
