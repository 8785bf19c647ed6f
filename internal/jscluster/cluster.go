package jscluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store/raftlog"
)

// Cluster is the raft layer of one clustered JetStream server: its WAL,
// its multiraft Node with the TCP transport over raft links, and its
// replica of the meta group. Safe for concurrent use.
type Cluster struct {
	srv  *server.Server
	opts Options
	name string
	id   uint64
	// run is random at each Start: proposals of this run are told apart
	// from a previous run's replayed from the log.
	run   uint64
	log   *slog.Logger
	start time.Time

	wal *raftlog.Log
	// lostTail: the WAL may have lost an unsynced tail before Start.
	// unsynced holds the groups that did until caught up (unsynced.go).
	lostTail bool
	unsynced unsynced
	tr       *multiraft.TCP
	node     *multiraft.Node
	metaLog  fileSnapLog
	meta     *metaFSM
	seq      atomic.Uint64

	wakeCh chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
	joined atomic.Bool // the meta group is on the node
	// rebuilds counts the meta replica's rebuilds (meta_rebuild.go).
	rebuilds atomic.Uint64

	mu struct {
		sync.Mutex
		peers   map[uint64]*peer
		dialing map[string]bool
	}
	linksRefused atomic.Uint64
	calls        calls
	// partition, set by tests, cuts links (SetPartition).
	partition atomic.Pointer[func(peer string) bool]
}

// peer is what this server knows of a link to another server.
type peer struct {
	name string
	// meta is the peer's meta group ID as it said when the link was made
	// ("" if it had none then).
	meta     string
	up       bool
	backoff  time.Duration
	nextDial time.Time
	conn     *linkConn // the last link made
}

// Start starts the raft layer of srv, a clustered server with a
// server_name, before srv starts: it opens the WAL in opts.Dir, restarts
// the meta group from it if it holds one, and registers with srv for raft
// links. A server with no meta state founds the meta group or joins one
// as the rules of membership.go say. Srv's Shutdown closes the Cluster.
func Start(srv *server.Server, opts Options) (*Cluster, error) {
	if !srv.Clustered() {
		return nil, ErrNotClustered
	}
	if srv.Name() == "" || srv.Name() == srv.ID() {
		return nil, ErrNoServerName
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("jscluster: %w", err)
	}
	if err := claimDir(opts.FS, opts.Dir, srv.Name()); err != nil {
		return nil, err
	}
	wal, err := raftlog.Open(raftlog.Options{Dir: filepath.Join(opts.Dir, "wal"), FS: opts.FS,
		Durability: opts.Durability, Logger: opts.Logger, SegmentBytes: opts.WALSegmentBytes, HoldRecovery: true})
	if err != nil {
		return nil, fmt.Errorf("jscluster: %w", err)
	}
	c := &Cluster{srv: srv, opts: opts, name: srv.Name(), id: RaftID(srv.Name()), run: rand.Uint64(),
		log: opts.Logger.With("server_name", srv.Name()), start: time.Now(), wal: wal,
		wakeCh: make(chan struct{}, 1), stop: make(chan struct{})}
	c.mu.peers = map[uint64]*peer{}
	c.mu.dialing = map[string]bool{}
	c.calls.init()
	c.lostTail = lostTail(wal.Recovery(), opts.Durability)
	// The WAL keeps a lost tail on record until the marks are written
	// (raftlog.Options.HoldRecovery): a start that fails before sees the
	// same report at the next.
	err = c.unsynced.open(opts.FS, opts.Dir, wal, c.lostTail, c.log)
	if err == nil {
		err = wal.AckRecovery()
	}
	if err != nil {
		_ = wal.Close()
		return nil, fmt.Errorf("jscluster: %w", err)
	}
	if c.lostTail {
		c.log.Warn("the raft log was not closed and the machine has restarted since: what it had not fsynced may be lost; "+
			"its groups are held (unsynced) until caught up with their leaders", "groups", len(wal.Groups()))
	}
	if err := c.startNode(); err != nil {
		_ = wal.Close()
		return nil, err
	}
	srv.HandleRaftLinks(links{c})
	srv.OnShutdown(func() { _ = c.Close() })
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

// startNode starts the node and its transport, and the meta group if the
// WAL holds it.
func (c *Cluster) startNode() error {
	tr, err := multiraft.NewTCP(multiraft.TCPOptions{})
	if err != nil {
		return err
	}
	node, err := multiraft.New(multiraft.Options{ID: c.id, Tick: c.opts.Tick, HoldTimeout: c.opts.HoldTimeout,
		OnCaughtUp: c.caughtUp}, tr)
	if err != nil {
		return err
	}
	c.tr, c.node = tr, node
	tr.SetHandler(linkHandler{c})
	c.metaLog = fileSnapLog{walLog{c.wal.Group(MetaGroup), c.wal},
		snapFiles{fs: c.opts.FS, dir: filepath.Join(c.opts.Dir, "meta"), prefix: "meta"}}
	c.metaLog.files.prune(0, true)
	c.meta = newMetaFSM(c, c.metaLog)
	has, err := hasState(c.metaLog)
	if err == nil && has {
		err = c.addMeta(multiraft.HoldNone)
	}
	if err != nil {
		_ = tr.Close()
		_ = node.Close()
		return fmt.Errorf("jscluster: meta group: %w", err)
	}
	return nil
}

// hasState reports whether a group's log holds anything.
func hasState(l fileSnapLog) (bool, error) {
	hs, cs, err := l.InitialState()
	if err != nil {
		return false, err
	}
	last, err := l.LastIndex()
	if err != nil {
		return false, err
	}
	return !raft.IsEmptyHardState(hs) || last > 0 || len(cs.GetVoters()) > 0 || len(cs.GetLearners()) > 0, nil
}

// addMeta puts the meta group on the node, from the log as it is, held
// for reason, or unsynced (unsynced.go).
func (c *Cluster) addMeta(held multiraft.HoldReason) error {
	held, err := c.unsynced.hold(MetaGroup, held)
	if err != nil {
		return err
	}
	err = c.node.AddGroup(multiraft.GroupConfig{ID: MetaGroup, Log: c.metaLog, StateMachine: c.meta, Held: held})
	if err == nil {
		c.joined.Store(true)
	}
	return err
}

// Close stops the raft layer: its links, its node and its WAL. Srv's
// Shutdown calls it; it may be called again.
func (c *Cluster) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.stop)
	// The transport first: its readers start calls' goroutines, which
	// the wait below covers.
	err := c.tr.Close()
	c.wg.Wait()
	err = errors.Join(err, c.node.Close())
	return errors.Join(err, c.wal.Close())
}

// Done is closed once Close starts: work that waits on peers (a
// replica's catch-up) gives up then, rather than hold up the node's
// close, which waits for every group's apply goroutine.
func (c *Cluster) Done() <-chan struct{} { return c.stop }

// wake runs the cluster's loop soon.
func (c *Cluster) wake() {
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

// Name returns this server's name, and ID its raft ID.
func (c *Cluster) Name() string { return c.name }

// ID returns this server's raft ID.
func (c *Cluster) ID() uint64 { return c.id }

// MetaID returns the ID of the meta group this server belongs to, "" if it
// has not founded or joined one yet.
func (c *Cluster) MetaID() string {
	var id string
	c.meta.view(func(s *State, _ uint64) { id = s.ID })
	return id
}

// State returns a copy of the meta state, and the index of the last entry
// applied to it.
func (c *Cluster) State() (State, uint64) { return c.meta.state() }

// View runs fn with the meta state, read-locked: fn must not keep it or
// block.
func (c *Cluster) View(fn func(*State)) { c.meta.view(func(s *State, _ uint64) { fn(s) }) }

// ViewAt is View that also tells the index of the last entry applied to
// the state.
func (c *Cluster) ViewAt(fn func(s *State, applied uint64)) { c.meta.view(fn) }

// Leader returns the meta group's leader as this server knows it: its
// name ("" if none is known) and term.
func (c *Cluster) Leader() (name string, term uint64) {
	if !c.joined.Load() {
		return "", 0
	}
	id, term, err := c.node.Leader(MetaGroup)
	if err != nil || id == raft.None {
		return "", term
	}
	return c.nameOf(id), term
}

// IsLeader reports whether this server leads the meta group.
func (c *Cluster) IsLeader() bool {
	if !c.joined.Load() {
		return false
	}
	id, _, err := c.node.Leader(MetaGroup)
	return err == nil && id == c.id
}

// nameOf returns the name of the server with raft ID id, as the meta state
// or a link knows it, or its ID in hex.
func (c *Cluster) nameOf(id uint64) string {
	var name string
	c.meta.view(func(s *State, _ uint64) {
		if si, ok := s.serverByID(id); ok {
			name = si.Name
		}
	})
	if name != "" {
		return name
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.mu.peers[id]; p != nil {
		return p.name
	}
	return fmt.Sprintf("%016x", id)
}

// Members are the meta group's members as this server's raft knows them.
type Members struct {
	Voters, Learners []string // by name, sorted
}

// Members returns the meta group's voters and learners.
func (c *Cluster) Members() (Members, error) {
	if !c.joined.Load() {
		return Members{}, ErrNoMeta
	}
	st, err := c.node.Status(MetaGroup)
	if err != nil {
		return Members{}, err
	}
	var m Members
	for id := range st.Config.Voters.IDs() {
		m.Voters = append(m.Voters, c.nameOf(id))
	}
	for id := range st.Config.Learners {
		m.Learners = append(m.Learners, c.nameOf(id))
	}
	slices.Sort(m.Voters)
	slices.Sort(m.Learners)
	return m, nil
}

// MetaStatus returns raft's status of this server's meta replica.
func (c *Cluster) MetaStatus() (multiraft.Status, error) {
	if !c.joined.Load() {
		return multiraft.Status{}, ErrNoMeta
	}
	return c.node.Status(MetaGroup)
}

// Stats are a Cluster's counters.
type Stats struct {
	// LinksRefused counts raft links refused (admitted or dialed) for
	// belonging to another meta group.
	LinksRefused uint64
	// LinksUp are the servers with a raft link up, by name, sorted.
	LinksUp []string
}

// Stats returns the cluster's counters.
func (c *Cluster) Stats() Stats {
	s := Stats{LinksRefused: c.linksRefused.Load()}
	c.mu.Lock()
	for _, p := range c.mu.peers {
		if p.up {
			s.LinksUp = append(s.LinksUp, p.name)
		}
	}
	c.mu.Unlock()
	slices.Sort(s.LinksUp)
	return s
}

// Propose proposes e to the meta group on its leader, and returns once
// this server applied it, with its result (nil, ErrStreamExists, ...), or
// ErrNotLeader, or ctx's error (the entry may still be applied later).
func (c *Cluster) Propose(ctx context.Context, e Entry) error {
	return c.propose(ctx, e, func(data []byte) error { return c.node.Propose(ctx, MetaGroup, data) })
}

// proposeConfChange proposes cc, with e as its context, as Propose does.
func (c *Cluster) proposeConfChange(ctx context.Context, cc *raftpb.ConfChangeV2, e Entry) error {
	return c.propose(ctx, e, func(data []byte) error {
		cc.Context = data
		return c.node.ProposeConfChange(ctx, MetaGroup, cc)
	})
}

func (c *Cluster) propose(ctx context.Context, e Entry, send func([]byte) error) error {
	switch {
	case c.closed.Load():
		return ErrClosed
	case !c.joined.Load():
		return ErrNoMeta
	case !c.IsLeader():
		return ErrNotLeader
	}
	id := PropID{Server: c.id, Run: c.run, Seq: c.seq.Add(1)}
	e.Prop = &id
	data, err := encodeEntry(e)
	if err != nil {
		return err
	}
	ch := c.meta.await(id)
	defer c.meta.forget(id)
	if err := send(data); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			return fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	}
}

// confState returns the meta group's conf state as raft has it applied.
func (c *Cluster) confState() (*raftpb.ConfState, error) {
	st, err := c.node.Status(MetaGroup)
	if err != nil {
		return nil, err
	}
	return confStateOf(st.Config), nil
}

// lower reports whether name a sorts before b: the lower name of two
// servers dials their raft link, and the lowest may found the meta group.
func lower(a, b string) bool { return a < b }
