package server

import (
	"bytes"
	"encoding/json"
	"expvar"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"
)

// The runtime's z requests, as nats-server answers them: PROFILEZ (a
// pprof profile, which `nats server request profile` writes to a file),
// EXPVARZ (the Go runtime's memory statistics and command line) and
// IPQUEUESZ (nats-server's internal queues, of which Skiff has none: the
// answer is an empty map).

// ProfilezOptions ask for a profile: a pprof profile by name ("cpu" for a
// CPU profile of Duration, at most maxCPUProfile), with Debug as
// pprof.Profile.WriteTo takes it.
type ProfilezOptions struct {
	Name     string        `json:"name"`
	Debug    int           `json:"debug"`
	Duration time.Duration `json:"duration,omitempty"`
}

// ProfilezStatus is the profile, or why there is none.
type ProfilezStatus struct {
	Profile []byte `json:"profile"`
	Error   string `json:"error"`
}

// maxCPUProfile bounds a CPU profile's duration, as nats-server's.
const maxCPUProfile = 15 * time.Second

// profilez takes a profile.
func profilez(o ProfilezOptions) *ProfilezStatus {
	var buf bytes.Buffer
	switch o.Name {
	case "":
		return &ProfilezStatus{Error: "Profile name not specified"}
	case "cpu":
		if o.Duration <= 0 || o.Duration > maxCPUProfile {
			return &ProfilezStatus{Error: fmt.Sprintf("Duration %s should be between 0s and %s", o.Duration, maxCPUProfile)}
		}
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Failed to start CPU profile: %s", err)}
		}
		time.Sleep(o.Duration)
		pprof.StopCPUProfile()
	default:
		p := pprof.Lookup(o.Name)
		if p == nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Profile %q not found", o.Name)}
		}
		if err := p.WriteTo(&buf, o.Debug); err != nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Profile %q error: %s", o.Name, err)}
		}
	}
	return &ProfilezStatus{Profile: buf.Bytes()}
}

// ExpvarzStatus is the Go runtime's expvars nats-server reports.
type ExpvarzStatus struct {
	Memstats json.RawMessage `json:"memstats"`
	Cmdline  json.RawMessage `json:"cmdline"`
}

func expvarz() *ExpvarzStatus {
	var st ExpvarzStatus
	expvar.Do(func(kv expvar.KeyValue) {
		switch kv.Key {
		case "memstats":
			st.Memstats = json.RawMessage(kv.Value.String())
		case "cmdline":
			st.Cmdline = json.RawMessage(kv.Value.String())
		}
	})
	return &st
}

// subscribeRuntime subscribes PROFILEZ, EXPVARZ and IPQUEUESZ. A profile
// is taken on a goroutine of its own, one at a time (a CPU profile takes
// its duration): a request while one is taken is answered with an error.
func (sy *sysState) subscribeRuntime(server func(z string, h func(*sysIn))) {
	busy := make(chan struct{}, 1)
	server("PROFILEZ", func(in *sysIn) {
		var o struct {
			ProfilezOptions
			EventFilterOptions
		}
		select {
		case busy <- struct{}{}:
		default:
			sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
				return &ProfilezStatus{Error: "a profile is being taken; try again"}, nil
			})
			return
		}
		sy.wg.Add(1)
		go func() {
			defer sy.wg.Done()
			// The slot is freed before the answer goes out, so a requester
			// that asks again as soon as it has its answer is not refused;
			// and freed too when no profile is taken (a bad request, a
			// filter that does not match).
			var release sync.Once
			free := func() { release.Do(func() { <-busy }) }
			defer free()
			sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
				defer free()
				return profilez(o.ProfilezOptions), nil
			})
		}()
	})
	server("EXPVARZ", func(in *sysIn) {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return expvarz(), nil })
	})
	server("IPQUEUESZ", func(in *sysIn) {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return map[string]any{}, nil })
	})
}
