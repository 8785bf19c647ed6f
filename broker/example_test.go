package broker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/server"
)

// A key Skiff does not implement is refused with its line, never ignored.
func ExampleParseConfig() {
	_, err := broker.ParseConfig("port: 4222\ngateway: { name: g }\n")
	fmt.Println(err)
	fmt.Println(errors.Is(err, broker.ErrUnsupported))
	// Output:
	// config: line 2: gateway: not supported by Skiff: this clustering feature (gateways, leaf nodes, advertised addresses, JetStream domains, cluster_traffic) is not implemented, only routes (the cluster block) and JetStream over them; Skiff refuses to start rather than run without it
	// true
}

func ExampleStart() {
	cfg := broker.DefaultConfig()
	cfg.Server.Port, cfg.Server.HTTPPort = server.RandomPort, 0
	cfg.JetStreamEnabled = false
	b, err := broker.Start(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = b.Shutdown(context.Background()) }()
	fmt.Println(b.JetStream() == nil)
	// Output: true
}
