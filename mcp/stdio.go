package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/authz"
)

// lockedWriter makes each Write atomic, so the front's own answers never
// interleave with mcp-go's (which writes every message with one Write).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ServeStdio serves one MCP client over in/out (newline-delimited JSON-RPC)
// until in ends or ctx is cancelled. The principal is "stdio". Like the HTTP
// front, it enforces the size, batch and nesting limits and the read
// authorizer before mcp-go sees a message.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	ss := server.NewStdioServer(s.mcp)
	ss.SetContextFunc(func(ctx context.Context) context.Context {
		ctx = withIdentity(ctx, identity{transport: authz.TransportStdio, prechecked: true})
		return s.wrapContext(ctx, nil)
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := s.filterStdio(ctx, in, pw, lw)
		_ = pw.CloseWithError(err)
	}()
	err := ss.Listen(ctx, pr, lw)
	cancel()
	_ = pr.Close()
	wg.Wait()
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("serving stdio: %w", err)
	}
	return nil
}

// filterStdio copies messages from in to pass, answering on out the ones
// the front refuses.
func (s *Server) filterStdio(ctx context.Context, in io.Reader, pass io.Writer, out io.Writer) error {
	br := bufio.NewReaderSize(in, 64<<10)
	c := authz.Context{Principal: s.cfg.Guard.Principal(authz.StdioPrincipal()), ConnID: "stdio", Transport: authz.TransportStdio, Node: s.cfg.Node}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	for {
		line, err := readLine(br, s.cfg.MaxBodyBytes)
		if len(line) > 0 && ctx.Err() == nil {
			if e := s.stdioCheck(req, c, line); e != nil {
				if _, werr := out.Write(append(e.marshal(), '\n')); werr != nil {
					return fmt.Errorf("writing to stdout: %w", werr)
				}
			} else if _, werr := pass.Write(append(line, '\n')); werr != nil {
				return nil // mcp-go stopped reading
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, errLineTooLong) {
				e := &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("message exceeds the limit of %d bytes", s.cfg.MaxBodyBytes)}
				if _, werr := out.Write(append(e.marshal(), '\n')); werr != nil {
					return fmt.Errorf("writing to stdout: %w", werr)
				}
				continue
			}
			return fmt.Errorf("reading stdin: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (s *Server) stdioCheck(req *http.Request, c authz.Context, line []byte) *rpcError {
	trimmed := trimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	env, e := checkMessage(trimmed, s.cfg.MaxBatch, s.cfg.MaxDepth)
	if e != nil {
		return e
	}
	if !env.isRequest() || !readMethods[env.Method] {
		return nil
	}
	if e := s.decideRead(req.Context(), c, env.Method, env.Params); e != nil {
		e.ID = env.ID
		return e
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
