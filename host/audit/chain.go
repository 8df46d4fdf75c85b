package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/fedhost/fedhost/host/store"
)

// encodingVersion starts the canonical encoding, so a later format cannot be
// mistaken for this one.
const encodingVersion = "fedhost-audit-v1"

// timeLayout has a fixed number of digits: both databases keep microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// Hash returns the hash of e: hex(sha256(e.PrevHash || canonical(e))). The
// canonical encoding is every field but the hashes, in a fixed order, each as
// <length>:<bytes>, so no two different events encode alike.
func Hash(e store.AuditEvent) string {
	var b []byte
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	field(encodingVersion)
	field(strconv.FormatInt(e.Seq, 10))
	field(e.Time.UTC().Format(timeLayout))
	field(e.Actor)
	field(e.Issuer)
	field(e.Action)
	field(e.DeploymentID)
	field(e.BuildID)
	field(e.Subject)
	field(e.RequestID)
	field(e.Result)
	field(e.Reason)
	field(strconv.Itoa(e.Count))
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Report is what Verify found in an intact chain.
type Report struct {
	// Events is how many events were verified.
	Events int64
	// CheckpointSeq is the last pruned sequence (0 if nothing was pruned);
	// verification started after it. LastSeq is the last sequence verified.
	CheckpointSeq, LastSeq int64
}

// ChainError is a broken chain: the first sequence that does not verify.
type ChainError struct {
	Seq     int64
	Problem string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit chain broken at sequence %d: %s", e.Seq, e.Problem)
}

// verifyBatch is how many events Verify reads at once.
const verifyBatch = 1000

// Verify walks the chain from the checkpoint to the head it sees when it
// starts and returns a *ChainError for the first event that is missing, does
// not link to the event before, or does not match its hash.
func (l *Log) Verify(ctx context.Context) (Report, error) {
	chain, err := l.st.AuditChainState(ctx)
	if err != nil {
		return Report{}, err
	}
	r := Report{CheckpointSeq: chain.PrunedSeq, LastSeq: chain.PrunedSeq}
	prev := chain.PrunedHash
	for r.LastSeq < chain.LastSeq {
		events, err := l.st.AuditEvents(ctx, r.LastSeq, verifyBatch)
		if err != nil {
			return Report{}, err
		}
		if len(events) == 0 {
			break
		}
		for _, e := range events {
			if r.LastSeq == chain.LastSeq {
				break // the rest was appended after Verify started
			}
			want := r.LastSeq + 1
			switch {
			case e.Seq != want:
				return Report{}, &ChainError{Seq: want, Problem: fmt.Sprintf("the event is missing (removed): the chain goes from sequence %d to %d", r.LastSeq, e.Seq)}
			case e.PrevHash != prev:
				return Report{}, &ChainError{Seq: e.Seq, Problem: fmt.Sprintf("its prev_hash is not the hash of sequence %d: that event was replaced, or this link was changed", r.LastSeq)}
			case Hash(e) != e.Hash:
				return Report{}, &ChainError{Seq: e.Seq, Problem: "its fields do not match its hash: the event was changed after it was recorded"}
			}
			prev, r.LastSeq = e.Hash, e.Seq
			r.Events++
		}
	}
	if r.LastSeq < chain.LastSeq {
		return Report{}, &ChainError{Seq: r.LastSeq + 1, Problem: fmt.Sprintf("the events up to sequence %d, the head of the chain, are missing (removed)", chain.LastSeq)}
	}
	if r.LastSeq > chain.PrunedSeq && prev != chain.LastHash {
		return Report{}, &ChainError{Seq: r.LastSeq, Problem: "its hash is not the head of the chain: the head or the last event was changed"}
	}
	return r, nil
}
