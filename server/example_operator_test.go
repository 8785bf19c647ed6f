package server_test

import (
	"context"
	"fmt"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/skiffmq/skiff/server"
)

// Operator mode: the server trusts an operator; the accounts it signed
// are preloaded in the MEMORY resolver; a client connects with a user JWT
// its account signed and the seed that signs the server's nonce (what a
// .creds file holds). In real use nsc mints all of these.
func ExampleNew_operatorMode() {
	opKey, _ := nkeys.CreateOperator()
	opPub, _ := opKey.PublicKey()
	opJWT, _ := jwt.NewOperatorClaims(opPub).Encode(opKey)

	accKey, _ := nkeys.CreateAccount()
	accPub, _ := accKey.PublicKey()
	accJWT, _ := jwt.NewAccountClaims(accPub).Encode(opKey)

	userKey, _ := nkeys.CreateUser()
	userPub, _ := userKey.PublicKey()
	userJWT, _ := jwt.NewUserClaims(userPub).Encode(accKey)
	userSeed, _ := userKey.Seed()

	s, err := server.New(server.Options{
		Port:             server.RandomPort,
		TrustedOperators: []string{opJWT},
		Resolver: server.ResolverOptions{
			Type:    server.ResolverMemory,
			Preload: map[string]string{accPub: accJWT},
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

	nc, err := nats.Connect(s.ClientURL(), nats.UserJWTAndSeed(userJWT, string(userSeed)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	acc, _ := s.LookupAccount(accPub)
	fmt.Println("connections in the account:", acc.NumConnections())

	_, err = nats.Connect(s.ClientURL(), nats.UserInfo("someone", "secret"))
	fmt.Println(err)
	// Output:
	// connections in the account: 1
	// nats: Authorization Violation
}
