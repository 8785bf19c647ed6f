package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/subject"
)

// The stream half of the API.

// Page sizes of the listing APIs, as the reference server's.
const (
	namesLimit = 1024
	listLimit  = 256
)

type streamInfoResponse struct {
	apiResponse
	paged // of State.Subjects, on STREAM.INFO with a subjects filter
	*StreamInfo
}

// streamChangeResponse answers STREAM.CREATE and STREAM.UPDATE: the info
// without paging, as nats-server's (strict clients refuse extra fields).
type streamChangeResponse struct {
	apiResponse
	*StreamInfo
	DidCreate bool `json:"did_create,omitempty"`
}

type successResponse struct {
	apiResponse
	Success bool `json:"success"`
}

type purgeResponse struct {
	apiResponse
	Success bool   `json:"success"`
	Purged  uint64 `json:"purged"`
}

type pagedRequest struct {
	Offset  int    `json:"offset"`
	Subject string `json:"subject"`
}

type paged struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

type streamNamesResponse struct {
	apiResponse
	paged
	Streams []string `json:"streams"`
}

type streamListResponse struct {
	apiResponse
	paged
	Streams []*StreamInfo `json:"streams"`
}

// streamCreate answers STREAM.CREATE with this server's streams; group is
// the meta group's for the stream, in a cluster (0 outside one).
func (ja *jsAccount) streamCreate(name string, data []byte, group uint64) any {
	r := &streamChangeResponse{apiResponse: newResponse("stream_create")}
	ncfg, aerr := ja.createConfig(name, data)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	if st, aerr := ja.reserveStream(name, ncfg); st != nil || aerr != nil {
		if aerr != nil {
			r.Error = aerr
			return r
		}
		// The reference server says did_create for an identical create.
		r.StreamInfo, r.DidCreate = st.info(), true
		return r
	}
	// Opening the stream (its files, a subscription per subject) runs
	// without ja.mu: the name and subjects are reserved.
	meta := streamMeta{Config: ncfg, Created: time.Now().UTC(), Group: group}
	if ja.js.raft != nil {
		if a := ja.js.assignmentOf(ja.name, name); a != nil {
			meta.Raft = a.HasGroup()
		}
	}
	st, err := ja.openStream(meta, true, nil)
	if err != nil {
		ja.js.log.Warn("stream create failed", "account", ja.name, "stream", name, "err", err)
		// What the failed create wrote would come back at the next start,
		// as a stream never created or a directory without metadata.
		if rmErr := os.RemoveAll(filepath.Join(ja.dir, name)); rmErr != nil {
			ja.js.log.Warn("failed stream create not cleaned up", "account", ja.name, "stream", name, "err", rmErr)
		}
		ja.mu.Lock()
		delete(ja.mu.creating, name)
		ja.unindexSubjectsLocked(ncfg.Subjects)
		ja.mu.Unlock()
		r.Error = apiErr(500, 10049, err.Error())
		return r
	}
	ja.mu.Lock()
	delete(ja.mu.creating, name)
	ja.mu.streams[name] = st
	ja.mu.Unlock()
	ja.js.log.Info("stream created", "account", ja.name, "stream", name, "subjects", len(ncfg.Subjects), "storage", ncfg.Storage)
	r.StreamInfo, r.DidCreate = st.info(), true
	ja.adviseStream(advStreamCreated, name, "create")
	return r
}

// createConfig reads and checks the configuration of a STREAM.CREATE of
// name, and returns it normalized.
func (ja *jsAccount) createConfig(name string, data []byte) (StreamConfig, *APIError) {
	var cfg StreamConfig
	if aerr := ja.js.decode(data, &cfg); aerr != nil {
		return cfg, aerr
	}
	if aerr := unsupportedStream(data); aerr != nil {
		return cfg, aerr
	}
	if cfg.Name != name {
		return cfg, errStreamMismatch()
	}
	if aerr := checkMirrorDirect(cfg); aerr != nil {
		return cfg, aerr
	}
	// A stream that does not choose its sync policy gets the server's.
	if aerr := syncDefaults(data, &cfg, ja.js.opts.Sync, ja.js.opts.SyncInterval); aerr != nil {
		return cfg, aerr
	}
	ncfg, aerr := ja.js.normalize(cfg)
	if aerr != nil {
		return ncfg, aerr
	}
	if aerr := ja.checkMaxBytes(&ncfg); aerr != nil {
		return ncfg, aerr
	}
	return ncfg, nil
}

// reserveStream checks that a stream named name with cfg may be created
// and reserves its name and subjects. It returns the stream if one
// exists with the same configuration, or an error.
func (ja *jsAccount) reserveStream(name string, cfg StreamConfig) (*stream, *APIError) {
	js := ja.js
	js.reserveMu.Lock()
	defer js.reserveMu.Unlock()
	ja.mu.Lock()
	defer ja.mu.Unlock()
	switch {
	case js.closed.Load():
		return nil, errNotEnabled()
	case ja.mu.streams[name] != nil:
		st := ja.mu.streams[name]
		if !sameConfig(st.config(), cfg) {
			return nil, errStreamNameExist()
		}
		return st, nil
	case ja.mu.failed[name] != nil:
		return nil, errStreamFailedExists(ja.mu.failed[name])
	case ja.mu.creating[name].Name != "":
		// Creates of one name run one after the other (streamWorker):
		// only a bug gets here.
		return nil, errStreamNameExist()
	case ja.lim().maxStreams != noLimit && len(ja.mu.streams)+len(ja.mu.creating) >= ja.lim().maxStreams,
		js.numStreamsLocked(ja) >= js.opts.MaxStreams:
		return nil, errMaxStreams()
	}
	// The limits before the overlap, as nats-server checks them.
	if aerr := ja.checkReserveLocked(&cfg); aerr != nil {
		return nil, aerr
	}
	if ja.overlapsLocked(cfg.Subjects) {
		return nil, errSubjectOverlap()
	}
	ja.mu.creating[name] = cfg
	ja.indexSubjectsLocked(name, cfg.Subjects)
	return nil, nil
}

// overlapsLocked reports whether subjects overlap another stream's (those
// in ja.mu.subjects). ja.mu held.
func (ja *jsAccount) overlapsLocked(subjects []string) bool {
	for _, s := range subjects {
		if _, _, ok := ja.mu.subjects.intersecting(s); ok {
			return true
		}
	}
	return false
}

// indexSubjectsLocked adds a stream's subjects to the overlap index.
// ja.mu held.
func (ja *jsAccount) indexSubjectsLocked(name string, subjects []string) {
	for _, s := range subjects {
		ja.mu.subjects.add(s, name)
	}
}

// unindexSubjectsLocked removes a stream's subjects from the overlap
// index. ja.mu held.
func (ja *jsAccount) unindexSubjectsLocked(subjects []string) {
	for _, s := range subjects {
		ja.mu.subjects.remove(s)
	}
}

func (ja *jsAccount) streamUpdate(name string, data []byte) any {
	r := &streamChangeResponse{apiResponse: newResponse("stream_update")}
	var cfg StreamConfig
	if r.Error = ja.js.decode(data, &cfg); r.Error != nil {
		return r
	}
	if r.Error = unsupportedStream(data); r.Error != nil {
		return r
	}
	if cfg.Name != name {
		r.Error = errStreamMismatch()
		return r
	}
	// mirror_direct is refused at create only: nats-server keeps it on an
	// update of a stream that is no mirror, where it does nothing.
	st := ja.lookup(name)
	if st == nil {
		r.Error = ja.errNoStream(name)
		return r
	}
	if r.Error = st.notLeading(); r.Error != nil {
		return r // a replicated stream's leader updates it, through its group
	}
	// Clients that know nothing of Skiff's sync policy (the nats CLI's
	// stream edit) send the whole configuration without it: it stays.
	old := st.config()
	if r.Error = syncDefaults(data, &cfg, old.Sync, old.SyncInterval); r.Error != nil {
		return r
	}
	ncfg, aerr := ja.js.normalize(cfg)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	if aerr := checkStreamUpdate(st.config(), ncfg); aerr != nil {
		r.Error = aerr
		return r
	}
	if r.Error = ja.checkMaxBytes(&ncfg); r.Error != nil {
		return r
	}
	// The new subjects are indexed before the update runs, without ja.mu
	// (a subscription per subject): a concurrent create cannot take them.
	// Updates and deletes of one stream run one after the other
	// (streamWorker), so the stream stays as looked up.
	ja.js.reserveMu.Lock()
	ja.mu.Lock()
	ja.unindexSubjectsLocked(old.Subjects)
	if ja.overlapsLocked(ncfg.Subjects) {
		ja.indexSubjectsLocked(name, old.Subjects)
		ja.mu.Unlock()
		ja.js.reserveMu.Unlock()
		r.Error = errSubjectOverlap()
		return r
	}
	if r.Error = ja.checkReserveLocked(&ncfg); r.Error == nil {
		r.Error = st.checkConsumerLimits(old.ConsumerLimits, ncfg.ConsumerLimits)
	}
	if r.Error != nil {
		ja.indexSubjectsLocked(name, old.Subjects)
		ja.mu.Unlock()
		ja.js.reserveMu.Unlock()
		return r
	}
	ja.indexSubjectsLocked(name, ncfg.Subjects)
	ja.mu.Unlock()
	ja.js.reserveMu.Unlock()
	update := st.update
	switch {
	case st.repl != nil:
		update = st.repl.updateConfig
	case ncfg.Replicas > 1:
		// Scaled up: turned into a replicated stream here
		// (replica_convert.go).
		update = func(cfg StreamConfig) error {
			nst, err := ja.convertToReplica(st, cfg)
			if err == nil {
				st = nst
			}
			return err
		}
	}
	if err := update(ncfg); err != nil {
		ja.mu.Lock()
		ja.unindexSubjectsLocked(ncfg.Subjects)
		ja.indexSubjectsLocked(name, st.config().Subjects)
		ja.mu.Unlock()
		r.Error = apiErr(500, 10069, err.Error())
		return r
	}
	r.StreamInfo = st.info()
	ja.adviseStream(advStreamUpdated, name, "modify")
	return r
}

// checkStreamUpdate says whether a stream may change from old to cfg, with
// the reference server's texts.
func checkStreamUpdate(old, cfg StreamConfig) *APIError {
	bad := func(what string) *APIError {
		return errStreamConfig(errors.New("stream configuration update can not " + what))
	}
	switch {
	case cfg.Storage != old.Storage:
		return bad("change storage type")
	case cfg.Retention != old.Retention && (old.Retention == WorkQueuePolicy || cfg.Retention == WorkQueuePolicy):
		return bad("change retention policy to/from workqueue")
	case old.Sealed && !cfg.Sealed:
		return bad("unseal a sealed stream")
	case old.DenyDelete && !cfg.DenyDelete:
		return bad("cancel deny message deletes")
	case old.DenyPurge && !cfg.DenyPurge:
		return bad("cancel deny purge")
	case old.AllowMsgTTL && !cfg.AllowMsgTTL:
		return errStreamConfig(errors.New("message TTL status can not be disabled"))
	}
	return nil
}

// update applies a checked configuration: limits to the store, subjects to
// the subscriptions, and the metadata file.
func (st *stream) update(cfg StreamConfig) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, err := st.setConfigLocked(cfg, 0)
	if err != nil {
		return err
	}
	if !slices.Equal(old.Subjects, cfg.Subjects) {
		st.unsubscribeLocked()
		if err := st.subscribeLocked(cfg.Subjects); err != nil {
			return err
		}
	}
	return nil
}

// setConfigLocked gives the stream a new configuration (of the update at
// index of a replicated stream's log, else 0): limits to the store, the
// metadata file, the duplicate window, and the consumers told; it returns
// the old one. st.mu held.
func (st *stream) setConfigLocked(cfg StreamConfig, index uint64) (StreamConfig, error) {
	old := st.config()
	so := cfg.storeOptions(filepath.Join(st.dir, "msgs"))
	if st.repl != nil {
		so = cfg.replicaStoreOptions(filepath.Join(st.dir, "msgs"))
	}
	if err := st.store.UpdateConfig(so); err != nil {
		return old, err
	}
	if err := writeMeta(filepath.Join(st.dir, metaFile), streamMeta{Config: cfg, Created: st.created,
		Group: st.group.Load(), ConfigIndex: index, Raft: st.repl != nil, Founding: st.founding.Load()}); err != nil {
		return old, err
	}
	st.cfg.Store(&cfg)
	st.configIndex.Store(index)
	st.ingestMu.Lock()
	st.ingestMu.dedup.window = cfg.Duplicates
	st.ingestMu.Unlock()
	for _, c := range st.mu.consumers {
		c.changed() // limits may have removed messages
	}
	return old, nil
}

type streamInfoRequest struct {
	SubjectsFilter string `json:"subjects_filter"`
	DeletedDetails bool   `json:"deleted_details"`
	Offset         int    `json:"offset"` // into the sorted subjects
}

// Bounds of a STREAM.INFO answer. Subjects are paged with offset, as in
// the reference server; deleted sequences past the bound are left out
// (num_deleted still counts them all).
const (
	subjectDetailsLimit = 100_000
	deletedDetailsLimit = 100_000
)

func (ja *jsAccount) streamInfo(name string, data []byte) any {
	r := &streamInfoResponse{apiResponse: newResponse("stream_info")}
	var req streamInfoRequest
	st, aerr := ja.streamRequest(name, data, &req)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	r.StreamInfo = st.info()
	if req.SubjectsFilter != "" {
		subjects := st.store.Subjects(req.SubjectsFilter)
		if len(subjects) > 0 {
			var names []string
			r.paged, names = page(sortedKeys(subjects), req.Offset, subjectDetailsLimit)
			r.State.Subjects = make(map[string]uint64, len(names))
			for _, n := range names {
				r.State.Subjects[n] = subjects[n]
			}
		}
	}
	if req.DeletedDetails {
		r.State.Deleted = st.store.Deleted(deletedDetailsLimit)
	}
	return r
}

func (ja *jsAccount) streamDelete(name string) any {
	r := &successResponse{apiResponse: newResponse("stream_delete")}
	ja.mu.Lock()
	st := ja.mu.streams[name]
	delete(ja.mu.streams, name)
	if st != nil {
		st.closing.Store(true) // its subjects stay out of the index (applyConfig)
		ja.unindexSubjectsLocked(st.config().Subjects)
	}
	ja.mu.Unlock()
	if st == nil {
		switch found, err := ja.deleteFailedStream(name); {
		case !found:
			r.Error = errStreamNotFound()
			return r
		case err != nil:
			r.Error = apiErr(500, 10050, "stream delete failed: "+err.Error())
			return r
		}
		ja.js.log.Info("failed stream deleted", "account", ja.name, "stream", name)
		r.Success = true
		return r
	}
	if err := st.close(true); err != nil {
		ja.js.log.Warn("stream delete", "account", ja.name, "stream", name, "err", err)
	}
	ja.js.log.Info("stream deleted", "account", ja.name, "stream", name)
	r.Success = true
	ja.adviseStream(advStreamDeleted, name, "delete")
	return r
}

type purgeRequest struct {
	Filter string `json:"filter"`
	Seq    uint64 `json:"seq"`
	Keep   uint64 `json:"keep"`
}

func (ja *jsAccount) streamPurge(name string, data []byte) any {
	r := &purgeResponse{apiResponse: newResponse("stream_purge")}
	var req purgeRequest
	st, aerr := ja.streamRequest(name, data, &req)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	cfg := st.config()
	switch {
	case cfg.Sealed:
		r.Error = errSealed()
		return r
	case cfg.DenyPurge:
		r.Error = apiErr(500, 10110, "stream purge not permitted")
		return r
	case req.Seq > 0 && req.Keep > 0:
		r.Error = errBadRequest()
		return r
	case req.Filter != "" && subject.ValidatePattern(req.Filter) != nil:
		r.Error = apiErr(500, 10110, "invalid subject filter")
		return r
	}
	if st.repl != nil {
		n, aerr := st.repl.purge(req.Filter, req.Seq, req.Keep)
		if aerr != nil {
			r.Error = aerr
			return r
		}
		r.Success, r.Purged = true, n
		return r
	}
	n, err := st.store.Purge(store.PurgeRequest{Subject: req.Filter, Seq: req.Seq, Keep: req.Keep})
	if err != nil {
		r.Error = apiErr(500, 10110, err.Error())
		return r
	}
	st.changed()
	r.Success, r.Purged = true, n
	return r
}

func (ja *jsAccount) streamNames(data []byte) any {
	r := &streamNamesResponse{apiResponse: newResponse("stream_names")} // null when none, as the reference
	var req pagedRequest
	if r.Error = ja.js.decode(data, &req); r.Error != nil {
		return r
	}
	names := ja.namesMatching(req.Subject)
	r.paged, r.Streams = page(names, req.Offset, namesLimit)
	return r
}

func (ja *jsAccount) streamList(data []byte) any {
	r := &streamListResponse{apiResponse: newResponse("stream_list"), Streams: []*StreamInfo{}}
	var req pagedRequest
	if r.Error = ja.js.decode(data, &req); r.Error != nil {
		return r
	}
	names := ja.namesMatching(req.Subject)
	r.paged, names = page(names, req.Offset, listLimit)
	for _, n := range names {
		if st := ja.lookup(n); st != nil {
			r.Streams = append(r.Streams, st.info())
		}
	}
	return r
}

// namesMatching returns the sorted names of the streams with a subject
// that can overlap filter ("" for all).
func (ja *jsAccount) namesMatching(filter string) []string {
	var out []string
	for _, n := range ja.sortedStreamNames() {
		if filter == "" {
			out = append(out, n)
			continue
		}
		if st := ja.lookup(n); st != nil && slices.ContainsFunc(st.config().Subjects, func(s string) bool {
			return subject.Intersects(s, filter)
		}) {
			out = append(out, n)
		}
	}
	return out
}

// page cuts one page out of a sorted listing.
func page[T any](all []T, offset, limit int) (paged, []T) {
	p := paged{Total: len(all), Offset: max(offset, 0), Limit: limit}
	if p.Offset >= len(all) {
		return p, nil
	}
	end := min(p.Offset+limit, len(all))
	return p, all[p.Offset:end]
}

// msgGetRequest is the body of STREAM.MSG.GET and DIRECT.GET.
type msgGetRequest struct {
	Seq       uint64     `json:"seq"`
	LastFor   string     `json:"last_by_subj"`
	NextFor   string     `json:"next_by_subj"`
	Batch     int        `json:"batch"`
	MaxBytes  int        `json:"max_bytes"`
	StartTime *time.Time `json:"start_time"`
	MultiLast []string   `json:"multi_last"`
	UpToSeq   uint64     `json:"up_to_seq"`
	NoHeaders bool       `json:"no_hdr"`
}

// valid checks the combination of fields as the reference server does.
func (r *msgGetRequest) valid() bool {
	conflict := r.Seq > 0 && r.LastFor != "" ||
		r.Seq > 0 && r.StartTime != nil ||
		r.StartTime != nil && r.LastFor != "" ||
		r.LastFor != "" && r.NextFor != "" ||
		r.LastFor != "" && r.Batch > 0
	return !conflict
}

type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

type msgGetResponse struct {
	apiResponse
	Message *storedMsg `json:"message,omitempty"`
}

// find loads the one message a request names.
func (st *stream) find(req *msgGetRequest) (*store.Msg, error) {
	seq := req.Seq
	if req.StartTime != nil {
		seq = st.store.SeqAtOrAfterTime(*req.StartTime)
	}
	switch {
	case req.LastFor != "":
		return st.store.LastBySubject(req.LastFor)
	case req.NextFor != "":
		return st.store.Next(seq, req.NextFor)
	default:
		return st.store.Get(seq)
	}
}

func (ja *jsAccount) msgGet(name string, data []byte) any {
	r := &msgGetResponse{apiResponse: newResponse("stream_msg_get")}
	var req msgGetRequest
	st, aerr := ja.streamRequest(name, data, &req)
	if aerr == nil {
		// A replicated stream's leader answers (as nats-server's leader
		// does), once a quorum confirmed it still leads and it applied
		// what was committed then (replica_read.go): a follower, or a
		// leader cut off, may lag behind acknowledged writes. DIRECT.GET
		// is answered by any replica, as in nats-server.
		aerr = st.linearRead()
	}
	if aerr != nil {
		r.Error = aerr
		return r
	}
	if req.Batch > 0 || req.MaxBytes > 0 || len(req.MultiLast) > 0 || !req.valid() ||
		req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && req.StartTime == nil {
		r.Error = errBadRequest()
		return r
	}
	m, err := st.find(&req)
	if err != nil {
		r.Error = errNoMessage()
		return r
	}
	r.Message = &storedMsg{Subject: m.Subject, Sequence: m.Seq, Header: m.Header, Data: m.Data, Time: time.Unix(0, m.Timestamp).UTC()}
	return r
}

type msgDeleteRequest struct {
	Seq     uint64 `json:"seq"`
	NoErase bool   `json:"no_erase"`
}

func (ja *jsAccount) msgDelete(name string, data []byte) any {
	r := &successResponse{apiResponse: newResponse("stream_msg_delete")}
	var req msgDeleteRequest
	st, aerr := ja.streamRequest(name, data, &req)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	cfg := st.config()
	switch {
	case cfg.Sealed:
		r.Error = errSealed()
		return r
	case cfg.DenyDelete:
		r.Error = apiErr(500, 10057, "message delete not permitted")
		return r
	}
	if st.repl != nil {
		if r.Error = st.repl.msgDelete(req.Seq); r.Error == nil {
			r.Success = true
		}
		return r
	}
	if err := st.store.Delete(req.Seq); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			r.Error = apiErr(400, 10043, fmt.Sprintf("sequence [%d] not found", req.Seq))
		} else {
			r.Error = apiErr(500, 10057, err.Error())
		}
		return r
	}
	st.changed()
	r.Success = true
	return r
}

// directGet answers DIRECT.GET: the message itself with Nats-Stream,
// Nats-Subject, Nats-Sequence and Nats-Time-Stamp headers, or a status.
// With a subject after the stream name, the last message on it.
func (ja *jsAccount) directGet(name, subj string, data []byte) []apiReply {
	statusReply := func(code int, text string) []apiReply {
		hb := headerBuilder{}
		return []apiReply{{hdr: hb.status(code, text).bytes()}}
	}
	st := ja.lookup(name)
	if st == nil || !st.config().AllowDirect {
		return statusReply(503, "") // no responders, as without a direct subscription
	}
	var req msgGetRequest
	if subj != "" {
		if len(data) > 0 {
			return statusReply(408, "Bad Request")
		}
		req.LastFor = subj
	} else {
		if len(data) == 0 {
			return statusReply(408, "Empty Request")
		}
		if json.Unmarshal(data, &req) != nil { // never strict, as the reference server's
			return statusReply(408, "Malformed Request")
		}
		if req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && req.StartTime == nil {
			return statusReply(408, "Empty Request")
		}
		if !req.valid() || len(req.MultiLast) > 0 {
			return statusReply(408, "Bad Request")
		}
	}
	if req.Batch == 0 {
		m, err := st.find(&req)
		if err != nil {
			return statusReply(404, "Message Not Found")
		}
		return []apiReply{directReply(name, m, req.NoHeaders, nil)}
	}
	return st.directBatch(&req, statusReply)
}

// directBatch answers a batched DIRECT.GET: up to batch messages from seq
// (or start_time) on next_by_subj, up to max_bytes, then a 204 EOB.
func (st *stream) directBatch(req *msgGetRequest, statusReply func(int, string) []apiReply) []apiReply {
	seq := max(req.Seq, 1)
	if req.StartTime != nil {
		seq = st.store.SeqAtOrAfterTime(*req.StartTime)
	}
	filters := []string(nil)
	if req.NextFor != "" {
		filters = []string{req.NextFor}
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 64 << 20
	}
	pending := st.countFrom(seq, filters)
	var out []apiReply
	var last uint64
	sent := 0
	for len(out) < req.Batch {
		m, err := st.nextFrom(seq, filters)
		if err != nil || (req.UpToSeq > 0 && m.Seq > req.UpToSeq) {
			break
		}
		pending = max(pending, 1) - 1
		last, seq = m.Seq, m.Seq+1
		extra := [][2]string{{"Nats-Num-Pending", strconv.FormatUint(pending, 10)}, {"Nats-Last-Sequence", strconv.FormatUint(last, 10)}}
		out = append(out, directReply(st.name, m, req.NoHeaders, extra))
		if sent += len(m.Subject) + len(m.Header) + len(m.Data); sent >= maxBytes {
			break
		}
	}
	if len(out) == 0 {
		return statusReply(404, "Message Not Found")
	}
	hb := headerBuilder{}
	hb.status(204, "EOB").addUint("Nats-Num-Pending", pending).addUint("Nats-Last-Sequence", last)
	return append(out, apiReply{hdr: hb.bytes()})
}

// directReply is one message of a DIRECT.GET answer.
func directReply(stream string, m *store.Msg, noHeaders bool, extra [][2]string) apiReply {
	if noHeaders {
		return apiReply{body: m.Data}
	}
	hb := headerBuilder{b: make([]byte, 0, len(m.Header)+160)}
	if len(m.Header) > 4 {
		hb.b = append(hb.b, m.Header[:len(m.Header)-2]...) // the stored block without its blank line
	} else {
		hb.status(0, "")
	}
	hb.add("Nats-Stream", stream).add("Nats-Subject", m.Subject).addUint("Nats-Sequence", m.Seq)
	hb.add("Nats-Time-Stamp", time.Unix(0, m.Timestamp).UTC().Format(time.RFC3339Nano))
	for _, kv := range extra {
		hb.add(kv[0], kv[1])
	}
	return apiReply{hdr: hb.bytes(), body: m.Data}
}

// checkConsumerLimits refuses new consumer limits that existing consumers
// exceed (a longer inactive_threshold, a larger max_ack_pending), as the
// reference server: only limits that change and are set are checked.
func (st *stream) checkConsumerLimits(old, cur ConsumerLimits) *APIError {
	newIT := cur.InactiveThreshold > 0 && cur.InactiveThreshold != old.InactiveThreshold
	newMAP := cur.MaxAckPending > 0 && cur.MaxAckPending != old.MaxAckPending
	if !newIT && !newMAP {
		return nil
	}
	var bad []string
	for _, name := range st.consumerNames() {
		c := st.consumer(name)
		if c == nil {
			continue
		}
		cfg := c.config()
		if (newIT && cfg.InactiveThreshold > cur.InactiveThreshold) || (newMAP && cfg.MaxAckPending > cur.MaxAckPending) {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return apiErr(500, 10069, "change to limits violates consumers: "+strings.Join(bad, ", "))
}

// checkMirrorDirect refuses mirror_direct at create: Skiff has no
// mirrors, and the reference server refuses it on a stream that is not
// one.
func checkMirrorDirect(cfg StreamConfig) *APIError {
	if cfg.MirrorDirect {
		return errStreamConfig(errors.New("stream has no mirror but does have mirror direct"))
	}
	return nil
}
