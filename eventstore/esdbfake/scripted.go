package esdbfake

import (
	"net"
	"testing"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc"
)

// Scripted serves srv, a Streams service that answers as a test scripts it
// (as KurrentDB answers where the fake does not go), until t ends, and
// returns the client configuration of it, the client's logging silenced.
func Scripted(t testing.TB, srv streams.StreamsServer) *client.Configuration {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	streams.RegisterStreamsServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	cfg, err := client.ParseConnectionString("esdb://" + lis.Addr().String() + "?tls=false")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(client.LogLevel, string, ...any) {}
	return cfg
}
