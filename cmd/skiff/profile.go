package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"
)

// startProfiling serves Go's pprof endpoints on 127.0.0.1:port, as
// nats-server's --profile does, for looking at a running broker with
// `go tool pprof http://127.0.0.1:PORT/debug/pprof/profile`.
func startProfiling(port int, stderr io.Writer) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintln(stderr, "skiff serve: profiling:", err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stderr, "profiling on http://%s/debug/pprof/\n", ln.Addr())
}
