// Per-partition state: what the source knows of each partition, in one
// struct kept under the source's lock.

package kafka

import "time"

// partState is what the source knows of one partition. It is made the
// first time the partition is seen (listed as a target or assigned) and
// kept for the run; the fields of an assignment are reset when the
// partition is released (revoked or lost).
type partState struct {
	// Of the run.

	// committed is the offset this member last committed for the group,
	// -1 before any (or since a claim set resume); commitAt is when.
	committed int64
	commitAt  time.Time
	// bounded is set with UntilCaughtUp once the end offsets are listed:
	// target is the partition's end offset at start, start where reading
	// it begins.
	bounded       bool
	target, start int64
	// groupDone: the group committed the partition up to its target,
	// whichever member landed it.
	groupDone bool

	// Of the assignment.

	// deliv is the partition's queue and deliverer while it is assigned
	// to this member, nil otherwise.
	deliv *partition
	// claimed is set once the partition's state in the lake was read:
	// only then is it known where it starts. resume is the offset it
	// resumes from (at least that much is committed), -1 when the lake
	// had none.
	claimed bool
	resume  int64
	// unclaimed is why the partition's state could not be claimed: it is
	// paused, and claimed again every CommitInterval, while the others
	// land on.
	unclaimed error
	// failedClaims counts the claims of it that failed since it was last
	// claimed: the assignment's (whose retries share one bound with the
	// assignment's other partitions, so a partition after a slow one may
	// get no time at all) and each of reclaim's.
	failedClaims int
}

// state returns partition k's state, made on first use; s.mu is held.
func (s *Source) state(k tp) *partState {
	st := s.parts[k]
	if st == nil {
		st = &partState{committed: -1, resume: -1}
		s.parts[k] = st
	}
	return st
}

// release forgets the fields of the partition's assignment; s.mu is held.
func (st *partState) release() {
	st.deliv = nil
	st.claimed = false
	st.resume = -1
	st.unclaimed = nil
}

// assigned returns the partitions assigned to this member; s.mu is held.
func (s *Source) assignedParts() []tp {
	var out []tp
	for k, st := range s.parts {
		if st.deliv != nil {
			out = append(out, k)
		}
	}
	return out
}
