package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRespTable(t *testing.T) {
	a, b := &Account{name: "A"}, &Account{name: "B"}
	tab := newRespTable(a, "_R_.abcdef.")
	pr := Principal{kind: clientUser, acc: b, name: "b"}

	single := tab.add(b, []byte("_INBOX.1"), pr, Singleton, false, time.Minute)
	require.True(t, strings.HasPrefix(single.key, "_R_.abcdef."))
	require.Len(t, single.key, len("_R_.abcdef.")+10)
	streamed := tab.add(b, []byte("_INBOX.2"), pr, Streamed, false, time.Minute)
	require.NotEqual(t, single.key, streamed.key)
	require.Equal(t, 2, tab.pending())

	e := tab.take(single.key)
	require.Same(t, single, e)
	require.Equal(t, "_INBOX.1", e.reply)
	require.Equal(t, b, e.to)
	require.Equal(t, pr, e.pr)
	require.Nil(t, tab.take(single.key), "a Singleton answers once")

	require.Same(t, streamed, tab.take(streamed.key))
	require.Same(t, streamed, tab.take(streamed.key), "a Streamed one until removed")
	tab.remove(streamed)
	tab.remove(streamed) // twice is harmless
	require.Nil(t, tab.take(streamed.key))
	require.Zero(t, tab.pending())
	require.Nil(t, tab.take("_R_.abcdef.nothere"))
}

func TestRespTableExpiry(t *testing.T) {
	tab := newRespTable(&Account{name: "A"}, "_R_.abcdef.")
	b := &Account{name: "B"}
	short := tab.add(b, []byte("r1"), Principal{}, Streamed, false, 10*time.Millisecond)
	long := tab.add(b, []byte("r2"), Principal{}, Singleton, false, time.Hour)
	now := time.Now()
	tab.sweep(now.UnixNano())
	require.Equal(t, 2, tab.pending(), "nothing expired yet")

	later := now.Add(time.Second)
	tab.delivered(short) // a response moves its deadline on by the threshold...
	tab.sweep(now.Add(5 * time.Millisecond).UnixNano())
	require.Equal(t, 2, tab.pending())
	tab.sweep(later.UnixNano()) // ...but not past it
	require.Equal(t, 1, tab.pending())
	require.Nil(t, tab.take(short.key))
	require.Same(t, long, tab.take(long.key))
	require.EqualValues(t, 1, tab.expired.Load())
}

func TestRespTableBound(t *testing.T) {
	tab := newRespTable(&Account{name: "A"}, "_R_.abcdef.")
	b := &Account{name: "B"}
	first := tab.add(b, []byte("first"), Principal{}, Singleton, false, time.Hour)
	second := tab.add(b, []byte("second"), Principal{}, Singleton, false, time.Hour)
	tab.remove(second) // removed entries leave the order too
	var oldest *respEntry
	for i := range maxPendingResponses - 1 {
		e := tab.add(b, fmt.Appendf(nil, "r%d", i), Principal{}, Singleton, false, time.Hour)
		if i == 0 {
			oldest = e
		}
	}
	require.Equal(t, maxPendingResponses, tab.pending())
	require.Same(t, first, tab.take(first.key), "full, nothing dropped yet")
	tab.add(b, []byte("again"), Principal{}, Singleton, false, time.Hour)
	third := tab.add(b, []byte("past the bound"), Principal{}, Singleton, false, time.Hour)
	require.Equal(t, maxPendingResponses, tab.pending())
	require.EqualValues(t, 1, tab.evicted.Load(), "the oldest went")
	require.Same(t, third, tab.take(third.key))
	require.Nil(t, tab.take(oldest.key), "the oldest is r0: first was answered")
}

func BenchmarkRespTable(b *testing.B) {
	tab := newRespTable(&Account{name: "A"}, "_R_.abcdef.")
	to := &Account{name: "B"}
	reply := []byte("_INBOX.abcdefghijklmnop.1")
	b.ReportAllocs()
	for range b.N {
		e := tab.add(to, reply, Principal{}, Singleton, false, time.Minute)
		tab.take(e.key)
	}
}
