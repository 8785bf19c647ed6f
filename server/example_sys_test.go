package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiffmq/skiff/server"
)

// The system account: its user sees the server's $SYS events and asks
// for its monitoring data, as `nats server ...` does; a component adds a
// request of its own with HandleSysRequest.
func ExampleServer_HandleSysRequest() {
	s, err := server.New(server.Options{
		Port: server.RandomPort,
		Accounts: []server.AccountConfig{
			{Name: "SYS", Users: []server.User{{Name: "admin", Password: "s3cret"}}},
			{Name: "APP", Users: []server.User{{Name: "app", Password: "apppw"}}},
		},
		SystemAccount: "SYS",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Answers $SYS.REQ.SERVER.PING.QUEUEZ (every server's) and
	// $SYS.REQ.ACCOUNT.<account>.QUEUEZ.
	err = s.HandleSysRequest("QUEUEZ", func(acc *server.Account, _ []byte) (any, error) {
		if acc != nil {
			return map[string]any{"account": acc.Name(), "queues": 0}, nil
		}
		return map[string]any{"queues": 0}, nil
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
	fmt.Println("system account:", s.SystemAccount().Name())

	admin, err := nats.Connect(s.ClientURL(), nats.UserInfo("admin", "s3cret"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer admin.Close()
	events, _ := admin.SubscribeSync("$SYS.ACCOUNT.APP.CONNECT")
	_ = admin.Flush()

	app, err := nats.Connect(s.ClientURL(), nats.UserInfo("app", "apppw"), nats.Name("billing"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer app.Close()
	m, err := events.NextMsg(5 * time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	var connect server.ConnectEventMsg
	_ = json.Unmarshal(m.Data, &connect)
	fmt.Println("connected:", connect.Client.Name, "in", connect.Client.Account)

	resp, err := admin.Request("$SYS.REQ.ACCOUNT.APP.QUEUEZ", nil, 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	var answer struct {
		Server server.ServerInfo `json:"server"`
		Data   map[string]any    `json:"data"`
	}
	_ = json.Unmarshal(resp.Data, &answer)
	fmt.Println("answered by this server:", answer.Server.ID == s.ID(), answer.Data)

	// APP reaches $SYS only through its system imports.
	_, err = app.Request("$SYS.REQ.SERVER.PING.QUEUEZ", nil, 5*time.Second)
	fmt.Println(err)
	// Output:
	// system account: SYS
	// connected: billing in APP
	// answered by this server: true map[account:APP queues:0]
	// nats: no responders available for request
}
