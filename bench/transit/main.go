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
	"net"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
)

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// work is how long the server sleeps before it answers (an owner's call).
var work time.Duration

func now() uint64 { return uint64(time.Now().UnixNano()) }

var desc = grpc.ServiceDesc{
	ServiceName: "t.T",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Mux", ServerStreams: true, ClientStreams: true, Handler: func(srv any, st grpc.ServerStream) error {
			var mu sync.Mutex
			for {
				var b []byte
				if err := st.RecvMsg(&b); err != nil {
					return err
				}
				recv := now()
				go func(id []byte) {
					if work > 0 {
						time.Sleep(work)
					}
					out := make([]byte, 300)
					copy(out, id[:16])
					binary.LittleEndian.PutUint64(out[16:], recv)
					binary.LittleEndian.PutUint64(out[24:], now())
					mu.Lock()
					st.SendMsg(&out)
					mu.Unlock()
				}(b)
			}
		}},
	},
}

func main() {
	mode := flag.String("mode", "client", "")
	flag.DurationVar(&work, "work", 0, "server sleep per call")
	think := flag.Duration("think", 0, "client sleep between calls")
	tcp := flag.Bool("tcp", false, "raw tcp instead of grpc")
	flag.Parse()
	encoding.RegisterCodec(rawCodec{})
	if *mode == "server" {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		fmt.Println(l.Addr().String())
		if *tcp {
			for {
				c, _ := l.Accept()
				go func() {
					buf := make([]byte, 300)
					for {
						if _, err := readFull(c, buf); err != nil {
							return
						}
						recv := now()
						if work > 0 {
							time.Sleep(work)
						}
						binary.LittleEndian.PutUint64(buf[16:], recv)
						binary.LittleEndian.PutUint64(buf[24:], now())
						c.Write(buf)
					}
				}()
			}
		}
		s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
		s.RegisterService(&desc, nil)
		s.Serve(l)
		return
	}
	args := []string{"-mode", "server", "-work", work.String()}
	if *tcp {
		args = append(args, "-tcp")
	}
	cmd := exec.Command(os.Args[0], args...)
	out, _ := cmd.StdoutPipe()
	cmd.Start()
	defer cmd.Process.Kill()
	rd := bufio.NewReader(out)
	a, _ := rd.ReadString('\n')
	a = a[:len(a)-1]
	var call func() []byte
	if *tcp {
		c, _ := net.Dial("tcp", a)
		call = func() []byte {
			b := make([]byte, 300)
			binary.LittleEndian.PutUint64(b[8:], now())
			c.Write(b)
			readFull(c, b)
			return b
		}
	} else {
		cc, _ := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		st, err := cc.NewStream(context.Background(), &desc.Streams[0], "/t.T/Mux")
		if err != nil {
			panic(err)
		}
		ch := make(chan []byte, 1)
		go func() {
			for {
				var r []byte
				if err := st.RecvMsg(&r); err != nil {
					return
				}
				ch <- r
			}
		}()
		call = func() []byte {
			b := make([]byte, 300)
			binary.LittleEndian.PutUint64(b[8:], now())
			st.SendMsg(&b)
			return <-ch
		}
	}
	call()
	var up, down, rtt []float64
	t0 := time.Now()
	for time.Since(t0) < 3*time.Second {
		s := now()
		r := call()
		e := now()
		sent := binary.LittleEndian.Uint64(r[8:])
		recv := binary.LittleEndian.Uint64(r[16:])
		back := binary.LittleEndian.Uint64(r[24:])
		up = append(up, float64(recv-sent)/1000)
		down = append(down, float64(e-back)/1000)
		rtt = append(rtt, float64(e-s)/1000-float64(back-recv)/1000)
		if *think > 0 {
			time.Sleep(*think)
		}
	}
	p := func(v []float64) string {
		sort.Float64s(v)
		return fmt.Sprintf("p50 %6.1f p90 %6.1f", v[len(v)/2], v[len(v)*9/10])
	}
	fmt.Printf("tcp=%v work=%v think=%v n=%d  up %s | down %s | rtt-minus-work %s\n", *tcp, work, *think, len(up), p(up), p(down), p(rtt))
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
