// Command transit measures one gRPC message's one-way latency between two
// processes on this machine, beside raw TCP, with and without idle gaps
// between messages: the floor under a forwarded call's two hops, with no
// mcpswarm code in it. The child process is the server; wall-clock stamps
// (one machine, one clock) split a round trip into its two directions.
//
//	cd bench && go run ./transit                            # hot ping-pong
//	cd bench && go run ./transit -work 300us -think 400us   # a forward's gaps
//	cd bench && go run ./transit -tcp -work 300us -think 400us
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
)

// A message is msgSize bytes: the client's send stamp at 8, the server's
// receive and send stamps at 16 and 24.
const msgSize = 300

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

func now() uint64 { return uint64(time.Now().UnixNano()) }

// answer stamps msg as the server's answer, received at recv, after work.
func answer(msg []byte, recv uint64, work time.Duration) {
	if work > 0 {
		time.Sleep(work)
	}
	binary.LittleEndian.PutUint64(msg[16:], recv)
	binary.LittleEndian.PutUint64(msg[24:], now())
}

// service is one bidi stream answering each message on a goroutine of its
// own, as the owner's side of a Calls stream does.
func service(work time.Duration) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "t.T",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Mux", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, st grpc.ServerStream) error {
				var mu sync.Mutex
				for {
					var b []byte
					if err := st.RecvMsg(&b); err != nil {
						return err
					}
					if len(b) != msgSize {
						return fmt.Errorf("a message of %d bytes, want %d", len(b), msgSize)
					}
					recv := now()
					go func() {
						answer(b, recv, work)
						mu.Lock()
						defer mu.Unlock()
						_ = st.SendMsg(&b) // a failed send ends the stream's RecvMsg too
					}()
				}
			}}},
	}
}

func serve(tcp bool, work time.Duration) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	if !tcp {
		s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
		s.RegisterService(service(work), nil)
		return s.Serve(l)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			buf := make([]byte, msgSize)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				answer(buf, now(), work)
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// dial returns a round trip to the server at addr: it sends one stamped
// message and returns the server's answer.
func dial(tcp bool, addr string) (func() ([]byte, error), error) {
	if tcp {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		return func() ([]byte, error) {
			b := make([]byte, msgSize)
			binary.LittleEndian.PutUint64(b[8:], now())
			if _, err := c.Write(b); err != nil {
				return nil, err
			}
			_, err := io.ReadFull(c, b)
			return b, err
		}, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, err
	}
	st, err := cc.NewStream(context.Background(), &service(0).Streams[0], "/t.T/Mux")
	if err != nil {
		return nil, err
	}
	answers := make(chan []byte, 1)
	ended := make(chan error, 1)
	go func() {
		for {
			var r []byte
			if err := st.RecvMsg(&r); err != nil {
				ended <- err
				return
			}
			answers <- r
		}
	}()
	return func() ([]byte, error) {
		b := make([]byte, msgSize)
		binary.LittleEndian.PutUint64(b[8:], now())
		if err := st.SendMsg(&b); err != nil {
			return nil, err
		}
		select {
		case r := <-answers:
			return r, nil
		case err := <-ended:
			return nil, err
		}
	}, nil
}

func main() {
	log.SetFlags(0)
	mode := flag.String("mode", "client", "client, or server (the child the client starts)")
	work := flag.Duration("work", 0, "how long the server sleeps before each answer (an owner's call)")
	think := flag.Duration("think", 0, "how long the client sleeps between calls")
	tcp := flag.Bool("tcp", false, "raw TCP instead of gRPC")
	dur := flag.Duration("dur", 3*time.Second, "how long to measure")
	flag.Parse()
	encoding.RegisterCodec(rawCodec{})
	if *mode == "server" {
		log.Fatal(serve(*tcp, *work))
	}

	args := []string{"-mode", "server", "-work", work.String()}
	if *tcp {
		args = append(args, "-tcp")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatalf("starting the server: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatalf("reading the server's address: %v", err)
	}
	call, err := dial(*tcp, strings.TrimSpace(addr))
	if err != nil {
		log.Fatalf("connecting to the server: %v", err)
	}
	if _, err := call(); err != nil { // connection set-up stays out of the figures
		log.Fatalf("first call: %v", err)
	}
	var up, down, rtt []float64
	for t0 := time.Now(); time.Since(t0) < *dur; {
		s := now()
		r, err := call()
		if err != nil {
			log.Fatalf("call: %v", err)
		}
		e := now()
		sent, recv, back := binary.LittleEndian.Uint64(r[8:]), binary.LittleEndian.Uint64(r[16:]), binary.LittleEndian.Uint64(r[24:])
		up = append(up, float64(recv-sent)/1000)
		down = append(down, float64(e-back)/1000)
		rtt = append(rtt, float64((e-s)-(back-recv))/1000)
		if *think > 0 {
			time.Sleep(*think)
		}
	}
	p := func(v []float64) string {
		sort.Float64s(v)
		return fmt.Sprintf("p50 %6.1f p90 %6.1f", v[len(v)/2], v[len(v)*9/10])
	}
	fmt.Printf("tcp=%v work=%v think=%v n=%d  up %s | down %s | rtt-minus-work %s (µs)\n", *tcp, *work, *think, len(up), p(up), p(down), p(rtt))
}
