package server_test

import (
	"context"
	"fmt"
	"time"

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

// An account JWT exports a stream that requires an activation token; the
// importing account's JWT carries one the exporter signed for it, so its
// clients receive what the exporter's publish.
func ExampleNew_operatorModeImport() {
	opKey, _ := nkeys.CreateOperator()
	opPub, _ := opKey.PublicKey()
	opJWT, _ := jwt.NewOperatorClaims(opPub).Encode(opKey)

	expKey, _ := nkeys.CreateAccount()
	expPub, _ := expKey.PublicKey()
	exp := jwt.NewAccountClaims(expPub)
	exp.Exports.Add(&jwt.Export{Subject: "prices.>", Type: jwt.Stream, TokenReq: true})
	expJWT, _ := exp.Encode(opKey)

	impKey, _ := nkeys.CreateAccount()
	impPub, _ := impKey.PublicKey()
	act := jwt.NewActivationClaims(impPub)
	act.ImportSubject, act.ImportType = "prices.>", jwt.Stream
	token, _ := act.Encode(expKey) // the exporter signs the importer's activation
	imp := jwt.NewAccountClaims(impPub)
	imp.Imports.Add(&jwt.Import{Account: expPub, Subject: "prices.>", LocalSubject: "feed.>", Type: jwt.Stream, Token: token})
	impJWT, _ := imp.Encode(opKey)

	user := func(accKey nkeys.KeyPair) nats.Option {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		j, _ := jwt.NewUserClaims(pub).Encode(accKey)
		seed, _ := kp.Seed()
		return nats.UserJWTAndSeed(j, string(seed))
	}

	s, err := server.New(server.Options{
		Port:             server.RandomPort,
		TrustedOperators: []string{opJWT},
		Resolver: server.ResolverOptions{
			Type:    server.ResolverMemory,
			Preload: map[string]string{expPub: expJWT, impPub: impJWT},
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

	consumer, err := nats.Connect(s.ClientURL(), user(impKey))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer consumer.Close()
	sub, _ := consumer.SubscribeSync("feed.>")
	_ = consumer.Flush()
	producer, err := nats.Connect(s.ClientURL(), user(expKey))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer producer.Close()
	_ = producer.Publish("prices.gold", []byte("2300"))
	m, err := sub.NextMsg(2 * time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Subject, string(m.Data))
	// Output:
	// feed.gold 2300
}
