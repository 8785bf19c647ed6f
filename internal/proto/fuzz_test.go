package proto

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzParse feeds arbitrary bytes, whole, split at two points the fuzzer
// chooses, and in small reads into the payload space: the parser must never panic, and the operations and the
// error must not depend on how reads split the input.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in), uint16(3), uint16(7))
	}
	f.Add([]byte("HPUB a r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nUNSUB 1 2\r\n"), uint16(20), uint16(21))
	f.Fuzz(func(t *testing.T, in []byte, a, b uint16) {
		limits := Limits{MaxControlLine: 64, MaxPayload: 128}
		i, j := int(a)%(len(in)+1), int(b)%(len(in)+1)
		if i > j {
			i, j = j, i
		}
		wholeCalls, wholeErr := parseChunks(limits, in)
		splitCalls, splitErr := parseChunks(limits, in[:i], in[i:j], in[j:])
		if wholeErr != splitErr {
			t.Fatalf("error %q whole, %q split at %d,%d", wholeErr, splitErr, i, j)
		}
		if len(wholeCalls) != len(splitCalls) {
			t.Fatalf("%d calls whole, %d split at %d,%d:\n%q\n%q", len(wholeCalls), len(splitCalls), i, j, wholeCalls, splitCalls)
		}
		for k := range wholeCalls {
			if wholeCalls[k] != splitCalls[k] {
				t.Fatalf("call %d: %q whole, %q split", k, wholeCalls[k], splitCalls[k])
			}
		}
		readCalls, readErr := parseReads(limits, in, int(a)%17+1)
		if wholeErr != readErr || fmt.Sprint(wholeCalls) != fmt.Sprint(readCalls) {
			t.Fatalf("whole: %q, %q; reads of %d into the payload space: %q, %q", wholeCalls, wholeErr, int(a)%17+1, readCalls, readErr)
		}
		var pe *Error
		if wholeErr != "" && !errors.As(NewParser(discard{}, limits).Parse(in), &pe) {
			t.Fatalf("error %q is not a *proto.Error", wholeErr)
		}
	})
}
