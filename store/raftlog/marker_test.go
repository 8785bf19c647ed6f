package raftlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestCleanAndRebooted checks what Open reports of the last run: whether
// Close completed (Unclean) and whether the operating system restarted
// since (Rebooted), through closes, process crashes, operating system
// crashes and a failed write.
func TestCleanAndRebooted(t *testing.T) {
	boot := "boot-1"
	opts := Options{BootID: func() string { return boot }}
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	open := func(fs *storetest.MemFS) *Log {
		l, err := Open(withDefaults(fs, opts))
		require.NoError(t, err)
		return l
	}
	report := func(l *Log) [2]bool { r := l.Recovery(); return [2]bool{r.Unclean, r.Rebooted} }

	l, err := Open(withDefaults(ffs, opts))
	require.NoError(t, err)
	require.Equal(t, [2]bool{false, false}, report(l), "a new log")
	save(t, l.Group(1), Update{Entries: ents(1, 1, 3, 1)})
	require.NoError(t, l.Close())

	l = open(mem)
	require.Equal(t, [2]bool{false, false}, report(l), "after Close")
	crashed := mem.Clone() // a process crash: Close never ran
	require.NoError(t, l.Close())

	l = open(crashed)
	require.Equal(t, [2]bool{true, false}, report(l), "after a process crash")
	osCrash := crashed.CrashClone() // the marker's removal was durable at Open
	require.NoError(t, l.Close())

	boot = "boot-2"
	l = open(osCrash)
	require.Equal(t, [2]bool{true, true}, report(l), "after an operating system crash")
	require.NoError(t, l.Close())
	l = open(osCrash)
	require.Equal(t, [2]bool{false, false}, report(l), "closed under the same boot")
	require.NoError(t, l.Close())
	boot = "boot-3"
	l = open(osCrash)
	require.Equal(t, [2]bool{false, true}, report(l), "closed, then a reboot")
	require.NoError(t, l.Close())

	// A failed write: Close does not mark the log clean.
	l, err = Open(withDefaults(ffs, opts))
	require.NoError(t, err)
	ffs.SetFull(true)
	require.ErrorIs(t, l.Group(1).SaveWait(Update{Entries: ents(1, 4, 4, 1)}), ErrWrite)
	ffs.SetFull(false)
	require.NoError(t, l.Close())
	l = open(mem)
	require.Equal(t, [2]bool{true, false}, report(l), "after a failed write")
	require.NoError(t, l.Close())
}

// TestHoldRecovery: with Options.HoldRecovery, a lost tail stays on
// record (Unclean and Rebooted) through closes, crashes and later opens
// under the same boot, until AckRecovery; then the log reports as usual.
func TestHoldRecovery(t *testing.T) {
	boot := "boot-1"
	opts := Options{BootID: func() string { return boot }, HoldRecovery: true}
	mem := storetest.NewMemFS()
	open := func() *Log {
		l, err := Open(withDefaults(mem, opts))
		require.NoError(t, err)
		return l
	}
	report := func(l *Log) [2]bool { r := l.Recovery(); return [2]bool{r.Unclean, r.Rebooted} }

	l := open()
	save(t, l.Group(1), Update{Entries: ents(1, 1, 3, 1)})
	mem = mem.CrashClone() // the operating system stopped with the process
	_ = l.Close()
	boot = "boot-2"

	l = open()
	require.Equal(t, [2]bool{true, true}, report(l), "after an operating system crash")
	require.NoError(t, l.Close())
	l = open()
	require.Equal(t, [2]bool{true, true}, report(l), "not acknowledged: closed, the same boot")
	mem = mem.Clone() // a process crash
	_ = l.Close()
	l = open()
	require.Equal(t, [2]bool{true, true}, report(l), "not acknowledged: a process crash")
	require.NoError(t, l.AckRecovery())
	require.NoError(t, l.AckRecovery(), "again: nothing pending")
	require.NoError(t, l.Close())
	l = open()
	require.Equal(t, [2]bool{false, false}, report(l), "acknowledged, then closed")
	require.NoError(t, l.Close())
}

func TestDefaultBootID(t *testing.T) {
	id := DefaultBootID()
	if id == "" {
		t.Skip("no boot ID on this system")
	}
	require.Equal(t, id, DefaultBootID())
	require.Len(t, id, 36, "a UUID")
}

// machineFS is a file system that models a machine's boot ID.
type machineFS struct {
	*storetest.MemFS
	boot string
}

func (m *machineFS) BootID() string { return m.boot }

// TestMachineBootID: a file system that models a machine (Machine) gives
// the boot ID when Options.BootID is not set, and Options.BootID wins
// over it.
func TestMachineBootID(t *testing.T) {
	for _, tc := range []struct {
		name         string
		optBoot      string // "": Options.BootID not set
		rebootFS     bool   // the machine's boot ID changes before the second Open
		wantRebooted bool
	}{
		{name: "the machine's boot, unchanged", wantRebooted: false},
		{name: "the machine rebooted", rebootFS: true, wantRebooted: true},
		{name: "Options.BootID wins", optBoot: "fixed", rebootFS: true, wantRebooted: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &machineFS{MemFS: storetest.NewMemFS(), boot: "m-1"}
			opts := DefaultOptions("/wal")
			opts.FS = fs
			opts.BootID = nil
			if tc.optBoot != "" {
				opts.BootID = func() string { return tc.optBoot }
			}
			l, err := Open(opts)
			require.NoError(t, err)
			save(t, l.Group(1), Update{Entries: ents(1, 1, 3, 1)})
			require.NoError(t, l.Close())
			if tc.rebootFS {
				fs.boot = "m-2"
			}
			l, err = Open(opts)
			require.NoError(t, err)
			require.Equal(t, tc.wantRebooted, l.Recovery().Rebooted)
			require.NoError(t, l.Close())
		})
	}
}
