package wire

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedhost/fedhost/sdk"
	pb "github.com/fedhost/fedhost/sdk/internal/proto/fedhostv1"
)

var grpcCodes = map[sdk.Code]codes.Code{
	sdk.CodeInvalid:       codes.InvalidArgument,
	sdk.CodeUnavailable:   codes.Unavailable,
	sdk.CodeLimitExceeded: codes.ResourceExhausted,
	sdk.CodeConflict:      codes.AlreadyExists,
	sdk.CodeNotFound:      codes.NotFound,
	sdk.CodeUnsupported:   codes.Unimplemented,
	sdk.CodeInternal:      codes.Internal,
}

// ToStatus turns a plugin's error into a gRPC status error that carries its sdk code and
// field. A plain error becomes CodeInternal with its text.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	var e *sdk.Error
	if !errors.As(err, &e) {
		e = &sdk.Error{Code: sdk.CodeInternal, Message: err.Error()}
	}
	st := status.New(grpcCodes[e.Code], e.Message)
	if withDetail, derr := st.WithDetails(&pb.ErrorDetail{Code: string(e.Code), Field: e.Field}); derr == nil {
		st = withDetail
	}
	return st.Err()
}

// FromStatus turns an error of a gRPC call back into an *sdk.Error. The plugin's own code
// wins; a transport failure (the plugin died, the call timed out) is CodeUnavailable.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if detail, ok := d.(*pb.ErrorDetail); ok {
			return &sdk.Error{Code: sdk.Code(detail.Code), Field: detail.Field, Message: st.Message()}
		}
	}
	switch st.Code() {
	case codes.Unimplemented:
		return &sdk.Error{Code: sdk.CodeUnsupported, Message: st.Message()}
	case codes.Unavailable:
		return &sdk.Error{Code: sdk.CodeUnavailable, Message: "plugin unreachable: " + st.Message()}
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	}
	return &sdk.Error{Code: sdk.CodeInternal, Message: st.Message()}
}
