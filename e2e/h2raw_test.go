package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stallingH2 is a hostile gRPC client written on raw HTTP/2 frames: it
// opens streams whose first message declares more bytes than it will ever
// send, sends as much of it as the server's flow control lets it, and then
// holds the streams open. A real gRPC client cannot do this, which is the
// point: the server must survive callers that are not gRPC clients.
type stallingH2 struct {
	conn net.Conn
	fr   *http2.Framer

	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex
	cond    *sync.Cond
	connWin int64
	initWin int64
	streams map[uint32]*stallStream
	closed  bool
}

type stallStream struct {
	win       int64
	remaining int // message bytes still to send (the last one never is)
	ended     bool
	endedAt   time.Time
}

func dialStallingH2(addr string) (*stallingH2, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		c.Close()
		return nil, fmt.Errorf("writing the preface: %w", err)
	}
	h := &stallingH2{conn: c, fr: http2.NewFramer(c, c), connWin: 65535, initWin: 65535, streams: map[uint32]*stallStream{}}
	h.cond = sync.NewCond(&h.mu)
	if err := h.fr.WriteSettings(); err != nil {
		c.Close()
		return nil, fmt.Errorf("writing settings: %w", err)
	}
	go h.read()
	return h, nil
}

// read follows the server's flow control and notes streams it ends.
func (h *stallingH2) read() {
	defer func() {
		h.mu.Lock()
		h.closed = true
		h.cond.Broadcast()
		h.mu.Unlock()
	}()
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		h.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					delta := int64(v) - h.initWin
					h.initWin = int64(v)
					for _, s := range h.streams {
						s.win += delta
					}
				}
				h.write(func() error { return h.fr.WriteSettingsAck() })
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				h.connWin += int64(f.Increment)
			} else if s := h.streams[f.StreamID]; s != nil {
				s.win += int64(f.Increment)
			}
		case *http2.RSTStreamFrame:
			h.end(f.StreamID)
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				h.end(f.StreamID)
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				h.end(f.StreamID)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				h.write(func() error { return h.fr.WritePing(true, data) })
			}
		case *http2.GoAwayFrame:
			h.mu.Unlock()
			return
		}
		h.cond.Broadcast()
		h.mu.Unlock()
	}
}

func (h *stallingH2) end(id uint32) {
	if s := h.streams[id]; s != nil && !s.ended {
		s.ended, s.endedAt = true, time.Now()
	}
}

func (h *stallingH2) write(f func() error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = f()
}

// open starts n streams to path, each declaring a message of declared
// bytes, and sends all but its last byte as flow control allows, until
// every stream is fully sent or ended by the server, or until deadline.
func (h *stallingH2) open(path string, n, declared int, deadline time.Time) error {
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "mcpswarm"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	first := uint32(1)
	h.mu.Lock()
	for id := range h.streams {
		first = max(first, id+2)
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = first + uint32(2*i)
		h.streams[ids[i]] = &stallStream{win: h.initWin, remaining: declared - 1}
	}
	h.mu.Unlock()
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], uint32(declared))
	for _, id := range ids {
		var err error
		h.wmu.Lock()
		err = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr.Bytes(), EndHeaders: true})
		if err == nil {
			err = h.fr.WriteData(id, false, prefix)
		}
		h.wmu.Unlock()
		if err != nil {
			return fmt.Errorf("opening stream %d: %w", id, err)
		}
	}
	h.mu.Lock()
	h.connWin -= int64(len(prefix) * n)
	for _, id := range ids {
		h.streams[id].win -= int64(len(prefix))
	}
	h.mu.Unlock()

	chunk := make([]byte, 16384)
	timer := time.AfterFunc(time.Until(deadline), func() { h.mu.Lock(); h.cond.Broadcast(); h.mu.Unlock() })
	defer timer.Stop()
	for {
		h.mu.Lock()
		var id uint32
		var size int
		pending := false
		for _, i := range ids {
			s := h.streams[i]
			if s.ended || s.remaining == 0 {
				continue
			}
			pending = true
			if k := min(int64(s.remaining), s.win, h.connWin, int64(len(chunk))); k > 0 {
				id, size = i, int(k)
				s.remaining -= size
				s.win -= int64(size)
				h.connWin -= int64(size)
				break
			}
		}
		if !pending || h.closed || time.Now().After(deadline) {
			h.mu.Unlock()
			return nil
		}
		if size == 0 {
			h.cond.Wait()
			h.mu.Unlock()
			continue
		}
		h.mu.Unlock()
		h.wmu.Lock()
		err := h.fr.WriteData(id, false, chunk[:size])
		h.wmu.Unlock()
		if err != nil {
			return fmt.Errorf("writing data on stream %d: %w", id, err)
		}
	}
}

// counts reports how many of the streams the server ended, and how many
// bytes in all the client has sent of the messages it still holds open.
func (h *stallingH2) counts(declared int) (ended, open int, heldBytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.streams {
		if s.ended {
			ended++
			continue
		}
		open++
		heldBytes += int64(declared - 1 - s.remaining)
	}
	return ended, open, heldBytes
}

func (h *stallingH2) Close() error { return h.conn.Close() }
