package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// maxStdioCalls bounds the requests of a stdio client that run at once;
// the reader waits for a slot before it reads on.
const maxStdioCalls = 64

// stdioOut writes whole lines to stdout, one message each.
type stdioOut struct {
	mu  sync.Mutex
	w   io.Writer
	err error
	// queue feeds what enqueue hands on to one writer goroutine.
	qmu    sync.Mutex
	queue  chan []byte
	closed bool
}

func (o *stdioOut) send(msg []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if _, err := o.w.Write(append(msg, '\n')); err != nil {
		o.err = fmt.Errorf("writing to stdout: %w", err)
	}
	return o.err
}

// enqueue hands msg to the writer goroutine without waiting; false when
// maxQueued already wait (a client that stopped reading stdout) or the
// client is gone.
func (o *stdioOut) enqueue(msg []byte) bool {
	o.qmu.Lock()
	defer o.qmu.Unlock()
	if o.closed {
		return false
	}
	if o.queue == nil {
		o.queue = make(chan []byte, maxQueued)
		go func(q <-chan []byte) {
			for m := range q {
				_ = o.send(m)
			}
		}(o.queue)
	}
	select {
	case o.queue <- msg:
		return true
	default:
		return false
	}
}

// close stops the writer goroutine once what is queued is written.
func (o *stdioOut) close() {
	o.qmu.Lock()
	defer o.qmu.Unlock()
	o.closed = true
	if o.queue != nil {
		close(o.queue)
	}
}

// stdioOutbox is the way back to a stdio client while one of its
// requests runs.
type stdioOutbox struct {
	s   *Server
	out *stdioOut
}

func (o stdioOutbox) notify(n mcp.JSONRPCNotification) error {
	b, err := wire.AppendNotification(nil, n.Method, n.Params)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", n.Method, err)
	}
	return o.out.send(b)
}

func (o stdioOutbox) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return o.s.asks.ask(ctx, o.out, stdioConn, method, params)
}

// stdioConn is the connection id of the stdio client.
const stdioConn = "stdio"

// ServeStdio serves one MCP client over in/out (newline-delimited JSON-RPC)
// until in ends or ctx is cancelled. The principal is "stdio". Every
// message passes the same checks as on HTTP: size, batch and nesting
// limits, then the dispatcher's gate.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &stdioOut{w: out}
	defer w.close()
	id := identity{transport: authz.TransportStdio}
	c := authz.Context{Principal: s.principal(id, stdioConn, false), ConnID: stdioConn, Transport: authz.TransportStdio, Node: s.cfg.Node}
	s.conns.add(stdioConn, c.Principal, true, w)
	defer s.forgetLocal(stdioConn)
	var client ConnInfo // what initialize declared; only the reader writes it
	var calls sync.WaitGroup
	defer calls.Wait()
	slots := make(chan struct{}, maxStdioCalls)
	br := bufio.NewReaderSize(in, 64<<10)
	for ctx.Err() == nil {
		line, err := readLine(br, s.cfg.MaxBodyBytes)
		if trimmed := trimSpace(line); len(trimmed) > 0 {
			env, e := checkMessage(trimmed, s.cfg.MaxBatch, s.cfg.MaxDepth)
			switch {
			case e != nil:
				if w.send(e.marshal()) != nil {
					return w.err
				}
			case env.IsResponse():
				if _, local, tagged := wire.ParseRelayID(env.ID); !tagged || !s.asks.answer(stdioConn, local, env) {
					s.log.Debug("dropping an answer no request waits for", "conn", stdioConn, "id", string(env.ID))
				}
			default:
				x := &exchange{env: env, body: trimmed, id: id, conn: stdioConn, c: c, client: client,
					version: client.ProtocolVersion, versions: legacyVersions(), out: stdioOutbox{s, w}}
				if env.Method == string(mcp.MethodInitialize) || env.Method == string(mcp.MethodSetLogLevel) || !env.IsRequest() {
					// In order: what they declare holds for what follows.
					if answer, _ := s.dispatch(ctx, x); answer != nil && w.send(answer) != nil {
						return w.err
					}
					client = x.client
					continue
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return nil
				}
				calls.Go(func() {
					defer func() { <-slots }()
					if answer, _ := s.dispatch(ctx, x); answer != nil {
						_ = w.send(answer)
					}
				})
			}
		}
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case errors.Is(err, errLineTooLong):
				e := &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("message exceeds the limit of %d bytes", s.cfg.MaxBodyBytes)}
				if w.send(e.marshal()) != nil {
					return w.err
				}
			default:
				return fmt.Errorf("reading stdin: %w", err)
			}
		}
	}
	return nil
}

var errLineTooLong = errors.New("mcp: line too long")

// readLine reads one newline-terminated line of at most limit bytes; a
// longer line is skipped whole and reported as errLineTooLong.
func readLine(br *bufio.Reader, limit int64) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if !tooLong {
			if int64(len(buf)+len(chunk)) > limit {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err != nil {
			if tooLong {
				return nil, errLineTooLong
			}
			return buf, err
		}
		if !isPrefix {
			if tooLong {
				return nil, errLineTooLong
			}
			return buf, nil
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
