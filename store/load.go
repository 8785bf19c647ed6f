package store

// load builds the in-memory index from the recovered segments: every
// record at or above the floor and not in a .del file is live; removed
// records and sequences missing between segments (lost to corruption, or
// in a removed segment) become dead entries between the first live message
// and the last sequence.
func (s *Stream) load(fb *fileBackend, rec *recovered) {
	floor := max(rec.floor, 1)
	started := false
	var lastSeq uint64
	var lastTS int64
	// With staging, the records after CommitThrough are staged (stage.go),
	// and the deletes after it are left to the log's replay.
	staging, through := rec.staging, max(s.mu.opts.CommitThrough, rec.marked)
	for _, seg := range fb.segs {
		for i := range seg.ents.len() {
			ie := seg.ents.at(i)
			seq := seg.first + uint64(i)
			if staging && seq > through && seq >= floor {
				fb.stg.push(stagedRec{seq: seq, ts: ie.ts, subj: ie.subj, seg: seg, off: ie.off, size: ie.size})
				seg.staged++
				continue
			}
			lastSeq, lastTS = seq, ie.ts
			_, deleted := rec.dels[seq]
			if seq < floor || deleted {
				if started {
					s.padLocked(seq, ie.ts)
					s.mu.ents.append(entry{ts: ie.ts})
				}
				continue
			}
			if !started {
				started, s.mu.first = true, seq
			}
			s.padLocked(seq, ie.ts)
			ss := s.mu.subjects[ie.subj]
			if ss == nil {
				ss = &subjectState{name: ie.subj}
				s.mu.subjects[ie.subj] = ss
			}
			s.mu.ents.append(entry{subj: ss, ts: ie.ts, size: ie.size, off: ie.off})
			ss.seqs = append(ss.seqs, seq)
			ss.n++
			s.mu.msgs++
			s.mu.bytes += uint64(ie.size)
			seg.live++
		}
		seg.last -= uint64(seg.staged) // the last committed
		if seg.indexed {
			seg.ents.reset() // sealed and on disk; the stream's entries hold what reads need
		}
	}
	// A delete or a floor can outlive the records it covers (an operating
	// system crash can keep the small fsynced sidecar and lose the log's
	// tail): the last sequence never goes below them, so none is reused.
	high := rec.high
	for q := range rec.dels {
		if !staging || q <= through {
			lastSeq = max(lastSeq, q)
		}
	}
	if staging {
		// The sequences up to the checkpoint are committed, whatever the
		// files hold: segments whose messages were all removed go
		// (droppable), the one with the last of them too.
		high = through
	}
	s.mu.last, s.mu.lastTS = max(lastSeq, floor-1, high), lastTS
	if !started {
		s.mu.first = s.mu.last + 1
	} else {
		s.padLocked(s.mu.last+1, lastTS) // ents covers first..last
	}
	fb.setFloor(s.mu.first)
	if fb.staging && !staging {
		// Marked just now: every record is committed, and a replay skips
		// them (AppendAt of a stored sequence).
		fb.released = s.mu.last
	}
	fb.settleStaged(s.mu.last, &s.report)
	for _, seg := range append([]*segment(nil), fb.segs...) {
		if fb.droppable(seg) && seg != fb.segs[len(fb.segs)-1] {
			fb.dropSegment(seg)
		}
	}
}

// padLocked appends dead entries for the sequences missing before seq.
func (s *Stream) padLocked(seq uint64, ts int64) {
	for s.mu.first+uint64(s.mu.ents.len()) < seq {
		s.mu.ents.append(entry{ts: ts})
	}
}
