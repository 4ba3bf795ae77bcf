package api

import (
	"fmt"

	"github.com/weir-mq/weir/internal/partition"
)

// noLeaderEpoch is what clients send as CurrentLeaderEpoch when they do not want it checked.
const noLeaderEpoch = -1

// checkLeaderEpoch compares the leader epoch a client believes current with the replica's (KIP-320).
func checkLeaderEpoch(r *partition.Replica, current int32) error {
	if current == noLeaderEpoch {
		return nil
	}
	switch epoch := r.LeaderEpoch(); {
	case current < epoch:
		return fmt.Errorf("%w: %d, leader is at %d", errFencedLeaderEpoch, current, epoch)
	case current > epoch:
		return fmt.Errorf("%w: %d, leader is at %d", errUnknownLeaderEpoch, current, epoch)
	}
	return nil
}
