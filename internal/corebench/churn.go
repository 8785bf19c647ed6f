package corebench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// churn measures delivery while the subscription index changes: a
// subscriber holds subs wildcard subscriptions churn.<i>.*; a churner
// subscribes and unsubscribes rate patterns per second each (on the same
// subject space, so that caches in front of an index are invalidated); a
// publisher publishes to churn.<k>.x with random k as fast as flow control
// allows, for the given duration. It returns delivered msgs/sec at the
// subscriber.
func churn(ctx context.Context, url string, subs, rate, size int, d time.Duration) (float64, error) {
	connect := func(name string) (*nats.Conn, error) {
		return nats.Connect(url, nats.Name(name), nats.MaxReconnects(0))
	}
	subConn, err := connect("churn-subscriber")
	if err != nil {
		return 0, err
	}
	defer subConn.Close()
	var delivered atomic.Int64
	for i := range subs {
		if _, err := subConn.Subscribe("churn."+strconv.Itoa(i)+".*", func(*nats.Msg) { delivered.Add(1) }); err != nil {
			return 0, err
		}
	}
	if err := subConn.Flush(); err != nil {
		return 0, err
	}
	churner, err := connect("churn-churner")
	if err != nil {
		return 0, err
	}
	defer churner.Close()
	pub, err := connect("churn-publisher")
	if err != nil {
		return 0, err
	}
	defer pub.Close()

	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	churnErr := make(chan error, 1)
	var churned atomic.Int64
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		live := make([]*nats.Subscription, 0, 1024)
		began := time.Now()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				churnErr <- nil
				return
			case <-tick.C:
			}
			// Catch up to rate changes per second: a ticker drops ticks
			// when the machine is busy.
			due := int64(time.Since(began).Seconds() * float64(rate))
			for churned.Load() < due {
				s, err := churner.Subscribe("churn."+strconv.Itoa(rng.IntN(subs))+".*", func(*nats.Msg) {})
				if err != nil {
					churnErr <- err
					return
				}
				live = append(live, s)
				if len(live) > 512 {
					i := rng.IntN(len(live))
					if err := live[i].Unsubscribe(); err != nil {
						churnErr <- err
						return
					}
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				}
				churned.Add(1)
			}
		}
	}()

	payload := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	subjects := make([]string, subs)
	for i := range subjects {
		subjects[i] = "churn." + strconv.Itoa(i) + ".x"
	}
	start := time.Now()
	for ctx.Err() == nil {
		for range 1000 {
			if err := pub.Publish(subjects[rng.IntN(subs)], payload); err != nil {
				return 0, err
			}
		}
		// Flow control: at most one batch in flight.
		if err := pub.FlushTimeout(10 * time.Second); err != nil {
			return 0, err
		}
	}
	if err := <-churnErr; err != nil {
		return 0, err
	}
	// Let the subscriber drain what the server already accepted.
	if err := subConn.FlushTimeout(10 * time.Second); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	if got, want := churned.Load(), int64(float64(rate)*d.Seconds()*0.8); got < want {
		return 0, fmt.Errorf("churner managed only %d changes in %v (want about %d)", got, d, want)
	}
	return float64(delivered.Load()) / elapsed.Seconds(), nil
}
