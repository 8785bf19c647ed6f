// Package server is Skiff's broker: a server for the NATS client protocol
// that routes every message through the lock-free subscription trie of
// package match/cstrie.
//
//	s, err := server.New(server.Options{Port: server.RandomPort})
//	if err != nil { ... }
//	if err := s.Start(); err != nil { ... }
//	defer s.Shutdown(context.Background())
//	nc, _ := nats.Connect(s.ClientURL())
//
// # How a message flows
//
// Each connection has a read loop and a writer goroutine. The publisher's
// read loop parses PUB (internal/proto, without copying), looks the subject
// up in the trie, and copies the message into the outbound queue of every
// receiving connection (one member per queue group, chosen at random). At
// the end of each read it wakes the writer of every connection it queued
// for, once; a writer then sends everything queued in one write. Nobody
// waits for a slow receiver: a queue that would pass MaxPending cuts that
// connection off as a slow consumer.
//
// # Accounts
//
// Every subscription lives in the index of one account (Options.Accounts;
// without any, everything is in the global account, "$G"). A client is
// bound at CONNECT to its user's account and publishes and subscribes
// there only; routes carry the account of every subscription and message,
// so a cluster keeps the namespaces apart too. Components take part
// through an Account: (*Account).SubscribeInternal and NewPublisher, with
// the Server's methods of the same names as shorthands for "$G".
//
//	pre-CONNECT ──CONNECT user a──> bound to a's account A
//	PUB orders.new ──> A's index ──> A's subscribers, and peers with
//	                                 "RS+ A orders.new" get "RMSG A orders.new"
//
// In operator mode (Options.TrustedOperators or TrustedKeys, with a
// Resolver) the accounts come from JWTs an operator signed instead, each
// named by its public key, and a client authenticates with a user JWT and
// the INFO's nonce signed by the user's key (jwt.go describes the chain of
// trust; docs/accounts.md what is checked and what fails closed).
//
// # Limits
//
// Every resource is bounded by an Options field: payload size, control line,
// connections, subscriptions per connection, bytes pending per connection,
// write time, unanswered pings; an account may lower the payload and
// subscription bounds of its clients and bound its connections
// (AccountLimits). Past a bound the client gets the reference
// server's -ERR text and, where the reference server does, is closed.
//
// A Server is safe for concurrent use. Inside, a function whose caller must
// hold a lock ends in Locked, and the fields a lock guards are grouped with
// it as mu struct { sync.Mutex; ... }; a type whose every field one lock
// guards (monotonicTotals, cpuSampler) keeps the lock first instead.
package server
