package decision

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
)

// RegisterGRPC registers s as envoy.service.ratelimit.v3.RateLimitService
// on srv.
func RegisterGRPC(srv *grpc.Server, s *Service) {
	rlsv3.RegisterRateLimitServiceServer(srv, &rlsServer{s: s})
}

type rlsServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Service
}

// ShouldRateLimit answers Envoy. The caller's app token comes in the
// "authorization" metadata, which Envoy sends as the initial_metadata of
// its rate limit service's grpc_service.
func (r *rlsServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, result, err := r.decide(ctx, req)
	r.s.cfg.Metrics.request("grpc", result, start)
	return resp, err
}

func (r *rlsServer) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, string, error) {
	var auth string
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		auth = v[0] // not a copy of every header, as FromIncomingContext makes
	}
	app, err := r.s.Authenticate(auth)
	if err != nil {
		r.s.logs.emit(slog.LevelInfo, logRefusedOther, "decision request refused", "transport", "grpc", "err", err)
		return nil, resultOf(err), grpcError(err)
	}
	ds := make([]Descriptor, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		hits := int64(req.GetHitsAddend())
		if h := d.GetHitsAddend(); h != nil {
			hits = int64(min(h.GetValue(), math.MaxInt64))
		}
		if hits == 0 {
			hits = 1 // Envoy leaves it unset for one hit
		}
		entries := make([]descriptors.Entry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			entries[j] = descriptors.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		entries, critical := r.s.SplitCritical(entries)
		ds[i] = Descriptor{Entries: entries, Hits: hits, Refund: d.GetIsNegativeHits(), Critical: critical}
	}
	statuses, overall, err := r.s.ShouldRateLimit(ctx, app, req.GetDomain(), ds)
	if err != nil {
		switch result := resultOf(err); {
		case result == "invalid":
			r.s.logs.emit(slog.LevelWarn, logRefusedInvalid, "decision request refused", "transport", "grpc", "err", err)
		case result == "error" && ctx.Err() == nil && !errors.Is(err, errs.ErrUnavailable):
			r.s.logs.emit(slog.LevelError, logInternal, "rate limit request failed", "transport", "grpc", "err", err)
		}
		return nil, resultOf(err), grpcError(err)
	}
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_Code(overall),
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(statuses)),
	}
	for i, st := range statuses {
		resp.Statuses[i] = descriptorStatus(st)
	}
	if st, ok := deciding(statuses, overall); ok {
		if pairs, n := r.s.cfg.Headers.pairs(st.Result); n > 0 {
			// One allocation for the values and one for the pointers.
			vals := make([]corev3.HeaderValue, n)
			resp.ResponseHeadersToAdd = make([]*corev3.HeaderValue, n)
			for i, p := range pairs[:n] {
				vals[i].Key, vals[i].Value = p[0], p[1]
				resp.ResponseHeadersToAdd[i] = &vals[i]
			}
		}
	}
	result := "ok"
	if overall == CodeOverLimit {
		result = "over_limit"
	}
	return resp, result, nil
}

// descriptorStatus is one descriptor's answer. duration_until_reset is,
// when denied, the wait until the tokens asked for are there (what Envoy
// should tell a client to wait); when allowed, the time until the bucket
// is full again.
func descriptorStatus(st Status) *rlsv3.RateLimitResponse_DescriptorStatus {
	out := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_Code(st.Code)}
	if st.Bucket == "" || st.Note != "" {
		return out
	}
	if st.Limit.RequestsPerUnit > 0 {
		out.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{
			Name:            st.Bucket,
			RequestsPerUnit: st.Limit.RequestsPerUnit,
			Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(st.Limit.Unit),
		}
		if st.Limit.Multiplier > 1 {
			out.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(st.Limit.Multiplier)
		}
	}
	out.LimitRemaining = uint32(min(max(st.Result.Remaining, 0), math.MaxUint32))
	reset := st.Result.ResetAfter
	if st.Code == CodeOverLimit && st.Result.RetryAfter > 0 {
		reset = st.Result.RetryAfter
	}
	out.DurationUntilReset = durationpb.New(reset)
	return out
}

// resultOf names an error for the requests metric.
func resultOf(err error) string {
	switch {
	case errors.Is(err, errs.ErrUnauthenticated):
		return "unauthenticated"
	case errors.Is(err, errs.ErrInvalid):
		return "invalid"
	}
	return "error"
}

func grpcError(err error) error {
	switch {
	case errors.Is(err, errs.ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, errs.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errs.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, "internal error")
}
