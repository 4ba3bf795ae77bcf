package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/txn"
)

// versionRange is the contiguous range of versions weir serves for one API key.
type versionRange struct {
	min, max int16
}

// versions is what weir serves: at least Kafka 2.8's maxima, and down to the fixed old versions
// kafka-python 2.0.2 sends (Metadata v0/v1, Fetch v4, ListOffsets v1). The versions of TV2 (KIP-890
// part 2: Produce v12, EndTxn v5, TxnOffsetCommit v5) are served and advertised only on a broker that
// finalizes transaction.version 2 (tv1Max); brokerOnlyFrom hides the brokers' versions from clients.
// Never advertise a version that is not fully served.
var versions = map[int16]versionRange{
	0:  {3, 12}, // Produce: v3 is the first magic-2-only version; v11 knows TRANSACTION_ABORTABLE, v12 is TV2's.
	1:  {4, 12}, // Fetch: v13+ needs topic ids in fetch.
	2:  {1, 6},  // ListOffsets: v7 adds max-timestamp (-3).
	3:  {0, 12}, // Metadata: v12 looks topics up by id (librdkafka's KIP-848 consumer needs it); v13 adds a top-level error.
	8:  {0, 9},  // OffsetCommit: v9 carries KIP-848 member epochs, v10 topic ids.
	9:  {0, 9},  // OffsetFetch: v8 batches groups, v9 names a KIP-848 member, v10 has topic ids.
	10: {0, 6},  // FindCoordinator: v4 batches keys; v6 adds share-partition keys (type 2).
	11: {0, 7},  // JoinGroup: v8 adds a reason, v9 SkipAssignment.
	12: {0, 4},  // Heartbeat.
	13: {0, 4},  // LeaveGroup: v5 adds a reason.
	14: {0, 5},  // SyncGroup.
	15: {0, 6},  // DescribeGroups: v6 answers an unknown group GROUP_ID_NOT_FOUND, with a message.
	16: {0, 5},  // ListGroups: v4 filters by state, v5 by type (classic, consumer, share).
	17: {0, 1},  // SaslHandshake: after v0 the tokens travel as bare frames (kafka-python 2.0).
	18: {0, 4},  // ApiVersions: v4 tells that the client reads a supported feature whose range starts at 0.
	19: {0, 7},  // CreateTopics.
	20: {0, 6},  // DeleteTopics.
	21: {0, 2},  // DeleteRecords.
	22: {0, 4},  // InitProducerId: v5 carries KIP-890 semantics.
	23: {0, 4},  // OffsetForLeaderEpoch.
	24: {0, 5},  // AddPartitionsToTxn: v4+ batch transactions for the leaders' KIP-890 verification.
	25: {0, 3},  // AddOffsetsToTxn: v4 is TV2's.
	26: {0, 5},  // EndTxn: v4 adds TRANSACTION_ABORTABLE, v5 is TV2's epoch bump.
	27: {0, 2},  // WriteTxnMarkers: v2 carries the transaction version (KIP-1228).
	28: {0, 5},  // TxnOffsetCommit: v4 adds TRANSACTION_ABORTABLE, v5 the implicit AddOffsetsToTxn (TV2); v6 has topic ids.
	29: {0, 3},  // DescribeAcls.
	30: {0, 3},  // CreateAcls.
	31: {0, 3},  // DeleteAcls.
	32: {0, 4},  // DescribeConfigs.
	33: {0, 2},  // AlterConfigs.
	35: {0, 4},  // DescribeLogDirs: v5 tells whether a directory is cordoned.
	36: {0, 2},  // SaslAuthenticate: v1 adds SessionLifetimeMs (KIP-368).
	37: {0, 3},  // CreatePartitions.
	43: {0, 2},  // ElectLeaders.
	42: {0, 2},  // DeleteGroups.
	44: {0, 1},  // IncrementalAlterConfigs.
	45: {0, 1},  // AlterPartitionReassignments.
	46: {0, 0},  // ListPartitionReassignments.
	47: {0, 0},  // OffsetDelete.
	48: {0, 1},  // DescribeClientQuotas.
	49: {0, 1},  // AlterClientQuotas.
	50: {0, 0},  // DescribeUserScramCredentials.
	51: {0, 0},  // AlterUserScramCredentials.
	55: {0, 2},  // DescribeQuorum.
	60: {0, 1},  // DescribeCluster.
	61: {0, 0},  // DescribeProducers.
	65: {0, 0},  // DescribeTransactions.
	66: {0, 1},  // ListTransactions: v2 filters by id pattern.
	68: {0, 1},  // ConsumerGroupHeartbeat: v1 has client-made member ids and regular expressions.
	69: {0, 1},  // ConsumerGroupDescribe: v1 adds the member type.
	76: {1, 1},  // ShareGroupHeartbeat: v0 was Kafka 4.0's early access, removed.
	77: {1, 1},  // ShareGroupDescribe.
	78: {1, 2},  // ShareFetch: v1 for librdkafka, v2 (acquire mode, RENEW) for franz-go and Java.
	79: {1, 2},  // ShareAcknowledge.
	84: {0, 0},  // ReadShareGroupState: brokers to a share-state coordinator.
	85: {0, 0},  // WriteShareGroupState: v1 adds DeliveryCompleteCount, which weir does not keep.
	90: {0, 1},  // DescribeShareGroupOffsets: v1 adds the lag (KIP-1226).
	91: {0, 0},  // AlterShareGroupOffsets.
	92: {0, 0},  // DeleteShareGroupOffsets.
	80: {0, 1},  // AddRaftVoter.
	81: {0, 0},  // RemoveRaftVoter.
}

// brokerOnlyFrom holds the keys whose later versions only brokers send, and the first such version:
// ApiVersions tells clients the versions below it, so that none sends the brokers' form (franz-go
// would send AddPartitionsToTxn's batched v4+ when told of it). Kafka authorizes those versions with
// CLUSTER_ACTION instead.
var brokerOnlyFrom = map[int16]int16{
	24: 4, // AddPartitionsToTxn: v4+ are the partition leaders' (KIP-890).
}

// apiVersionsKey is ApiVersions' own key, whose unsupported versions get a v0 error reply (KIP-511).
const apiVersionsKey = 18

// tv1Max holds the keys whose last versions are TV2's, and their last version under TV1: a broker that
// does not finalize transaction.version 2 neither serves nor advertises more.
var tv1Max = map[int16]int16{
	0:  11, // Produce v12 adds the partition to the transaction.
	26: 4,  // EndTxn v5 bumps the epoch.
	28: 4,  // TxnOffsetCommit v5 adds the group to the transaction.
}

// supported reports whether weir serves key at version under transaction version tv.
func supported(key, version, tv int16) bool {
	r, ok := versions[key]
	if m, capped := tv1Max[key]; capped && tv < txn.TV2 {
		r.max = m
	}
	return ok && version >= r.min && version <= r.max
}

// advertisedKeys lists the version table in key order under transaction version tv, as ApiVersions
// returns it.
func advertisedKeys(tv int16) []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(versions))
	for k := int16(0); k <= maxKey; k++ {
		r, ok := versions[k]
		if !ok {
			continue
		}
		e := kmsg.NewApiVersionsResponseApiKey()
		e.ApiKey, e.MinVersion, e.MaxVersion = k, r.min, r.max
		if m, ok := brokerOnlyFrom[k]; ok {
			e.MaxVersion = m - 1
		}
		if m, ok := tv1Max[k]; ok && tv < txn.TV2 {
			e.MaxVersion = m
		}
		keys = append(keys, e)
	}
	return keys
}

// maxKey bounds the key walk in advertisedKeys.
const maxKey = 100
