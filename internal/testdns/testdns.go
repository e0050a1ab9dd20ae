// Package testdns is a small authoritative DNS server for tests: it answers
// SRV and A queries for names whose records the test sets and changes, the
// way a Kubernetes headless Service's records change as pods come and go.
package testdns

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// Target is one record set entry: a host (an IPv4 address) and a port.
type Target struct {
	Host string
	Port int
}

// Server answers on a loopback UDP and TCP port.
type Server struct {
	udp, tcp *dns.Server
	addr     string

	mu      sync.Mutex
	records map[string][]Target // FQDN, lower case
}

// Start listens on 127.0.0.1 (one port for UDP and TCP) and serves until
// Close.
func Start() (*Server, error) {
	// The UDP port may be taken on TCP by someone else: try a few.
	var pc net.PacketConn
	var ln net.Listener
	var err error
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("testdns: listening on UDP: %w", err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		_ = pc.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("testdns: listening on TCP: %w", err)
	}
	s := &Server{addr: pc.LocalAddr().String(), records: map[string][]Target{}}
	s.udp = &dns.Server{PacketConn: pc, Handler: s}
	s.tcp = &dns.Server{Listener: ln, Handler: s}
	udpUp, tcpUp := make(chan struct{}), make(chan struct{})
	s.udp.NotifyStartedFunc = func() { close(udpUp) }
	s.tcp.NotifyStartedFunc = func() { close(tcpUp) }
	go func() { _ = s.udp.ActivateAndServe() }()
	go func() { _ = s.tcp.ActivateAndServe() }()
	<-udpUp
	<-tcpUp
	return s, nil
}

// Addr is the host:port to give a resolver.
func (s *Server) Addr() string { return s.addr }

// Set replaces name's records; no targets makes the name answer NXDOMAIN.
func (s *Server) Set(name string, targets ...Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := dns.Fqdn(strings.ToLower(name))
	if len(targets) == 0 {
		delete(s.records, key)
		return
	}
	s.records[key] = append([]Target(nil), targets...)
}

// Close stops both listeners.
func (s *Server) Close() error {
	return errorsJoin(s.udp.Shutdown(), s.tcp.Shutdown())
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// ServeDNS implements dns.Handler: an SRV answer per target, named
// t<i>.<name> and resolvable by A queries, or an A answer per target.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	targets, ok := s.records[name]
	hosts := map[string]string{} // target names of the SRV answers
	for fqdn, ts := range s.records {
		for i, t := range ts {
			hosts[targetName(i, fqdn)] = t.Host
		}
	}
	s.mu.Unlock()
	if ip, isTarget := hosts[name]; isTarget && !ok {
		if q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, aRecord(name, ip))
		}
		_ = w.WriteMsg(m)
		return
	}
	if !ok {
		m.Rcode = dns.RcodeNameError
		_ = w.WriteMsg(m)
		return
	}
	for i, t := range targets {
		switch q.Qtype {
		case dns.TypeSRV:
			// Each target gets its own name, like a pod's hostname under
			// a headless Service, resolvable with an A query.
			tn := targetName(i, name)
			m.Answer = append(m.Answer, &dns.SRV{
				Hdr:    dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 0},
				Target: tn, Port: uint16(t.Port), Priority: 0, Weight: 10,
			})
			m.Extra = append(m.Extra, aRecord(tn, t.Host))
		case dns.TypeA:
			m.Answer = append(m.Answer, aRecord(name, t.Host))
		}
	}
	_ = w.WriteMsg(m)
}

func targetName(i int, fqdn string) string { return "t" + strconv.Itoa(i) + "." + fqdn }

func aRecord(name, ip string) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.ParseIP(ip).To4()}
}
