// Package wire is the go-plugin glue shared by the kind packages and the client: the
// handshake, the gRPC plugin adapter, error codes over gRPC status, serving and starting.
package wire
