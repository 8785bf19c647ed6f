package server

import (
	"cmp"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const routezPath = "/routez"

// Routez is the body of /routez: the server's registered routes, with
// nats-server's field names.
type Routez struct {
	ID        string       `json:"server_id"`
	Name      string       `json:"server_name"`
	Now       time.Time    `json:"now"`
	NumRoutes int          `json:"num_routes"`
	Routes    []*RouteInfo `json:"routes"`
}

// RouteInfo describes one route.
type RouteInfo struct {
	Rid          uint64    `json:"rid"`
	RemoteID     string    `json:"remote_id"`
	RemoteName   string    `json:"remote_name"`
	DidSolicit   bool      `json:"did_solicit"`
	IsConfigured bool      `json:"is_configured"`
	IP           string    `json:"ip"`
	Port         int       `json:"port"`
	Start        time.Time `json:"start"`
	LastActivity time.Time `json:"last_activity"`
	Uptime       string    `json:"uptime"`
	Idle         string    `json:"idle"`
	Pending      int       `json:"pending_size"`
	InMsgs       int64     `json:"in_msgs"`
	OutMsgs      int64     `json:"out_msgs"`
	InBytes      int64     `json:"in_bytes"`
	OutBytes     int64     `json:"out_bytes"`
	NumSubs      uint32    `json:"subscriptions"`
	// Subs lists the peer's interest (account, subject, and queue, after
	// spaces) with ?subs=1.
	Subs []string `json:"subscriptions_list,omitempty"`
	// UnknownAccount counts the interest and messages the peer sent for
	// an account this server does not have, which were dropped: the two
	// servers are configured with different accounts.
	UnknownAccount int64 `json:"unknown_account"`
}

// ClusterVarz is /varz's cluster block, nats-server's field names.
type ClusterVarz struct {
	Name        string   `json:"name,omitempty"`
	Host        string   `json:"addr,omitempty"`
	Port        int      `json:"cluster_port,omitempty"`
	AuthTimeout float64  `json:"auth_timeout,omitempty"`
	URLs        []string `json:"urls,omitempty"`
}

func (m *monitor) handleRoutez(w http.ResponseWriter, r *http.Request) {
	subs := r.URL.Query().Get("subs")
	writeJSON(w, http.StatusOK, m.s.routez(time.Now(), subs == "1" || subs == "true"))
}

// registeredRoutes returns the registered routes, by route ID.
func (s *Server) registeredRoutes() []*client {
	if s.cluster == nil {
		return nil
	}
	cl := s.cluster
	cl.mu.Lock()
	out := make([]*client, 0, len(cl.mu.routes))
	for _, c := range cl.mu.routes {
		out = append(out, c)
	}
	cl.mu.Unlock()
	slices.SortFunc(out, func(a, b *client) int { return cmp.Compare(a.cid, b.cid) })
	return out
}

func (s *Server) routez(now time.Time, withSubs bool) *Routez {
	rz := &Routez{ID: s.id, Name: s.name, Now: now.UTC(), Routes: []*RouteInfo{}}
	for _, c := range s.registeredRoutes() {
		r := c.route
		msgs, bytes := c.out.counts()
		last := time.Unix(0, c.lastIn.Load())
		ri := &RouteInfo{
			Rid: c.cid, DidSolicit: r.solicited, IsConfigured: r.configured,
			IP: c.ip, Port: c.port, Start: r.start.UTC(), LastActivity: last.UTC(),
			Uptime: formatUptime(now.Sub(r.start)), Idle: formatUptime(now.Sub(last)),
			Pending: c.out.pending(), InMsgs: c.inMsgs.Load(), OutMsgs: msgs,
			InBytes: c.inBytes.Load(), OutBytes: bytes, UnknownAccount: r.unknownAccount.Load(),
		}
		s.cluster.mu.Lock()
		ri.RemoteID, ri.RemoteName = r.remoteID, r.remoteName
		s.cluster.mu.Unlock()
		c.mu.Lock()
		ri.NumSubs = uint32(len(c.mu.subs))
		if withSubs {
			for key := range c.mu.subs {
				ri.Subs = append(ri.Subs, strings.TrimSuffix(key, " "))
			}
		}
		c.mu.Unlock()
		slices.Sort(ri.Subs)
		rz.Routes = append(rz.Routes, ri)
	}
	rz.NumRoutes = len(rz.Routes)
	return rz
}

// clusterVarz returns /varz's cluster block, nil outside a cluster.
func (s *Server) clusterVarz() *ClusterVarz {
	cl := s.cluster
	if cl == nil {
		return nil
	}
	v := &ClusterVarz{Name: cl.opts.Name, Host: cl.opts.Host, AuthTimeout: cl.opts.AuthTimeout.Seconds(), URLs: cl.opts.Routes}
	if a, ok := s.routeAddr().(*net.TCPAddr); ok {
		v.Port = a.Port
	}
	return v
}

// routeAddr returns the route listener's address, or nil.
func (s *Server) routeAddr() net.Addr {
	if s.cluster == nil || s.cluster.ln == nil {
		return nil
	}
	return s.cluster.ln.Addr()
}

var (
	descRoutes        = newDesc("skiff_routes", "Registered routes to other servers of the cluster.")
	descRouteInMsgs   = newDesc("skiff_route_in_msgs_total", "Messages received from a peer.", "remote_id", "remote_name")
	descRouteOutMsgs  = newDesc("skiff_route_out_msgs_total", "Messages forwarded to a peer.", "remote_id", "remote_name")
	descRouteInBytes  = newDesc("skiff_route_in_bytes_total", "Payload bytes received from a peer.", "remote_id", "remote_name")
	descRouteOutBytes = newDesc("skiff_route_out_bytes_total", "Payload bytes forwarded to a peer.", "remote_id", "remote_name")
	descRoutePending  = newDesc("skiff_route_pending_bytes", "Bytes queued for a peer, bounded by max_pending.", "remote_id", "remote_name")
	descRouteSubs     = newDesc("skiff_route_subscriptions", "A peer's interest entries in the index.", "remote_id", "remote_name")
	descRouteUnknown  = newDesc("skiff_route_unknown_account_total",
		"Interest and messages from a peer for an account this server does not have, dropped.", "remote_id", "remote_name")
)

var routeDescs = []*prometheus.Desc{descRoutes, descRouteInMsgs, descRouteOutMsgs, descRouteInBytes,
	descRouteOutBytes, descRoutePending, descRouteSubs, descRouteUnknown}

// collectRoutes adds the route metrics to a scrape.
func (s *Server) collectRoutes(ch chan<- prometheus.Metric) {
	rz := s.routez(time.Now(), false)
	ch <- prometheus.MustNewConstMetric(descRoutes, prometheus.GaugeValue, float64(rz.NumRoutes))
	for _, r := range rz.Routes {
		l := []string{r.RemoteID, r.RemoteName}
		ch <- prometheus.MustNewConstMetric(descRouteInMsgs, prometheus.CounterValue, float64(r.InMsgs), l...)
		ch <- prometheus.MustNewConstMetric(descRouteOutMsgs, prometheus.CounterValue, float64(r.OutMsgs), l...)
		ch <- prometheus.MustNewConstMetric(descRouteInBytes, prometheus.CounterValue, float64(r.InBytes), l...)
		ch <- prometheus.MustNewConstMetric(descRouteOutBytes, prometheus.CounterValue, float64(r.OutBytes), l...)
		ch <- prometheus.MustNewConstMetric(descRoutePending, prometheus.GaugeValue, float64(r.Pending), l...)
		ch <- prometheus.MustNewConstMetric(descRouteSubs, prometheus.GaugeValue, float64(r.NumSubs), l...)
		ch <- prometheus.MustNewConstMetric(descRouteUnknown, prometheus.CounterValue, float64(r.UnknownAccount), l...)
	}
}
