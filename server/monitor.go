package server

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// startMonitoring opens the monitoring listener and serves the endpoints.
func (s *Server) startMonitoring() error {
	ln, err := net.Listen("tcp", hostPort(s.opts.HTTPHost, s.opts.HTTPPort))
	if err != nil {
		return fmt.Errorf("server: monitoring listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	s.httpLn = ln
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.httpSrv.Serve(ln) }()
	return nil
}
