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
	_, err := broker.ParseConfig("port: 4222\nno_auth_user: guest\n")
	fmt.Println(err)
	fmt.Println(errors.Is(err, broker.ErrUnsupported))
	// Output:
	// config: line 2: no_auth_user: not supported by Skiff: accounts, operators and JWT authentication are not implemented; Skiff refuses to start rather than run without them
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
