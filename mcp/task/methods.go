package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// The tasks/* methods of both forms, as the front serves them once it let
// the request through (era and capability gates are the front's). Every
// method reads the task as its principal: a task of another principal, an
// expired one and one that never existed get the same answer.

// Methods of both forms.
const (
	MethodGet    = "tasks/get"
	MethodUpdate = "tasks/update"
	MethodCancel = "tasks/cancel"
	MethodResult = "tasks/result"
	MethodList   = "tasks/list"
)

// ListPageSize is how many tasks one tasks/list page holds.
const ListPageSize = 50

// Get returns task id as principal may see it; ErrUnknown when it does not
// exist, expired, or is another principal's.
func (s *Service) Get(principal, id string) (Record, error) {
	r, ok := s.store.Get(id)
	if !ok || principal == "" || r.Principal != principal || r.Expired(s.now()) {
		return Record{}, ErrUnknown
	}
	return r, nil
}

// Update hands input responses to principal's task id, on whichever node
// runs it; a task that ended takes none (nothing is written).
func (s *Service) Update(ctx context.Context, principal, id string, responses json.RawMessage) error {
	if r, err := s.Get(principal, id); err != nil || r.Status.Terminal() {
		return err
	}
	if err := s.store.Ask(ctx, Request{Task: id, Responses: responses}); err != nil {
		return fmt.Errorf("handing the responses to task %s: %w", id, err)
	}
	return nil
}

// Cancel asks for principal's task id to be cancelled and returns it as it
// then reads; a terminal task is returned as it is, nothing asked.
func (s *Service) Cancel(ctx context.Context, principal, id string) (Record, error) {
	r, err := s.Get(principal, id)
	if err != nil || r.Status.Terminal() {
		return r, err
	}
	if err := s.store.Ask(ctx, Request{Task: id, Cancel: true}); err != nil {
		return Record{}, fmt.Errorf("cancelling task %s: %w", id, err)
	}
	if now, err := s.Get(principal, id); err == nil {
		return now, nil
	}
	return Cancel(r, s.now()), nil
}

// Wait returns principal's task id once it is terminal, or ctx's error.
func (s *Service) Wait(ctx context.Context, principal, id string) (Record, error) {
	for {
		w := make(chan struct{})
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return Record{}, ErrClosed
		}
		s.waiters[id] = append(s.waiters[id], w)
		s.mu.Unlock()
		r, err := s.Get(principal, id)
		if err != nil || r.Status.Terminal() {
			s.dropWaiter(id, w)
			return r, err
		}
		select {
		case <-w:
		case <-ctx.Done():
			s.dropWaiter(id, w)
			return Record{}, context.Cause(ctx)
		}
	}
}

func (s *Service) dropWaiter(id string, w chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.waiters[id]
	for i, x := range ws {
		if x == w {
			s.waiters[id] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(s.waiters[id]) == 0 {
		delete(s.waiters, id)
	}
}

// Serve answers a tasks/* request of principal: modern selects the
// 2026-07-28 shapes, else the 2025-11-25 ones. The error is the JSON-RPC
// error to answer.
func (s *Service) Serve(ctx context.Context, principal, method string, params json.RawMessage, modern bool) (any, *Error) {
	var p struct {
		TaskID         string          `json:"taskId"`
		InputResponses json.RawMessage `json:"inputResponses"`
		Cursor         string          `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("invalid params of %s: %v", method, err)}
		}
	}
	if method == MethodList {
		return ListPage(s.store.Of(principal), p.Cursor)
	}
	if p.TaskID == "" {
		return nil, &Error{Code: CodeInvalidParams, Message: method + " needs a taskId"}
	}
	switch method {
	case MethodGet:
		r, err := s.Get(principal, p.TaskID)
		if err != nil {
			return nil, answerError(p.TaskID, err)
		}
		if modern {
			return Detailed(r), nil
		}
		return LegacyGet(r), nil
	case MethodUpdate:
		if err := s.Update(ctx, principal, p.TaskID, p.InputResponses); err != nil {
			return nil, answerError(p.TaskID, err)
		}
		return NewAck(), nil
	case MethodCancel:
		r, err := s.Get(principal, p.TaskID)
		if err == nil && r.Status.Terminal() && !modern {
			return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("task %s is already %s and cannot be cancelled", p.TaskID, r.Status)}
		}
		if err == nil {
			r, err = s.Cancel(ctx, principal, p.TaskID)
		}
		switch {
		case err != nil:
			return nil, answerError(p.TaskID, err)
		case modern:
			return NewAck(), nil
		}
		return LegacyCancelled(r), nil
	case MethodResult:
		r, err := s.Wait(ctx, principal, p.TaskID)
		if err != nil {
			return nil, answerError(p.TaskID, err)
		}
		res, e := LegacyResult(r)
		if e != nil {
			return nil, e
		}
		return res, nil
	}
	return nil, &Error{Code: -32601, Message: fmt.Sprintf("method %q not found", method)}
}

// ListPage is a tasks/list answer: one page of rs after cursor.
func ListPage(rs []Record, cursor string) (any, *Error) {
	page, e := LegacyList(rs, cursor, ListPageSize)
	if e != nil {
		return nil, e
	}
	return page, nil
}

// answerError is the JSON-RPC error for err about task id: an unknown
// task (whosever it is) is invalid params, named the same way always.
func answerError(id string, err error) *Error {
	if errors.Is(err, ErrUnknown) {
		return UnknownError(id)
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// UnknownError is the one answer for a task id nobody may see: unknown,
// expired, or another principal's.
func UnknownError(id string) *Error {
	return &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("unknown task %q: not found or expired", id)}
}
