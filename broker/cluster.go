package broker

import (
	"github.com/skiffmq/skiff/server"
)

// whyRouteOption is the reason given for the cluster keys Skiff does not
// implement yet (docs/cluster.md, "Not there yet").
const whyRouteOption = "this cluster option is not implemented; Skiff refuses to start rather than run the cluster without it"

// applyCluster reads the cluster block into the server's route options.
func applyCluster(o *server.Options, v value) error {
	c := &o.Cluster
	if err := clusterKeys.apply(c, v); err != nil {
		return err
	}
	if c.Port == 0 {
		return v.errorf(ErrInvalidValue, "cluster needs a port (or listen: host:port)")
	}
	return nil
}

var clusterKeys = func() keys[*server.ClusterOptions] {
	k := newKeys[*server.ClusterOptions]()
	k.on(func(c *server.ClusterOptions, v value) (err error) { c.Name, err = v.str(); return }, "name")
	k.on(func(c *server.ClusterOptions, v value) error { return hostPort(v, &c.Host, &c.Port) }, "listen")
	k.on(func(c *server.ClusterOptions, v value) (err error) {
		c.Port, err = v.intIn(server.RandomPort, 65535)
		return
	}, "port")
	k.on(func(c *server.ClusterOptions, v value) (err error) { c.Host, err = v.str(); return }, "host", "net")
	k.on(func(c *server.ClusterOptions, v value) error {
		routes, err := v.strings()
		if err != nil {
			return err
		}
		for _, r := range routes {
			if _, err := server.ParseRouteURL(r); err != nil {
				return v.errorf(ErrInvalidValue, "%v", err)
			}
		}
		c.Routes = routes
		return nil
	}, "routes")
	k.on(func(c *server.ClusterOptions, v value) (err error) { c.NoAdvertise, err = v.boolean(); return }, "no_advertise")
	k.on(func(c *server.ClusterOptions, v value) (err error) {
		c.ConnectRetries, err = v.intIn(0, 1<<20)
		return
	}, "connect_retries")
	k.on(func(c *server.ClusterOptions, v value) error { return routeAuthKeys.apply(c, v) }, "authorization")
	k.on(func(c *server.ClusterOptions, v value) (err error) {
		c.PingInterval, err = v.duration()
		if err == nil && c.PingInterval <= 0 {
			err = v.errorf(ErrInvalidValue, "cluster ping_interval must be positive")
		}
		return
	}, "ping_interval")
	k.on(func(c *server.ClusterOptions, v value) (err error) {
		c.MaxPingsOut, err = v.intIn(1, 1<<31-1)
		return
	}, "ping_max")
	k.refuse(whyTLS+" (TLS on routes is not implemented)", "tls")
	k.on(func(c *server.ClusterOptions, v value) error {
		a, err := v.str()
		if err != nil {
			return err
		}
		if _, err := server.ParseRouteURL(a); err != nil {
			return v.errorf(ErrInvalidValue, "cluster advertise: %v", err)
		}
		c.Advertise = a
		return nil
	}, "advertise", "cluster_advertise")
	k.refuse(whyRouteOption, "connect_backoff", "pool_size", "compression",
		"write_deadline", "write_timeout")
	k.refuse("dedicated routes per account are not implemented: every account shares the routes, which carry the account of each message", "accounts")
	k.refuse("route import/export permissions are not implemented; Skiff refuses to start rather than share every subject", "permissions")
	return k
}()

// routeAuthKeys is the cluster's authorization block: one user and
// password, required of peers and presented to them.
var routeAuthKeys = func() keys[*server.ClusterOptions] {
	k := newKeys[*server.ClusterOptions]()
	k.on(func(c *server.ClusterOptions, v value) (err error) { c.Username, err = v.str(); return }, "user", "username")
	k.on(func(c *server.ClusterOptions, v value) (err error) { c.Password, err = v.str(); return }, "pass", "password")
	k.on(func(c *server.ClusterOptions, v value) (err error) { c.AuthTimeout, err = v.duration(); return }, "timeout")
	k.refuse("routes authenticate with one user and password; tokens, user lists, nkeys and permissions are not implemented there",
		"token", "users", "nkeys", "permissions", "default_permission", "default_permissions", "auth_callout")
	return k
}()
