package group

import (
	"bytes"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sameSubscription reports whether a restarted static member subscribes as before, so that its
// restart needs no rebalance. For consumers it compares the subscribed topics only: the rest of the
// metadata (the generation and owned partitions of KIP-792 and KIP-429, a sticky assignor's user
// data) naturally differs after a restart. Other metadata is compared byte for byte.
func sameSubscription(protocolType string, before, after []byte) bool {
	if protocolType == consumerProtocolType {
		var a, b kmsg.ConsumerMemberMetadata
		if a.ReadFrom(before) == nil && b.ReadFrom(after) == nil {
			ta, tb := slices.Clone(a.Topics), slices.Clone(b.Topics)
			slices.Sort(ta)
			slices.Sort(tb)
			return slices.Equal(slices.Compact(ta), slices.Compact(tb))
		}
	}
	return bytes.Equal(before, after)
}
