package server_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/skiffmq/skiff/server"
)

// Accountz lists the accounts, or describes one: here its exports.
func ExampleServer_Accountz() {
	s, err := server.New(server.Options{
		Host: "127.0.0.1", Port: server.RandomPort,
		Accounts: []server.AccountConfig{
			{Name: "ORDERS", Exports: []server.Export{{Subject: "orders.>"}, {Subject: "price", Service: true}}},
			{Name: "BILLING", Imports: []server.Import{{Account: "ORDERS", Subject: "orders.>"}}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	list, _ := s.Accountz(server.AccountzOptions{})
	fmt.Println(list.Accounts)
	orders, _ := s.Accountz(server.AccountzOptions{Account: "ORDERS"})
	for _, e := range orders.Account.Exports {
		fmt.Printf("%s %s %q\n", e.Type, e.Subject, e.ResponseType)
	}
	_, err = s.Accountz(server.AccountzOptions{Account: "NOPE"})
	fmt.Println(err)
	// Output:
	// [$G BILLING ORDERS]
	// service price "Singleton"
	// stream orders.> ""
	// server: unknown account: Account NOPE does not exist
}

// AccountStatz reports the accounts that have clients connected, with
// their traffic.
func ExampleServer_AccountStatz() {
	s, err := server.New(server.Options{
		Host: "127.0.0.1", Port: server.RandomPort,
		Accounts: []server.AccountConfig{
			{Name: "ORDERS", Users: []server.User{{Name: "ann", Password: "pw"}}},
			{Name: "BILLING", Users: []server.User{{Name: "bob", Password: "pw"}}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Shutdown(context.Background()) }()
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("ann", "pw"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	_ = nc.Publish("orders.new", []byte("hello"))
	_ = nc.Flush()
	for _, st := range s.AccountStatz(server.AccountStatzOptions{}).Accounts {
		fmt.Println(st.Account, st.Conns, st.Received.Msgs, st.Received.Bytes)
	}
	// Output:
	// ORDERS 1 1 5
}
