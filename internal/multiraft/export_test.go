package multiraft

import (
	"net"
	"testing"
)

// LoopbackConns returns the two ends of a TCP connection on loopback
// (tests only).
func LoopbackConns(t testing.TB) (net.Conn, net.Conn) { return loopbackConns(t) }
