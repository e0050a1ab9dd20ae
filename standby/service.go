package standby

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// Service serves mcpswarm.standby.v1 over a Holder. caller returns the
// authenticated peer that made a call ("" when there is none): a snapshot
// is only taken from the node it names as the owner, so no member can
// ship state in another's name.
type Service struct {
	standbyv1.UnimplementedStandbyServiceServer
	h      *Holder
	caller func(context.Context) string
}

// NewService returns the standby service of h.
func NewService(h *Holder, caller func(context.Context) string) *Service {
	return &Service{h: h, caller: caller}
}

// Hold implements standbyv1.StandbyServiceServer.
func (s *Service) Hold(ctx context.Context, req *standbyv1.HoldRequest) (*standbyv1.HoldResponse, error) {
	if !session.ValidID(req.GetSession()) {
		return nil, status.Error(codes.InvalidArgument, "hold: invalid session id")
	}
	if who := s.caller(ctx); who == "" || who != req.GetOwner() {
		return nil, status.Errorf(codes.PermissionDenied, "hold: a snapshot is taken only from its owner, and the caller is not %q", req.GetOwner())
	}
	if len(req.GetSnapshot()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "hold: empty snapshot")
	}
	held, err := s.h.Hold(Copy{Session: req.GetSession(), Owner: req.GetOwner(), Epoch: req.GetEpoch(), Seq: req.GetSeq(), Snapshot: req.GetSnapshot()})
	switch {
	case errors.Is(err, ErrStale):
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, fmt.Sprintf("hold: %v", err))
	}
	return &standbyv1.HoldResponse{Epoch: held.Epoch, Seq: held.Seq}, nil
}

// Release implements standbyv1.StandbyServiceServer.
func (s *Service) Release(ctx context.Context, req *standbyv1.ReleaseRequest) (*standbyv1.ReleaseResponse, error) {
	if !session.ValidID(req.GetSession()) {
		return nil, status.Error(codes.InvalidArgument, "release: invalid session id")
	}
	held, ok := s.h.Get(req.GetSession())
	if !ok {
		return &standbyv1.ReleaseResponse{}, nil
	}
	if who := s.caller(ctx); who == "" || who != held.Owner {
		return nil, status.Error(codes.PermissionDenied, "release: only the owner that shipped a copy may release it")
	}
	if err := s.h.Release(req.GetSession(), req.GetEpoch()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &standbyv1.ReleaseResponse{}, nil
}

// Streams returns the stream form of Hold over the same holder, served
// beside the Service (standbyv1.RegisterStandbyStreamServiceServer).
func (s *Service) Streams() standbyv1.StandbyStreamServiceServer { return streamService{s: s} }

// streamService serves mcpswarm.standby.v1.StandbyStreamService.
type streamService struct {
	standbyv1.UnimplementedStandbyStreamServiceServer
	s *Service
}

// HoldStream implements standbyv1.StandbyStreamServiceServer: each request
// is Hold's, answered in order on the same stream, a refusal included.
func (ss streamService) HoldStream(stream standbyv1.StandbyStreamService_HoldStreamServer) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &standbyv1.HoldStreamResponse{Id: req.GetId()}
		held, err := ss.s.Hold(ctx, req.GetRequest())
		if err != nil {
			st := status.Convert(err)
			resp.Code, resp.Message = uint32(st.Code()), st.Message()
		} else {
			resp.Response = held
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

var (
	_ standbyv1.StandbyServiceServer       = (*Service)(nil)
	_ standbyv1.StandbyStreamServiceServer = streamService{}
)
