package jetstream

import (
	"github.com/skiffmq/skiff/server"
)

// In operator mode with the full resolver, accounts come and change while
// the server runs (server.OnAccountUpdate). JetStream follows what each
// account's JWT says now:
//
//	JetStream before   JetStream now   what happens
//	no                 yes             enabled: its streams recovered from disk, its API served
//	yes                yes             its limits replaced (what is stored stays, even past them)
//	yes                no              disabled: its streams closed (their files stay), its API answers 10039
//	no                 no              its API answers 10039
//
// As at start, an account whose quotas do not fit beside the others' in
// the server's is not enabled, and says why in the log.

// accountUpdated follows account a's JWT; it runs on the goroutine that
// applied it.
func (js *JetStream) accountUpdated(a *server.Account) {
	if js.closed.Load() || a == js.srv.SystemAccount() {
		return
	}
	l, want := a.JetStreamLimits()
	js.mu.RLock()
	ja := js.mu.accounts[a.Name()]
	js.mu.RUnlock()
	switch {
	case want && ja != nil:
		lim := limitsOf(l)
		ja.limv.Store(&lim)
		js.log.Info("account JetStream limits updated", "account", a.Name())
	case want:
		js.enableLate(a, limitsOf(l))
	case ja != nil:
		js.disable(ja)
	default:
		if err := js.subscribeNotEnabled(a); err != nil {
			js.log.Warn("account API not answered", "account", a.Name(), "err", err)
		}
	}
}

// enableLate enables JetStream for account a, registered or given
// JetStream after the start.
func (js *JetStream) enableLate(a *server.Account, lim limits) {
	mem, store := max(lim.maxMemory, 0), max(lim.maxStore, 0)
	js.mu.RLock()
	for _, ja := range js.mu.accounts {
		mem += max(ja.lim().maxMemory, 0)
		store += max(ja.lim().maxStore, 0)
	}
	js.mu.RUnlock()
	if o := js.opts; (o.MaxMemory >= 0 && mem > o.MaxMemory) || (o.MaxStore >= 0 && store > o.MaxStore) {
		js.log.Warn("account JetStream not enabled: its quotas do not fit beside the other accounts' in the server's",
			"account", a.Name(), "max_memory", lim.maxMemory, "max_store", lim.maxStore)
		if err := js.subscribeNotEnabled(a); err != nil {
			js.log.Warn("account API not answered", "account", a.Name(), "err", err)
		}
		return
	}
	js.unsubscribeNotEnabled(a)
	ja := js.newAccount(a, lim)
	js.mu.Lock()
	js.mu.accounts[ja.name] = ja
	js.mu.Unlock()
	if err := ja.enable(); err != nil {
		js.log.Error("account JetStream not enabled", "account", ja.name, "err", err)
		js.disable(ja)
		return
	}
	js.log.Info("account JetStream enabled", "account", ja.name, "streams", len(ja.streams()))
	if js.opts.Cluster != nil {
		js.streamsChanged(nil, true)
	}
}

// disable takes JetStream away from an account: its API answers 10039,
// its streams close, and their files stay for when it comes back.
func (js *JetStream) disable(ja *jsAccount) {
	js.mu.Lock()
	if js.mu.accounts[ja.name] == ja {
		delete(js.mu.accounts, ja.name)
	}
	js.mu.Unlock()
	for _, is := range ja.subs {
		_ = is.Unsubscribe()
	}
	if err := ja.closeStreams(); err != nil {
		js.log.Warn("account JetStream disabled: a stream did not close cleanly", "account", ja.name, "err", err)
	}
	js.log.Info("account JetStream disabled", "account", ja.name)
	if err := js.subscribeNotEnabled(ja.acc); err != nil {
		js.log.Warn("account API not answered", "account", ja.name, "err", err)
	}
}

// subscribeNotEnabled makes account a's API answer that JetStream is not
// enabled for it (once).
func (js *JetStream) subscribeNotEnabled(a *server.Account) error {
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.mu.notEnabled[a] != nil {
		return nil
	}
	is, err := js.subscribeAPI(a, js.handleNotEnabled)
	if err != nil {
		return err
	}
	js.mu.notEnabled[a] = is
	return nil
}

func (js *JetStream) unsubscribeNotEnabled(a *server.Account) {
	js.mu.Lock()
	is := js.mu.notEnabled[a]
	delete(js.mu.notEnabled, a)
	js.mu.Unlock()
	if is != nil {
		_ = is.Unsubscribe()
	}
}

// lim returns the account's limits in force.
func (ja *jsAccount) lim() *limits { return ja.limv.Load() }
