package conf_test

import (
	"errors"
	"fmt"
	"testing/fstest"

	"github.com/skiffmq/skiff/internal/conf"
)

func Example() {
	m, err := conf.Parse([]byte(`
port: 4222
max_payload: 1MB        # 1048576 bytes
ping_interval: 2m       # a size too, but read here as a duration
authorization {
  timeout: 2            # seconds
  users = [
    {user: alice, password: s3cret}
  ]
}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	port, _ := m.Get("port")
	fmt.Println(port.Int())
	payload, _ := m.Get("max_payload")
	fmt.Println(payload.Size())
	ping, _ := m.Get("ping_interval")
	fmt.Println(ping.Duration())

	auth, _ := m.Get("authorization")
	am, _ := auth.Map()
	timeout, _ := am.Get("TIMEOUT") // keys match in any case
	fmt.Println(timeout.Duration())
	fmt.Println(timeout.Bool())
	// Output:
	// 4222 <nil>
	// 1048576 <nil>
	// 2m0s <nil>
	// 2s <nil>
	// false conf: line 6: authorization.timeout: cannot read int "2" as a boolean
}

func ExampleParse_error() {
	_, err := conf.Parse([]byte("port: 4222\ncluster {\n  routes: [\n"))
	fmt.Println(err)
	fmt.Println(errors.Is(err, conf.ErrSyntax))
	// Output:
	// conf: line 3: the '[' on this line is never closed
	// true
}

func ExampleParseFS() {
	fsys := fstest.MapFS{
		"skiff.conf": {Data: []byte("port: 4222\ninclude tls.conf\n")},
		"tls.conf":   {Data: []byte("tls { cert_file: ./server.pem }\n")},
	}
	m, err := conf.ParseFS(fsys, "skiff.conf")
	if err != nil {
		fmt.Println(err)
		return
	}
	tls, _ := m.Get("tls")
	fmt.Println(tls.File(), tls.Line())
	// Output:
	// tls.conf 1
}

func ExampleMap_String() {
	m, _ := conf.Parse([]byte(`PORT = 4222; port: $PORT, listen: 0.0.0.0:4222
tls { cert_file: './server.pem', timeout: 2s }
routes [nats://a:6222, nats://b:6222]`))
	fmt.Print(m)
	// Output:
	// port: 4222
	// listen: "0.0.0.0:4222"
	// tls {
	//   cert_file: "./server.pem"
	//   timeout: "2s"
	// }
	// routes: ["nats://a:6222", "nats://b:6222"]
}
