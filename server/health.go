package server

import (
	"net/http"
)

// HealthFunc reports why the server is not healthy, or nil: a component's
// part of /healthz (JetStream in a cluster: whether it is current with its
// meta leader).
type HealthFunc func() error

// HandleHealth adds f to the checks of /healthz and of $SYS HEALTHZ. A
// failing check answers 503 with its error as the reason, as nats-server's
// healthz does. Call it before Start.
func (s *Server) HandleHealth(f HealthFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health = append(s.health, f)
}

// healthz runs the checks: the server is up; asked about JetStream only
// (jsEnabledOnly), whether it has it; otherwise each added check too.
func (s *Server) healthz(jsEnabledOnly bool) *HealthStatus {
	if jsEnabledOnly {
		if !s.jetstream {
			return &HealthStatus{Status: "unavailable", StatusCode: http.StatusServiceUnavailable, Error: "JetStream not enabled"}
		}
		return &HealthStatus{Status: "ok", StatusCode: http.StatusOK}
	}
	s.mu.Lock()
	checks := s.health
	s.mu.Unlock()
	for _, f := range checks {
		if err := f(); err != nil {
			return &HealthStatus{Status: "unavailable", StatusCode: http.StatusServiceUnavailable, Error: err.Error()}
		}
	}
	return &HealthStatus{Status: "ok", StatusCode: http.StatusOK}
}
