package controller

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// commandFormat is the version of the command encoding written into Raft log entries.
const commandFormat = 1

// maxCommandBytes bounds one encoded command, wherever it comes from.
const maxCommandBytes = 8 << 20

type commandEnvelope struct {
	Format int             `json:"f"`
	Type   string          `json:"t"`
	Body   json.RawMessage `json:"c"`
}

// commandName returns the type tag of cmd in the log encoding.
func commandName(cmd Command) (string, error) {
	switch cmd.(type) {
	case CreateTopic:
		return "create_topic", nil
	case DeleteTopic:
		return "delete_topic", nil
	case CreatePartitions:
		return "create_partitions", nil
	case AlterTopicConfigs:
		return "alter_topic_configs", nil
	case AlterBrokerConfigs:
		return "alter_broker_configs", nil
	case AlterPerBrokerConfigs:
		return "alter_per_broker_configs", nil
	case AlterGroupConfigs:
		return "alter_group_configs", nil
	case AllocateProducerIDs:
		return "allocate_producer_ids", nil
	case RegisterBroker:
		return "register_broker", nil
	case BecomeController:
		return "become_controller", nil
	case FenceBroker:
		return "fence_broker", nil
	case UnfenceBroker:
		return "unfence_broker", nil
	case AlterPartition:
		return "alter_partition", nil
	case ElectPreferredLeaders:
		return "elect_preferred_leaders", nil
	case AlterScramCredentials:
		return "alter_scram_credentials", nil
	case CreateAcls:
		return "create_acls", nil
	case DeleteAcls:
		return "delete_acls", nil
	case ReassignPartition:
		return "reassign_partition", nil
	case ElectLeader:
		return "elect_leader", nil
	case AlterClientQuotas:
		return "alter_client_quotas", nil
	default:
		return "", fmt.Errorf("%w: %T", ErrInvalidCommand, cmd)
	}
}

// EncodeCommand encodes cmd as a Raft log entry: JSON with a format number and a type tag.
func EncodeCommand(cmd Command) ([]byte, error) {
	name, err := commandName(cmd)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", ErrInvalidCommand, name, err)
	}
	return json.Marshal(commandEnvelope{Format: commandFormat, Type: name, Body: body})
}

// DecodeCommand decodes what EncodeCommand wrote. Any other input, including bytes from a newer
// format, returns ErrInvalidCommand; it never panics.
func DecodeCommand(data []byte) (Command, error) {
	if len(data) > maxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidCommand, len(data))
	}
	var env commandEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCommand, err)
	}
	if env.Format != commandFormat {
		return nil, fmt.Errorf("%w: format %d", ErrInvalidCommand, env.Format)
	}
	var cmd Command
	var err error
	switch env.Type {
	case "create_topic":
		cmd, err = decodeAs[CreateTopic](env.Body)
	case "delete_topic":
		cmd, err = decodeAs[DeleteTopic](env.Body)
	case "create_partitions":
		cmd, err = decodeAs[CreatePartitions](env.Body)
	case "alter_topic_configs":
		cmd, err = decodeAs[AlterTopicConfigs](env.Body)
	case "alter_broker_configs":
		cmd, err = decodeAs[AlterBrokerConfigs](env.Body)
	case "alter_per_broker_configs":
		cmd, err = decodeAs[AlterPerBrokerConfigs](env.Body)
	case "alter_group_configs":
		cmd, err = decodeAs[AlterGroupConfigs](env.Body)
	case "allocate_producer_ids":
		cmd, err = decodeAs[AllocateProducerIDs](env.Body)
	case "register_broker":
		cmd, err = decodeAs[RegisterBroker](env.Body)
	case "become_controller":
		cmd, err = decodeAs[BecomeController](env.Body)
	case "fence_broker":
		cmd, err = decodeAs[FenceBroker](env.Body)
	case "unfence_broker":
		cmd, err = decodeAs[UnfenceBroker](env.Body)
	case "alter_partition":
		cmd, err = decodeAs[AlterPartition](env.Body)
	case "elect_preferred_leaders":
		cmd, err = decodeAs[ElectPreferredLeaders](env.Body)
	case "alter_scram_credentials":
		cmd, err = decodeAs[AlterScramCredentials](env.Body)
	case "create_acls":
		cmd, err = decodeAs[CreateAcls](env.Body)
	case "delete_acls":
		cmd, err = decodeAs[DeleteAcls](env.Body)
	case "reassign_partition":
		cmd, err = decodeAs[ReassignPartition](env.Body)
	case "elect_leader":
		cmd, err = decodeAs[ElectLeader](env.Body)
	case "alter_client_quotas":
		cmd, err = decodeAs[AlterClientQuotas](env.Body)
	default:
		return nil, fmt.Errorf("%w: type %q", ErrInvalidCommand, env.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCommand, env.Type, err)
	}
	return cmd, nil
}

func decodeAs[T Command](body json.RawMessage) (Command, error) {
	var c T
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// encodeImage writes img in the versioned, checksummed form of the metadata file and of Raft
// snapshots.
func encodeImage(img *Image) ([]byte, error) {
	body, err := json.Marshal(img)
	if err != nil {
		return nil, fmt.Errorf("controller: encode image: %w", err)
	}
	data, err := json.Marshal(metadataEnvelope{Format: metadataFormat, CRC32C: crc32.Checksum(body, castagnoli), Image: body})
	if err != nil {
		return nil, fmt.Errorf("controller: encode image: %w", err)
	}
	return data, nil
}

// maxFrameBytes bounds one controller RPC message.
const maxFrameBytes = 16 << 20

// writeFrame writes v as one RPC frame: a 4-byte big-endian length, then JSON.
func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: encode: %w", ErrRPC, err)
	}
	if len(body) > maxFrameBytes {
		return fmt.Errorf("%w: frame of %d bytes", ErrRPC, len(body))
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("%w: %w", ErrRPC, err)
	}
	return nil
}

// readFrame reads one frame into v. Oversized frames and malformed JSON return ErrRPC.
func readFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRPC, err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrameBytes {
		return fmt.Errorf("%w: frame of %d bytes", ErrRPC, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return fmt.Errorf("%w: %w", ErrRPC, err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: decode: %w", ErrRPC, err)
	}
	return nil
}

// wireErrors names the sentinels an RPC reply can carry, so the caller gets back an error that
// errors.Is the same sentinel.
var wireErrors = []struct {
	code string
	err  error
}{
	{"topic_exists", ErrTopicExists},
	{"unknown_topic", ErrUnknownTopic},
	{"invalid_topic_name", ErrInvalidTopicName},
	{"invalid_partitions", ErrInvalidPartitions},
	{"invalid_replication", ErrInvalidReplication},
	{"invalid_config", ErrInvalidConfig},
	{"internal_topic", ErrInternalTopic},
	{"invalid_command", ErrInvalidCommand},
	{"producer_ids_exhausted", ErrProducerIDsExhausted},
	{"unknown_partition", ErrUnknownPartition},
	{"unknown_broker", ErrUnknownBroker},
	{"stale_epoch", ErrStaleEpoch},
	{"not_controller", ErrNotController},
	{"stale_broker", ErrStaleBroker},
	{"timeout", ErrTimeout},
	{"closed", ErrClosed},
	{"failed", ErrFailed},
	{"invalid_replica_assignment", ErrInvalidReplicaAssignment},
	{"no_reassignment", ErrNoReassignment},
	{"election_not_needed", ErrElectionNotNeeded},
	{"preferred_leader_not_available", ErrPreferredLeaderNotAvailable},
	{"eligible_leaders_not_available", ErrEligibleLeadersNotAvailable},
	{"duplicate_voter", ErrDuplicateVoter},
	{"voter_not_found", ErrVoterNotFound},
	{"quorum_loss", ErrQuorumLoss},
	{"voter_not_caught_up", ErrVoterNotCaughtUp},
}

// wireError is an error as an RPC reply carries it.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func toWireError(err error) *wireError {
	if err == nil {
		return nil
	}
	for _, we := range wireErrors {
		if errors.Is(err, we.err) {
			return &wireError{Code: we.code, Message: err.Error()}
		}
	}
	return &wireError{Code: "rpc", Message: err.Error()}
}

// remoteError is an error returned by another node: its text is the remote one, and it unwraps to
// the sentinel its code names (ErrRPC for codes this node does not know).
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func (we *wireError) err() error {
	if we == nil {
		return nil
	}
	for _, w := range wireErrors {
		if w.code == we.Code {
			return &remoteError{msg: we.Message, sentinel: w.err}
		}
	}
	return &remoteError{msg: we.Message, sentinel: ErrRPC}
}
