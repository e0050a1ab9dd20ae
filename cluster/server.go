package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/crdt/crdtpb"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// AddService adds a gRPC service only cluster members may call, served
// beside the peer service on the same server (so the same listener,
// transport, TLS, message limits and keepalives): register is called by
// Register with a registrar whose services check the peer credential
// before each call reads a message. Call it before Register; clients reach
// the service through PeerConn.
func (c *Cluster) AddService(register func(grpc.ServiceRegistrar)) {
	c.svcMu.Lock()
	c.services = append(c.services, register)
	c.svcMu.Unlock()
}

// peerRegistrar registers services that only cluster members may call:
// each method checks the caller's peer credential before its handler reads
// a message, whatever interceptors the server has, and puts the caller's
// name in the context as the peer service's interceptors do.
type peerRegistrar struct {
	c     *Cluster
	inner grpc.ServiceRegistrar
}

// RegisterService registers impl under a copy of desc whose handlers
// authenticate first.
func (r peerRegistrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		method, handler := "/"+desc.ServiceName+"/"+m.MethodName, m.Handler
		d.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: func(srv any, ctx context.Context, dec func(any) error, icp grpc.UnaryServerInterceptor) (any, error) {
			ctx, err := r.c.authenticated(ctx, method)
			if err != nil {
				return nil, err
			}
			return handler(srv, ctx, dec, icp)
		}}
	}
	d.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, sd := range desc.Streams {
		method, handler := "/"+desc.ServiceName+"/"+sd.StreamName, sd.Handler
		sd.Handler = func(srv any, ss grpc.ServerStream) error {
			ctx, err := r.c.authenticated(ss.Context(), method)
			if err != nil {
				return err
			}
			return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
		}
		d.Streams[i] = sd
	}
	r.inner.RegisterService(&d, impl)
}

// authenticated checks the peer credential in ctx (unless an interceptor
// already did) and returns ctx naming the caller.
func (c *Cluster) authenticated(ctx context.Context, method string) (context.Context, error) {
	if callerName(ctx) != "" {
		return ctx, nil
	}
	name, err := authenticate(ctx, c.verifier)
	if err != nil {
		return nil, c.refuse(ctx, method, err)
	}
	return context.WithValue(ctx, peerNameKey{}, name), nil
}

// PeerName returns the cluster member that made the call whose context ctx
// is, as authenticated by its peer credential; "" outside a peer call.
func PeerName(ctx context.Context) string { return callerName(ctx) }

// peerServer serves mcpswarm.peer.v1.PeerService.
type peerServer struct {
	peerv1.UnimplementedPeerServiceServer
	c *Cluster
	// readsRefs: this node advertises CapStreamRefs. Worked out once: the
	// configuration does not change, and every batch and heartbeat asks.
	readsRefs bool
}

// authorize returns the authenticated caller, checking the credential itself
// when the interceptors were not installed.
func (s *peerServer) authorize(ctx context.Context, method string) (string, error) {
	if name := callerName(ctx); name != "" {
		return name, nil
	}
	name, err := authenticate(ctx, s.c.verifier)
	if err != nil {
		return "", s.c.refuse(ctx, peerMethodPrefix+method, err)
	}
	return name, nil
}

// senderOrigin parses a request's sender and checks it names the caller.
func (s *peerServer) senderOrigin(caller, sender string) (crdt.Origin, error) {
	o, err := crdt.ParseOrigin(sender)
	if err != nil || o.Name != caller {
		s.c.repl.reject("sender mismatch", caller, errors.New("sender "+sender+" is not the authenticated caller"))
		return crdt.Origin{}, status.Error(codes.PermissionDenied, "sender does not match the credential")
	}
	return o, nil
}

// Replicate receives a peer's pushed batches and acknowledges each one with
// the gaps it found. A stream silent for StreamIdle is cut.
func (s *peerServer) Replicate(stream grpc.BidiStreamingServer[peerv1.ReplicateRequest, peerv1.ReplicateResponse]) error {
	ctx := stream.Context()
	caller, err := s.authorize(ctx, "Replicate")
	if err != nil {
		return err
	}
	type msg struct {
		req *peerv1.ReplicateRequest
		err error
	}
	in := make(chan msg)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case in <- msg{req, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var sender crdt.Origin // from the first message
	var refs crdtpb.StreamDecoder
	idle := s.c.cfg.StreamIdle
	timer := s.c.cfg.Clock.NewTimer(idle) // on the senders' heartbeat clock
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.Chan():
			s.c.repl.reject("stalled stream", caller, errors.New("no message for "+idle.String()))
			return status.Error(codes.DeadlineExceeded, "replicate stream idle for "+idle.String())
		case m := <-in:
			if errors.Is(m.err, io.EOF) {
				return nil
			}
			if m.err != nil {
				if status.Code(m.err) != codes.Canceled {
					s.c.repl.reject("receive", caller, m.err)
				}
				return m.err
			}
			timer.Reset(idle)
			resp, err := s.handleBatch(caller, &sender, &refs, m.req)
			if err != nil {
				return err
			}
			if isHeartbeat(m.req) {
				resp.Position = s.c.repl.answer(caller) // beatpair.go
			}
			s.c.metrics.bytesSent.Add(float64(proto.Size(resp)))
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// handleBatch applies one pushed batch. The first message of a stream names
// the sender; later ones may leave it empty (it costs ~30 bytes a batch) or
// must repeat it. Deltas may name origins and registries by refs declared
// on the stream (refs); a batch breaking those rules cuts the stream and
// nothing of it is applied.
func (s *peerServer) handleBatch(caller string, streamSender *crdt.Origin, refs *crdtpb.StreamDecoder, req *peerv1.ReplicateRequest) (*peerv1.ReplicateResponse, error) {
	sender := *streamSender
	if req.GetSender() != "" || sender.IsZero() {
		o, err := s.senderOrigin(caller, req.GetSender())
		if err != nil {
			return nil, err
		}
		if !sender.IsZero() && o != sender {
			s.c.repl.reject("sender mismatch", caller, errors.New("sender changed within a stream"))
			return nil, status.Error(codes.PermissionDenied, "sender changed within a stream")
		}
		sender, *streamSender = o, o
	}
	s.c.metrics.bytesRecv.Add(float64(proto.Size(req)))
	if !s.readsRefs && usesRefs(req) {
		// A node configured as protocol 1 behaves like one: it cannot read
		// refs, so a sender that ignored its capabilities is refused.
		s.c.repl.reject("bad stream reference", caller, errors.New("stream refs from a peer that was told this node reads none"))
		return nil, status.Error(codes.InvalidArgument, "this node reads no stream refs")
	}
	if err := refs.Resolve(req); err != nil {
		s.c.repl.reject("bad stream reference", caller, err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	gaps := map[string][]crdt.Version{}
	var order []string
	clean := true // everything applied, no gap: renews the sender's lease
	for _, pb := range req.GetDeltas() {
		if !pb.ProtoReflect().IsValid() {
			clean = false
			continue
		}
		if len(pb.GetPuts())+len(pb.GetRemoves()) > 0 {
			s.c.metrics.deltasRecv.Inc()
		}
		res, ok := s.c.applyRemote(sender, pb, "push")
		if !ok || res.Gap {
			clean = false
		}
		if !ok || !res.Gap {
			continue
		}
		if _, seen := gaps[pb.GetRegistry()]; !seen {
			order = append(order, pb.GetRegistry())
		}
		o := crdt.Origin{Name: pb.GetOriginName(), Epoch: pb.GetOriginEpoch()}
		gaps[pb.GetRegistry()] = append(gaps[pb.GetRegistry()], crdt.Version{Origin: o, Seq: res.Have})
		s.c.repl.requestSync(caller, o == sender)
	}
	// The acknowledgement (and the lease) must cover what the layers above
	// see, not only the maps: wait until the changes were delivered.
	for _, reg := range s.c.registries() {
		reg.settle()
	}
	if clean {
		s.c.repl.leases.heardFrom(sender, s.c.cfg.Clock.Now())
	}
	resp := &peerv1.ReplicateResponse{}
	for _, reg := range order {
		resp.Gaps = append(resp.Gaps, versionsToPB(reg, gaps[reg]))
	}
	return resp, nil
}

// applyRemote decodes and applies one delta that arrived from the peer via.
// It logs and counts whatever it refuses or ignores, and reports whether
// the delta reached the map.
func (c *Cluster) applyRemote(via crdt.Origin, pb *peerv1.Delta, path string) (crdt.ApplyResult, bool) {
	reg := c.registry(pb.GetRegistry())
	if reg == nil {
		c.repl.reject("unknown registry", via.Name, errors.New("registry "+pb.GetRegistry()))
		return crdt.ApplyResult{}, false
	}
	d, err := deltaFromPB(pb, c.lim)
	if err != nil {
		c.repl.reject("malformed delta", via.Name, err)
		return crdt.ApplyResult{}, false
	}
	if ok, why := c.accept(d.Origin, via); !ok {
		c.metrics.rejected.WithLabelValues(why).Inc()
		c.log.Warn("ignoring delta", slog.String("peer", via.String()), slog.String("origin", d.Origin.String()),
			slog.String("registry", reg.name), slog.String("path", path), slog.String("reason", why))
		return crdt.ApplyResult{}, false
	}
	res, err := reg.apply(d)
	if err != nil {
		c.repl.reject("invalid delta", via.Name, err)
		return crdt.ApplyResult{}, false
	}
	if len(d.Puts)+len(d.Removes) > 0 {
		c.repl.activity.Add(1)
	}
	if res.Ignored {
		c.log.Debug("delta ignored by the map", slog.String("origin", d.Origin.String()), slog.String("path", path))
	}
	return res, true
}

// ExchangeDigest answers with this node's digests. Each side pulls what it
// lacks in its own rounds; the callee does not pull back, as what it lacks
// is mostly still in flight.
func (s *peerServer) ExchangeDigest(ctx context.Context, req *peerv1.ExchangeDigestRequest) (*peerv1.ExchangeDigestResponse, error) {
	caller, err := s.authorize(ctx, "ExchangeDigest")
	if err != nil {
		return nil, err
	}
	if _, err := s.senderOrigin(caller, req.GetSender()); err != nil {
		return nil, err
	}
	s.c.metrics.bytesRecv.Add(float64(proto.Size(req)))
	for _, d := range req.GetDigests() {
		if _, err := versionsFromPB(d, s.c.lim); err != nil {
			s.c.repl.reject("malformed digest", caller, err)
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	resp := &peerv1.ExchangeDigestResponse{Sender: s.c.origin.String()}
	for _, reg := range s.c.registries() {
		resp.Digests = append(resp.Digests, versionsToPB(reg.name, reg.Digest()))
	}
	s.c.metrics.bytesSent.Add(float64(proto.Size(resp)))
	return resp, nil
}

// CatchUp streams what the caller asks for: a delta from the log when it
// reaches back far enough, else a snapshot in chunks. It never sends the
// caller's own origin back to it.
func (s *peerServer) CatchUp(req *peerv1.CatchUpRequest, stream grpc.ServerStreamingServer[peerv1.CatchUpResponse]) error {
	caller, err := s.authorize(stream.Context(), "CatchUp")
	if err != nil {
		return err
	}
	if _, err := s.senderOrigin(caller, req.GetSender()); err != nil {
		return err
	}
	s.c.metrics.bytesRecv.Add(float64(proto.Size(req)))
	s.c.metrics.catchUps.WithLabelValues("server").Inc()
	send := func(r *peerv1.CatchUpResponse) error {
		s.c.metrics.bytesSent.Add(float64(proto.Size(r)))
		return stream.Send(r)
	}
	for _, want := range req.GetWants() {
		reg := s.c.registry(want.GetRegistry())
		if reg == nil {
			continue
		}
		vs, err := versionsFromPB(want, s.c.lim)
		if err != nil {
			s.c.repl.reject("malformed catch-up request", caller, err)
			return status.Error(codes.InvalidArgument, err.Error())
		}
		for _, v := range vs {
			if v.Origin.Name == caller {
				continue // never send an origin's data back to it
			}
			var (
				d      crdt.Delta
				ok     bool
				chunks []crdt.SnapshotChunk
			)
			reg.with(func(m *crdt.Map) {
				if d, ok = m.DeltaSince(v.Origin, v.Seq); !ok {
					chunks = m.Snapshot(v.Origin, s.c.cfg.SnapshotChunkBytes)
				}
			})
			if ok {
				if d.To > v.Seq {
					s.c.metrics.deltasSent.Inc()
					if err := send(&peerv1.CatchUpResponse{Item: &peerv1.CatchUpResponse_Delta{Delta: deltaToPB(reg.name, d)}}); err != nil {
						return err
					}
				}
				continue
			}
			if len(chunks) > 0 {
				s.c.metrics.snapshots.WithLabelValues("server").Inc()
			}
			for _, ch := range chunks {
				if err := send(&peerv1.CatchUpResponse{Item: &peerv1.CatchUpResponse_Snapshot{Snapshot: chunkToPB(reg.name, ch)}}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// CallTool hands a forwarded tools/call of a node of the previous release
// to the ForwardHandler (deprecated with the RPC; see ForwardHandler).
func (s *peerServer) CallTool(req *peerv1.CallToolRequest, stream grpc.ServerStreamingServer[peerv1.CallToolResponse]) error {
	if _, err := s.authorize(stream.Context(), "CallTool"); err != nil {
		return err
	}
	h, err := s.c.forwardHandler()
	if err != nil {
		return err
	}
	return h.CallTool(req, stream)
}

// ReadResource hands a forwarded resources/read of a node of the previous
// release to the ForwardHandler.
func (s *peerServer) ReadResource(ctx context.Context, req *peerv1.ReadResourceRequest) (*peerv1.ReadResourceResponse, error) {
	if _, err := s.authorize(ctx, "ReadResource"); err != nil {
		return nil, err
	}
	h, err := s.c.forwardHandler()
	if err != nil {
		return nil, err
	}
	return h.ReadResource(ctx, req)
}

// DeliverClientMessage hands a client message forwarded by a node of the
// previous release to the ForwardHandler.
func (s *peerServer) DeliverClientMessage(ctx context.Context, req *peerv1.DeliverClientMessageRequest) (*peerv1.DeliverClientMessageResponse, error) {
	if _, err := s.authorize(ctx, "DeliverClientMessage"); err != nil {
		return nil, err
	}
	h, err := s.c.forwardHandler()
	if err != nil {
		return nil, err
	}
	return h.DeliverClientMessage(ctx, req)
}

var _ peerv1.PeerServiceServer = (*peerServer)(nil)
