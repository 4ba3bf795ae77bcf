package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Error is the JSON error every endpoint answers with (docs/http.md, "Errors"): Code is stable and is
// what programs test, KafkaError names the Kafka error the node answered where there was one.
type Error struct {
	Status     int    `json:"-"`
	Code       string `json:"code"`
	KafkaError string `json:"kafka_error,omitempty"`
	Message    string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("httpapi: %s: %s", e.Code, e.Message) }

// errorf builds an Error with a formatted message.
func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// kafkaErrorf builds an Error that names the Kafka error a Kafka client would have been answered.
func kafkaErrorf(status int, code, kafkaError, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, KafkaError: kafkaError, Message: fmt.Sprintf(format, args...)}
}

// kafkaCodes maps the Kafka errors the HTTP API names to their status and stable code; any other is
// 500 kafka_error with its name.
var kafkaCodes = map[*kerr.Error]struct {
	status int
	code   string
}{
	kerr.UnknownTopicOrPartition:      {http.StatusNotFound, "topic_not_found"},
	kerr.UnknownTopicID:               {http.StatusNotFound, "topic_not_found"},
	kerr.GroupIDNotFound:              {http.StatusNotFound, "group_not_found"},
	kerr.UnknownMemberID:              {http.StatusNotFound, "member_not_found"},
	kerr.TopicAlreadyExists:           {http.StatusConflict, "topic_exists"},
	kerr.NonEmptyGroup:                {http.StatusConflict, "group_not_empty"},
	kerr.RebalanceInProgress:          {http.StatusConflict, "rebalance_in_progress"},
	kerr.IllegalGeneration:            {http.StatusConflict, "illegal_generation"},
	kerr.FencedInstanceID:             {http.StatusConflict, "illegal_generation"},
	kerr.InconsistentGroupProtocol:    {http.StatusConflict, "inconsistent_group_protocol"},
	kerr.MessageTooLarge:              {http.StatusRequestEntityTooLarge, "record_too_large"},
	kerr.RecordListTooLarge:           {http.StatusRequestEntityTooLarge, "record_too_large"},
	kerr.OffsetOutOfRange:             {http.StatusRequestedRangeNotSatisfiable, "offset_out_of_range"},
	kerr.InvalidConfig:                {http.StatusBadRequest, "invalid_config"},
	kerr.InvalidPartitions:            {http.StatusBadRequest, "invalid_partitions"},
	kerr.InvalidReplicationFactor:     {http.StatusBadRequest, "invalid_replication_factor"},
	kerr.InvalidTopicException:        {http.StatusBadRequest, "invalid_topic"},
	kerr.InvalidRecord:                {http.StatusBadRequest, "invalid_record"},
	kerr.InvalidTimestamp:             {http.StatusBadRequest, "invalid_record"},
	kerr.InvalidSessionTimeout:        {http.StatusBadRequest, "invalid_parameter"},
	kerr.InvalidGroupID:               {http.StatusBadRequest, "invalid_parameter"},
	kerr.OffsetMetadataTooLarge:       {http.StatusBadRequest, "invalid_parameter"},
	kerr.NotEnoughReplicas:            {http.StatusServiceUnavailable, "not_enough_replicas"},
	kerr.NotEnoughReplicasAfterAppend: {http.StatusServiceUnavailable, "not_enough_replicas"},
	kerr.LeaderNotAvailable:           {http.StatusServiceUnavailable, "unavailable"},
	kerr.NotLeaderForPartition:        {http.StatusServiceUnavailable, "unavailable"},
	kerr.CoordinatorNotAvailable:      {http.StatusServiceUnavailable, "unavailable"},
	kerr.NotCoordinator:               {http.StatusServiceUnavailable, "unavailable"},
	kerr.CoordinatorLoadInProgress:    {http.StatusServiceUnavailable, "unavailable"},
	kerr.KafkaStorageError:            {http.StatusServiceUnavailable, "unavailable"},
	kerr.RequestTimedOut:              {http.StatusGatewayTimeout, "timeout"},
}

// fromErr turns what a Kafka client call returned into the API's error: a Kafka error by the table
// above, a context that ended as timeout, and anything else as 500.
func fromErr(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		e := &Error{Status: http.StatusInternalServerError, Code: "kafka_error", KafkaError: ke.Message, Message: ke.Description}
		if m, ok := kafkaCodes[ke]; ok {
			e.Status, e.Code = m.status, m.code
		}
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return errorf(http.StatusGatewayTimeout, "timeout", "%v", err)
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		return errorf(http.StatusServiceUnavailable, "shutting_down", "%v", err)
	}
	return errorf(http.StatusInternalServerError, "internal", "%v", err)
}

// kafkaCode is the error of a Kafka error code in an answer, nil for 0.
func kafkaCode(code int16) error {
	return kerr.ErrorForCode(code)
}

// errorBody is the JSON envelope of an error answer.
type errorBody struct {
	Error *Error `json:"error"`
}

// writeError answers err as its JSON error.
func writeError(w http.ResponseWriter, err error) {
	e := fromErr(err)
	writeJSON(w, e.Status, errorBody{e})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
