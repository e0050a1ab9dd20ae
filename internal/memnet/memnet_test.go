package memnet

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// A cut closes the node's open connections and refuses its dials and
// gossip; healing lets them through again.
func TestCutAndHeal(t *testing.T) {
	n := New("a", "b")
	a, b := n.Node("a"), n.Node("b")
	la, _ := a.ListenGRPC()
	lb, _ := b.ListenGRPC()
	t.Cleanup(func() { _ = la.Close(); _ = lb.Close() })
	accepted := make(chan error, 4)
	go func() {
		for {
			c, err := lb.Accept()
			if err != nil {
				accepted <- err
				return
			}
			go func() { _, err := io.Copy(io.Discard, c); accepted <- err }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.Dial(ctx, b.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}

	n.Cut("b", true)
	if _, err := c.Write([]byte("after the cut")); err == nil {
		t.Fatal("a write on a cut connection succeeded")
	}
	if err := <-accepted; err != nil {
		t.Fatalf("the far side did not see a clean close: %v", err)
	}
	if _, err := a.Dial(ctx, b.GRPCAddr); !errors.Is(err, ErrCut) {
		t.Fatalf("dialing a cut node: %v, want ErrCut", err)
	}
	ga, gb := a.Transport(), b.Transport()
	t.Cleanup(func() { _ = ga.Shutdown(); _ = gb.Shutdown() })
	if _, err := ga.WriteTo([]byte("ping"), b.GossipAddr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gb.PacketCh():
		t.Fatal("a packet crossed the cut")
	default:
	}

	n.Cut("b", false)
	if _, err := ga.WriteTo([]byte("ping"), b.GossipAddr); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-gb.PacketCh():
		if string(p.Buf) != "ping" || p.From.String() != a.GossipAddr {
			t.Fatalf("got %q from %s", p.Buf, p.From)
		}
	case <-ctx.Done():
		t.Fatal("no packet after healing")
	}
	c2, err := a.Dial(ctx, b.GRPCAddr)
	if err != nil {
		t.Fatalf("dialing after healing: %v", err)
	}
	_ = c2.Close()
}

// Each node's sent bytes count what it wrote: the dialer's writes and,
// served on Serving, the accepting node's.
func TestSentCountsEachNodesWrites(t *testing.T) {
	n := NewBuffered(1024, "a", "b")
	a, b := n.Node("a"), n.Node("b")
	bl, err := b.Serving()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bl.Close() })
	replied := make(chan error, 1)
	go func() {
		c, err := bl.Accept()
		if err != nil {
			replied <- err
			return
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			replied <- err
			return
		}
		_, err = c.Write([]byte("ok!"))
		replied <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.Dial(ctx, b.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	if got := n.Sent("a"); got.GRPCBytes != 5 || got.GRPCWrites != 1 {
		t.Errorf("a sent %+v, want 5 bytes in 1 write", got)
	}
	if got := n.Sent("b"); got.GRPCBytes != 3 || got.GRPCWrites != 1 {
		t.Errorf("b sent %+v, want 3 bytes in 1 write", got)
	}
	if got := n.SentTotal().GRPCBytes; got != 8 {
		t.Errorf("the network carried %d bytes, want 8", got)
	}
	if n.Conns() != 1 {
		t.Errorf("%d connections open, want 1", n.Conns())
	}
}
