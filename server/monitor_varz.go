package server

import (
	"net"
	"net/http"
	"runtime"
	"time"
)

// Varz is the body of /varz: the server's identity, its limits, and its
// counters. Field names and units are the reference server's (durations
// such as ping_interval are nanoseconds, auth_timeout is seconds); only
// the fields Skiff has data for are present.
type Varz struct {
	ID             string        `json:"server_id"`
	Name           string        `json:"server_name"`
	Version        string        `json:"version"`
	Proto          int           `json:"proto"`
	GoVersion      string        `json:"go"`
	Host           string        `json:"host"`
	Port           int           `json:"port"`
	AuthRequired   bool          `json:"auth_required,omitempty"`
	TLSRequired    bool          `json:"tls_required,omitempty"`
	MaxConn        int           `json:"max_connections"`
	MaxSubs        int           `json:"max_subscriptions,omitempty"` // per connection
	PingInterval   time.Duration `json:"ping_interval"`
	MaxPingsOut    int           `json:"ping_max"`
	HTTPHost       string        `json:"http_host"`
	HTTPPort       int           `json:"http_port"`
	AuthTimeout    float64       `json:"auth_timeout"`
	MaxControlLine int           `json:"max_control_line"`
	MaxPayload     int           `json:"max_payload"`
	MaxPending     int64         `json:"max_pending"`
	WriteDeadline  time.Duration `json:"write_deadline"`
	Tags           []string      `json:"tags,omitempty"` // server_tags
	Start          time.Time     `json:"start"`
	Now            time.Time     `json:"now"`
	Uptime         string        `json:"uptime"`
	// Mem is the resident set size in bytes where the OS reports it
	// (Linux), else the memory the Go runtime holds from the OS.
	Mem      int64 `json:"mem"`
	Cores    int   `json:"cores"`
	MaxProcs int   `json:"gomaxprocs"`
	// CPU is the process's CPU use in percent of one core, averaged over
	// the interval between samples (at least a second; see cpuSampler).
	CPU              float64 `json:"cpu"`
	Connections      int     `json:"connections"`
	TotalConnections uint64  `json:"total_connections"`
	InMsgs           int64   `json:"in_msgs"`
	InBytes          int64   `json:"in_bytes"`
	OutMsgs          int64   `json:"out_msgs"`
	OutBytes         int64   `json:"out_bytes"`
	// The client-only counters equal the totals above: both count client
	// traffic only (nats-server's totals add the routes'). A route's
	// traffic is in /routez and the per-route metrics.
	InClientMsgs       int64               `json:"in_client_msgs"`
	InClientBytes      int64               `json:"in_client_bytes"`
	OutClientMsgs      int64               `json:"out_client_msgs"`
	OutClientBytes     int64               `json:"out_client_bytes"`
	SlowConsumers      int64               `json:"slow_consumers"`
	Subscriptions      uint32              `json:"subscriptions"`
	HTTPReqStats       map[string]uint64   `json:"http_req_stats"`
	SlowConsumersStats *SlowConsumersStats `json:"slow_consumer_stats"`
	// Routes counts the registered routes; Cluster is the cluster's
	// configuration (absent outside a cluster).
	Routes  int          `json:"routes"`
	Cluster *ClusterVarz `json:"cluster,omitempty"`
	// SystemAccount names the system account ("" without one).
	SystemAccount string `json:"system_account,omitempty"`
}

// SlowConsumersStats splits slow consumers by kind of connection: clients
// and routes (Skiff has no gateways or leaf nodes).
type SlowConsumersStats struct {
	Clients  uint64 `json:"clients"`
	Routes   uint64 `json:"routes"`
	Gateways uint64 `json:"gateways"`
	Leafs    uint64 `json:"leafs"`
}

func (m *monitor) handleVarz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, m.varz(time.Now()))
}

func (m *monitor) varz(now time.Time) *Varz {
	s := m.s
	o := &s.opts
	t := m.counters()
	slow, slowRoutes := s.stats.slowConsumers.Load(), s.stats.slowRoutes.Load()
	v := &Varz{
		ID:                 s.id,
		Name:               s.name,
		Tags:               o.Tags,
		Version:            Version,
		Proto:              s.info.Proto,
		GoVersion:          runtime.Version(),
		Host:               o.Host,
		Port:               s.info.Port,
		AuthRequired:       s.info.AuthRequired,
		TLSRequired:        s.info.TLSRequired,
		MaxConn:            o.MaxConnections,
		MaxSubs:            o.MaxSubscriptions,
		PingInterval:       o.PingInterval,
		MaxPingsOut:        o.MaxPingsOut,
		HTTPHost:           o.HTTPHost,
		AuthTimeout:        o.AuthTimeout.Seconds(),
		MaxControlLine:     o.MaxControlLine,
		MaxPayload:         o.MaxPayload,
		MaxPending:         int64(o.MaxPending),
		WriteDeadline:      o.WriteDeadline,
		Start:              s.start.UTC(),
		Now:                now.UTC(),
		Uptime:             formatUptime(now.Sub(s.start)),
		Mem:                residentMemory(),
		Cores:              runtime.NumCPU(),
		MaxProcs:           runtime.GOMAXPROCS(0),
		CPU:                m.cpu.percent(now),
		Connections:        s.NumClients(),
		TotalConnections:   uint64(s.stats.totalConns.Load()),
		InMsgs:             t.inMsgs,
		InBytes:            t.inBytes,
		OutMsgs:            t.outMsgs,
		OutBytes:           t.outBytes,
		InClientMsgs:       t.inMsgs,
		InClientBytes:      t.inBytes,
		OutClientMsgs:      t.outMsgs,
		OutClientBytes:     t.outBytes,
		SlowConsumers:      slow,
		Subscriptions:      uint32(s.NumSubscriptions()),
		HTTPReqStats:       m.requestStats(),
		SlowConsumersStats: &SlowConsumersStats{Clients: uint64(slow - slowRoutes), Routes: uint64(slowRoutes)},
		Routes:             s.NumRoutes(),
		Cluster:            s.clusterVarz(),
	}
	if sys := s.SystemAccount(); sys != nil {
		v.SystemAccount = sys.name
	}
	if a, ok := s.MonitorAddr().(*net.TCPAddr); ok {
		v.HTTPPort = a.Port
	}
	return v
}
