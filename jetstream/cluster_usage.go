package jetstream

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/skiffmq/skiff/internal/jscluster"
)

// Account quotas over a cluster. An account's max_memory and max_store
// bound what its streams hold on every server together, as in
// nats-server. Each server tells the others what its streams of each
// account with a quota hold, once per quotaInterval after its recount
// (fwdUsageReport, over the raft links), and adds what the others told
// it to its own count when it judges a publish (wouldExceed). So the
// bound holds over the cluster but for what arrives in one interval, as
// it holds on one server but for what arrives between two recounts. A
// server's last report stands while it is down: its disk still holds
// what it said. Reservations (max_bytes) are checked over the cluster by
// the meta leader, from the configurations in the meta state
// (assignedReserved).

// fwdUsageReport: a peer's usage, by account, in Data (usageReport).
const fwdUsageReport = "usage_report"

// usageReport is what one server's streams hold, by account: memory and
// file storage, in bytes.
type usageReport map[string][2]int64

// peerUsage is what the other servers reported.
type peerUsage struct {
	mu      sync.Mutex
	reports map[string]usageReport // by server name
	sending bool                   // a round of reports is under way
}

// peerUsed returns what the account's streams of type t hold on the
// other servers, as they last reported.
func (ja *jsAccount) peerUsed(t StorageType) int64 {
	if t == MemoryStorage {
		return ja.peerMem.Load()
	}
	return ja.peerFile.Load()
}

// reportUsage tells every other server of the meta group what this one's
// streams hold of each account with a quota, unless the last round is
// still under way (a peer slow to answer).
func (js *JetStream) reportUsage() {
	if js.raft == nil {
		return
	}
	rep := usageReport{}
	for _, ja := range js.sortedAccounts() {
		if l := ja.lim(); l.maxMemory >= 0 || l.maxStore >= 0 {
			rep[ja.name] = [2]int64{ja.memQuota.used.Load(), ja.fileQuota.used.Load()}
		}
	}
	data, err := json.Marshal(rep)
	if err != nil {
		return
	}
	var peers []string
	me := js.raft.Name()
	js.raft.View(func(s *jscluster.State) {
		for name := range s.Servers {
			if name != me {
				peers = append(peers, name)
			}
		}
	})
	pu := &js.peerUsage
	pu.mu.Lock()
	if pu.sending || len(peers) == 0 {
		pu.mu.Unlock()
		return
	}
	pu.sending = true
	pu.mu.Unlock()
	body, err := json.Marshal(&forwardRequest{Op: fwdUsageReport, Data: data})
	if err != nil {
		return
	}
	js.wg.Add(1)
	go func() {
		defer js.wg.Done()
		defer func() { pu.mu.Lock(); pu.sending = false; pu.mu.Unlock() }()
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), quotaInterval)
				defer cancel()
				if _, err := js.raft.Call(ctx, p, body); err != nil {
					js.log.Debug("usage report not delivered", "to", p, "err", err)
				}
			})
		}
		wg.Wait()
	}()
}

// usageReported takes a peer's report and sets every account's sum of
// the other servers' usage.
func (js *JetStream) usageReported(from string, data []byte) error {
	var rep usageReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return err
	}
	pu := &js.peerUsage
	pu.mu.Lock()
	defer pu.mu.Unlock()
	if pu.reports == nil {
		pu.reports = map[string]usageReport{}
	}
	pu.reports[from] = rep
	for _, ja := range js.sortedAccounts() {
		var mem, file int64
		for _, r := range pu.reports {
			mem += r[ja.name][0]
			file += r[ja.name][1]
		}
		ja.peerMem.Store(mem)
		ja.peerFile.Store(file)
	}
	return nil
}

// assignedReserved sums what the account's streams of type t but skip,
// on every server, reserve of its quota: their max_bytes, from the meta
// state (accountReservedLocked's count over the cluster).
func (ja *jsAccount) assignedReserved(t StorageType, skip string) int64 {
	var sum int64
	ja.js.raft.View(func(s *jscluster.State) {
		for k, sa := range s.Streams {
			if k.Account != ja.name || k.Name == skip {
				continue
			}
			var cfg StreamConfig
			if json.Unmarshal(sa.Config, &cfg) == nil && cfg.Storage == t && cfg.MaxBytes > 0 {
				sum += cfg.MaxBytes
			}
		}
	})
	return sum
}

// checkClusterReserve refuses a stream configuration whose max_bytes does
// not fit the account's quota beside its other streams' on every server
// (10028 memory, 10047 file), on the meta leader.
func (ja *jsAccount) checkClusterReserve(cfg *StreamConfig) *APIError {
	_, limit := ja.quotaFor(cfg.Storage)
	if limit < 0 {
		return nil
	}
	reserved, add := ja.assignedReserved(cfg.Storage, cfg.Name), reservation(cfg.MaxBytes)
	if reserved > limit || add > limit-reserved {
		return errInsufficient(cfg.Storage)
	}
	return nil
}
