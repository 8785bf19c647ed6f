package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// Example embeds a broker with streams and uses it with nats.go's
// jetstream package: a stream, deduplicated publishes, and a durable pull
// consumer.
func Example() {
	dir, err := os.MkdirTemp("", "skiff-example-")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	opts := server.DefaultOptions()
	opts.Port, opts.HTTPPort = server.RandomPort, 0
	srv, err := server.New(opts)
	if err != nil {
		panic(err)
	}
	js, err := jetstream.New(srv, jetstream.Options{StoreDir: dir})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer func() {
		_ = srv.Shutdown(context.Background())
		_ = js.Close()
	}()

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	client, err := njs.New(nc)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	stream, err := client.CreateStream(ctx, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		panic(err)
	}
	// The third publish repeats the second's ID: a retry, stored once.
	for _, id := range []string{"a", "b", "b"} {
		ack, err := client.Publish(ctx, "orders.eu.created", []byte("order "+id), njs.WithMsgID(id))
		if err != nil {
			panic(err)
		}
		fmt.Println("stored at", ack.Sequence, "duplicate:", ack.Duplicate)
	}

	cons, err := stream.CreateOrUpdateConsumer(ctx, njs.ConsumerConfig{Durable: "WORKER", AckPolicy: njs.AckExplicitPolicy})
	if err != nil {
		panic(err)
	}
	batch, err := cons.FetchNoWait(10)
	if err != nil {
		panic(err)
	}
	for m := range batch.Messages() {
		meta, _ := m.Metadata()
		fmt.Println(m.Subject(), string(m.Data()), "seq", meta.Sequence.Stream)
		if err := m.DoubleAck(ctx); err != nil { // acknowledged and confirmed
			panic(err)
		}
	}
	info, err := cons.Info(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("ack floor", info.AckFloor.Stream, "pending", info.NumPending)
	// Output:
	// stored at 1 duplicate: false
	// stored at 2 duplicate: false
	// stored at 2 duplicate: true
	// orders.eu.created order a seq 1
	// orders.eu.created order b seq 2
	// ack floor 2 pending 0
}
