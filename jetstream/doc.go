// Package jetstream is Skiff's durable streams: the JetStream API of the
// reference server (streams, consumers, acknowledgements) on top of a
// server.Server, with messages kept by package store. Clients talk to it
// with the usual JetStream clients (nats.go's jetstream package, the nats
// CLI) over request/reply on $JS.API.>, acknowledgements on $JS.ACK.> and
// flow control answers on $JS.FC.>. What it implements, and what it
// refuses, is described for users in docs/streams.md.
//
//	s, err := server.New(server.DefaultOptions())
//	if err != nil { ... }
//	js, err := jetstream.New(s, jetstream.Options{StoreDir: "/var/lib/skiff"})
//	if err != nil { ... } // a stream or consumer on disk could not be opened
//	if err := s.Start(); err != nil { ... }
//	...
//	_ = s.Shutdown(ctx) // first the server: no more publishes or acks
//	_ = js.Close()      // then the streams: flushed and, per policy, fsynced
//
// New recovers every stream and durable consumer in StoreDir before the
// server starts, so that no publish arrives at a stream that is not open.
//
// # Files
//
// Streams live in accounts (account.go): every stream has a directory
// under its account's, StoreDir/accounts/<account>/streams, named after
// it; memory streams keep only their configuration there. A server without
// configured accounts has one, "$G". StoreDir/LAYOUT names the layout; the
// first start over a directory of a version before accounts moves its
// StoreDir/streams to accounts/$G/streams with one rename (layout.go).
//
//	StoreDir/accounts/$G/streams/ORDERS/
//	    meta.json                    configuration and creation time
//	    msgs/                        the messages (package store: segments, indexes, floor)
//	    consumers/WORKER/meta.json   a durable consumer's configuration
//	    consumers/WORKER/state/      its progress (store.ConsumerState)
//
// The meta.json files are written to a temporary file, fsynced, renamed
// into place, and the directory fsynced. Only durable consumers of file
// streams without mem_storage have a directory; ephemeral ones live and
// die with the process.
//
// # Durability
//
// A stream's sync policy (StreamConfig.Sync, or Options.Sync for a stream
// that names none) says when a publish is acknowledged: SyncInterval
// acknowledges once the message is written to the operating system and
// fsyncs every SyncInterval; SyncAlways acknowledges after an fsync
// covering it, one fsync serving every message a publisher's read
// carried and every concurrent publisher (group commit), and lets
// consumers see only fsynced messages; SyncNever leaves fsyncs to the
// operating system. A durable consumer's progress is fsynced on the same
// terms as its stream's messages. The store runs every fsync, under the
// one store.Durability that StreamConfig's policy maps to.
//
// # Expiry
//
// The store applies max_age, per-message TTLs and subject delete markers
// (ttl.go checks the Nats-TTL header; store/expiry.go does the rest). Its
// expiry rounds run on the store's goroutine holding the stream's ingest
// lock, and report what they removed and appended to the stream, which
// tells its consumers. A replicated stream's replicas run no rounds of
// their own: time moves with the group's log, and the leader plans each
// round with markers and has every replica apply it (replica_clock.go).
//
// # Concurrency
//
// A JetStream is safe for concurrent use. Publishes are stored on the
// publisher's goroutine; API requests (except pull requests, which go
// straight to their consumer) are answered in order by one worker
// goroutine behind a bounded queue; each consumer runs one goroutine that
// owns its state.
//
// Locks follow the convention of every Skiff package: a function whose
// caller must hold a lock ends in Locked, and its comment names the lock
// when it is not the receiver's mu; it may also be called on an object no
// other goroutine can reach yet (being built or recovered). The fields a
// lock guards are grouped with it as mu struct { sync.Mutex; ... }, except
// in consumer, whose comment says why.
package jetstream
