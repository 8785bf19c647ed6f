package corebench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiffmq/skiff/internal/portlock"
)

// Cluster is three (or n) servers of one target joined by routes.
type Cluster struct {
	Procs  []*Proc
	routes *portlock.Reservation // the route ports, held until Stop
}

// URL returns server i's client URL.
func (c *Cluster) URL(i int) string { return c.Procs[i].URL }

// Stop stops every server.
func (c *Cluster) Stop() {
	for _, p := range c.Procs {
		p.Stop()
	}
	if c.routes != nil {
		c.routes.Release()
	}
}

// clusterConfig is node i's configuration: base, then its name and a
// cluster block routed to every node (its own route is dropped by both
// servers). Both servers read it: it is nats-server's syntax. JetStream
// is disabled unless base configures it.
func clusterConfig(base string, i int, routePorts []int) string {
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	js := "jetstream: disabled\n"
	if strings.Contains(base, "jetstream") {
		js = ""
	}
	return fmt.Sprintf("%s\nserver_name: n%d\n%scluster {\n  name: bench\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n",
		base, i+1, js, routePorts[i], strings.Join(routes, ", "))
}

// StartCluster starts n servers of the target with config (nats-server
// syntax, "" for defaults) plus a cluster block, and waits until a message
// published on any server reaches a subscriber on any other (the routes
// are up and interest flows).
func (t Target) StartCluster(ctx context.Context, n int, config string) (*Cluster, error) {
	routes, err := portlock.Reserve(n)
	if err != nil {
		return nil, err
	}
	routePorts := routes.Ports
	c := &Cluster{routes: routes}
	for i := range n {
		port, err := portlock.Reserve(1)
		if err != nil {
			c.Stop()
			return nil, err
		}
		p, err := t.startOn(ctx, port, clusterConfig(config, i, routePorts))
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Procs = append(c.Procs, p)
	}
	if err := c.waitMesh(20 * time.Second); err != nil {
		c.Stop()
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	return c, nil
}

// waitMesh waits until, for every pair of servers, a message published on
// one reaches a subscriber on the other.
func (c *Cluster) waitMesh(d time.Duration) error {
	conns := make([]*nats.Conn, len(c.Procs))
	for i, p := range c.Procs {
		nc, err := nats.Connect(p.URL, nats.NoReconnect())
		if err != nil {
			return err
		}
		defer nc.Close()
		conns[i] = nc
	}
	deadline := time.Now().Add(d)
	for j, sub := range conns {
		s, err := sub.SubscribeSync(fmt.Sprintf("mesh.%d", j))
		if err != nil {
			return err
		}
		if err := sub.Flush(); err != nil {
			return err
		}
		for i, pub := range conns {
			if i == j {
				continue
			}
			for {
				if time.Now().After(deadline) {
					return fmt.Errorf("no route from server %d to server %d after %v", i+1, j+1, d)
				}
				if err := pub.Publish(s.Subject, nil); err != nil {
					return err
				}
				if _, err := s.NextMsg(50 * time.Millisecond); err == nil {
					break
				}
			}
		}
		_ = s.Unsubscribe()
	}
	return nil
}
