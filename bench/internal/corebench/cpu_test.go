package corebench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       time.Duration
		err        bool
	}{
		{"plain", "4242 (skiff) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 12 0 100 0 0", 2870 * time.Millisecond, false},
		{"name with spaces and parentheses", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0 0", 70 * time.Millisecond, false},
		{"no name", "4242 skiff S 1", 0, true},
		{"too short", "4242 (skiff) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250", 0, true},
		{"not a number", "4242 (skiff) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 37 0", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.line)
			if (err != nil) != tt.err {
				t.Fatalf("parseStatCPU: err %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("parseStatCPU = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestProcCPU reads this process's CPU time, which a busy loop moves on:
// by 20 ms (two ticks) within 10 s of looping, however loaded the machine.
func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for range 1 << 20 {
			x++
		}
		now, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 20*time.Millisecond {
			return
		}
	}
	t.Fatalf("CPU time did not move by 20 ms over 10 s of a busy loop (%d turns)", x)
}
