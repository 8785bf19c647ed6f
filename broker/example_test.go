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
	_, err := broker.ParseConfig("port: 4222\nsystem_account: SYS\n")
	fmt.Println(err)
	fmt.Println(errors.Is(err, broker.ErrUnsupported))
	// Output:
	// config: line 2: system_account: not supported by Skiff: the system account and $SYS are not implemented yet (system_account names the system account of operator mode only)
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
