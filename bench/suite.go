package bench

// Config is one latency configuration of a suite.
type Config struct {
	Size        int
	Rate        float64
	Connections int
}

// Suites are the named sets of configurations `--suite` accepts.
var Suites = map[string][]Config{
	// published: the five configurations of Tyler Treat's "Benchmarking
	// Message Queue Latency" (https://bravenewgeek.com/benchmarking-message-queue-latency/).
	"published": {
		{Size: 256, Rate: 3000, Connections: 1},
		{Size: 1 << 10, Rate: 3000, Connections: 1},
		{Size: 5 << 10, Rate: 2000, Connections: 1},
		{Size: 1 << 10, Rate: 20000, Connections: 25},
		{Size: 1 << 20, Rate: 100, Connections: 1},
	},
}
