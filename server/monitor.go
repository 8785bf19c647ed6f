package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Monitoring endpoints. Their JSON uses the reference server's field names,
// because the nats CLI and the Prometheus exporters for NATS read them.
const (
	healthzPath = "/healthz"
	varzPath    = "/varz"
	connzPath   = "/connz"
	subszPath   = "/subsz"
	metricsPath = "/metrics"

	accountzPath     = "/accountz"
	accountStatzPath = "/accstatz"
)

// monitor serves the monitoring endpoints of one server. Its handlers run
// on net/http's goroutines, any number at once; everything they read from
// the server is read under the server's locks or through atomics.
type monitor struct {
	s   *Server
	reg *prometheus.Registry
	cpu cpuSampler

	reqs struct {
		sync.Mutex
		byPath map[string]uint64
	}
	totals monotonicTotals
}

func newMonitor(s *Server) (*monitor, error) {
	m := &monitor{s: s, reg: prometheus.NewRegistry()}
	m.reqs.byPath = map[string]uint64{}
	m.cpu.start(time.Now())
	if err := m.reg.Register(&metricsCollector{m: m}); err != nil {
		return nil, fmt.Errorf("server: monitoring: %w", err)
	}
	for _, c := range s.extraMetrics {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: monitoring: %w", err)
		}
	}
	return m, nil
}

// startMonitoring opens the monitoring listener and serves the endpoints.
// Shutdown closes it.
func (s *Server) startMonitoring() error {
	m := s.mon
	ln, err := net.Listen("tcp", hostPort(s.opts.HTTPHost, s.opts.HTTPPort))
	if err != nil {
		return fmt.Errorf("server: monitoring listen: %w", err)
	}
	s.httpLn = ln
	s.httpSrv = &http.Server{Handler: m.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.httpSrv.Serve(ln) }()
	return nil
}

// handler routes the endpoints. Only GET (and so HEAD) is served; the mux
// answers other methods with 405.
func (m *monitor) handler() http.Handler {
	mux := http.NewServeMux()
	route := func(path string, h http.HandlerFunc) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			m.countRequest(path)
			h(w, r)
		})
	}
	route(healthzPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		hs := m.s.healthz(q.Get("js-enabled-only") == "true" || q.Get("js-enabled") == "true")
		code := hs.StatusCode
		if hs.Error != "" {
			m.s.log.Warn("health check failed", "err", hs.Error)
		}
		hs.StatusCode = 0 // the HTTP status says it, as in nats-server
		writeJSON(w, code, hs)
	})
	route(varzPath, m.handleVarz)
	route(connzPath, m.handleConnz)
	route(subszPath, m.handleSubsz)
	route(routezPath, m.handleRoutez)
	route(accountzPath, m.handleAccountz)
	route(accountStatzPath, m.handleAccountStatz)
	route(metricsPath, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP)
	for path, f := range m.s.extraMonitor {
		route(path, func(w http.ResponseWriter, r *http.Request) {
			v, err := f(r)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	return mux
}

// MonitorFunc builds the answer of a monitoring endpoint added with
// HandleMonitor: a value the server writes as JSON, or an error it answers
// with 400 and {"error": "..."} (a bad query parameter, say).
type MonitorFunc func(r *http.Request) (any, error)

// HandleMonitor adds an endpoint to the monitoring port (JetStream adds
// /jsz), served for GET like the built-in ones, in the same JSON style, and
// counted in /varz's http_req_stats. Call it before Start; it refuses a
// path already served.
func (s *Server) HandleMonitor(path string, f MonitorFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started {
		return errors.New("server: HandleMonitor after Start")
	}
	if _, dup := s.extraMonitor[path]; dup || builtinMonitorPath(path) {
		return fmt.Errorf("server: monitoring path %s already served", path)
	}
	if s.extraMonitor == nil {
		s.extraMonitor = map[string]MonitorFunc{}
	}
	s.extraMonitor[path] = f
	return nil
}

// RegisterMetrics adds a collector to /metrics (JetStream adds its
// streams' and consumers' metrics). Call it before Start. Its metrics must
// not collide with the server's own or another collector's: the
// registration at Start would fail.
func (s *Server) RegisterMetrics(c prometheus.Collector) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started {
		return errors.New("server: RegisterMetrics after Start")
	}
	s.extraMetrics = append(s.extraMetrics, c)
	return nil
}

// builtinMonitorPath reports whether the server serves path itself.
func builtinMonitorPath(path string) bool {
	switch path {
	case healthzPath, varzPath, connzPath, subszPath, metricsPath, routezPath, accountzPath, accountStatzPath:
		return true
	}
	return false
}

// countRequest counts a request for /varz's http_req_stats. A request is
// counted before it is answered, so /varz includes itself, as in the
// reference server.
func (m *monitor) countRequest(path string) {
	m.reqs.Lock()
	m.reqs.byPath[path]++
	m.reqs.Unlock()
}

// requestStats returns a copy of the request counts.
func (m *monitor) requestStats() map[string]uint64 {
	m.reqs.Lock()
	defer m.reqs.Unlock()
	return maps.Clone(m.reqs.byPath)
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
}

// writeJSON answers with v, indented for people reading it with curl, and
// with subjects such as "orders.>" left as they are rather than escaped
// for HTML.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		// The response types are fixed structs of plain values.
		panic("server: monitoring response does not marshal: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeError answers 400 with the error as JSON.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
}

// formatUptime renders a duration as the reference server does, in whole
// seconds with days and years: "45s", "3m5s", "2h0m1s", "1d2h3m4s",
// "1y0d0h0m0s".
func formatUptime(d time.Duration) string {
	secs := int64(max(d, 0) / time.Second)
	mins, hours := secs/60, secs/3600
	days := hours / 24
	years := days / 365
	switch {
	case years > 0:
		return fmt.Sprintf("%dy%dd%dh%dm%ds", years, days%365, hours%24, mins%60, secs%60)
	case days > 0:
		return fmt.Sprintf("%dd%dh%dm%ds", days, hours%24, mins%60, secs%60)
	case hours > 0:
		return fmt.Sprintf("%dh%dm%ds", hours, mins%60, secs%60)
	case mins > 0:
		return fmt.Sprintf("%dm%ds", mins, secs%60)
	}
	return fmt.Sprintf("%ds", secs)
}
