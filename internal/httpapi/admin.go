package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
)

// topicSummary is one topic of GET /v1/topics; the byte counts are the answering node's
// (Metadata.TopicBytes), from which the console draws rates.
type topicSummary struct {
	Name              string `json:"name"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
	BytesInTotal      uint64 `json:"bytes_in_total"`
	BytesOutTotal     uint64 `json:"bytes_out_total"`
}

// listTopics serves GET /v1/topics.
func (a *API) listTopics(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	list := a.adm.ListTopics
	if r.URL.Query().Get("internal") == "true" {
		list = a.adm.ListTopicsWithInternal
	}
	details, err := list(ctx)
	if err != nil {
		return fromErr(err)
	}
	out := []topicSummary{}
	for _, t := range details.Sorted() {
		if t.Err != nil || !a.visible(r, acl.ResourceTopic, t.Topic) {
			continue
		}
		in, sent := a.opts.Metadata.TopicBytes(t.Topic)
		out = append(out, topicSummary{Name: t.Topic, Partitions: len(t.Partitions), ReplicationFactor: t.Partitions.NumReplicas(),
			Internal: t.IsInternal, BytesInTotal: in, BytesOutTotal: sent})
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
	return nil
}

// createBody is the body of POST /v1/topics.
type createBody struct {
	Name              string            `json:"name"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

// createTopic serves POST /v1/topics and answers the topic as describeTopic does.
func (a *API) createTopic(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	var in createBody
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Name == "" {
		return errorf(http.StatusBadRequest, "invalid_parameter", "a topic needs a name")
	}
	if in.Partitions == 0 {
		in.Partitions = -1
	}
	if in.ReplicationFactor == 0 {
		in.ReplicationFactor = -1
	}
	configs := map[string]*string{}
	for k, v := range in.Configs {
		configs[k] = &v
	}
	resp, err := a.adm.CreateTopic(ctx, in.Partitions, in.ReplicationFactor, configs, in.Name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e := fromErr(err)
		if resp.ErrMessage != "" {
			e.Message = resp.ErrMessage
		}
		return e
	}
	d, err := a.describe(ctx, in.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, d)
	return nil
}

// topicDescription is the answer of GET /v1/topics/{topic}.
type topicDescription struct {
	Name       string                 `json:"name"`
	ID         string                 `json:"id"`
	Internal   bool                   `json:"internal"`
	Configs    map[string]string      `json:"configs"`
	Partitions []partitionDescription `json:"partitions"`
}

// partitionDescription is one partition of a topicDescription; LogEndOffset and SizeBytes are the
// answering node's replica's, absent where it hosts none.
type partitionDescription struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	LogEndOffset   *int64  `json:"log_end_offset,omitempty"`
	SizeBytes      *int64  `json:"size_bytes,omitempty"`
	Error          *Error  `json:"error,omitempty"`
}

// describeTopic serves GET /v1/topics/{topic}.
func (a *API) describeTopic(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	d, err := a.describe(ctx, r.PathValue("topic"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// describe builds a topic's description: metadata, start and end offsets, configs that are not
// defaults, and the local replica's log end and size.
func (a *API) describe(ctx context.Context, topic string) (*topicDescription, error) {
	details, err := a.adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return nil, fromErr(err)
	}
	t, ok := details[topic]
	if !ok {
		return nil, kafkaErrorf(http.StatusNotFound, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION", "topic %q does not exist", topic)
	}
	if t.Err != nil {
		return nil, fromErr(t.Err)
	}
	starts, err := a.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fromErr(err)
	}
	ends, err := a.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fromErr(err)
	}
	rcs, err := a.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fromErr(err)
	}
	d := &topicDescription{Name: topic, ID: t.ID.String(), Internal: t.IsInternal, Configs: map[string]string{}}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDefaultConfig && c.Source != kmsg.ConfigSourceStaticBrokerConfig && c.Value != nil {
				d.Configs[c.Key] = *c.Value
			}
		}
	}
	for _, p := range t.Partitions.Sorted() {
		pd := partitionDescription{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR)}
		if p.Err != nil {
			pd.Error = fromErr(p.Err)
		}
		if o, ok := starts.Lookup(topic, p.Partition); ok && o.Err == nil {
			pd.LogStartOffset = o.Offset
		}
		if o, ok := ends.Lookup(topic, p.Partition); ok && o.Err == nil {
			pd.HighWatermark = o.Offset
		}
		if l, ok := a.opts.Metadata.Local(topic, p.Partition); ok {
			pd.LogEndOffset, pd.SizeBytes = &l.LogEndOffset, &l.SizeBytes
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d, nil
}

// nonNil is s, or an empty slice for nil, so that JSON shows [] rather than null.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// configEntry is one config of GET /v1/topics/{topic}/configs.
type configEntry struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
	ReadOnly  bool    `json:"read_only"`
}

// topicConfigs serves GET /v1/topics/{topic}/configs.
func (a *API) topicConfigs(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	return a.writeConfigs(ctx, w, r.PathValue("topic"))
}

// writeConfigs answers every config of topic.
func (a *API) writeConfigs(ctx context.Context, w http.ResponseWriter, topic string) error {
	rcs, err := a.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fromErr(err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fromErr(err)
	}
	out := []configEntry{}
	for _, c := range rc.Configs {
		out = append(out, configEntry{Name: c.Key, Value: c.Value, Source: strings.ToLower(c.Source.String()),
			Sensitive: c.Sensitive, ReadOnly: c.Source == kmsg.ConfigSourceStaticBrokerConfig})
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, map[string]any{"configs": out})
	return nil
}

// alterBody is the body of PATCH /v1/topics/{topic}/configs.
type alterBody struct {
	Set    map[string]string `json:"set"`
	Delete []string          `json:"delete"`
}

// alterTopicConfigs serves PATCH /v1/topics/{topic}/configs (an incremental alter) and answers the
// configs after it.
func (a *API) alterTopicConfigs(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	topic := r.PathValue("topic")
	var in alterBody
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	for k, v := range in.Set {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	for _, k := range in.Delete {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return errorf(http.StatusBadRequest, "invalid_parameter", "nothing to alter: give set or delete")
	}
	resps, err := a.adm.AlterTopicConfigs(ctx, alters, topic)
	if err != nil {
		return fromErr(err)
	}
	resp, err := resps.On(topic, nil)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e := fromErr(err)
		if resp.ErrMessage != "" {
			e.Message = resp.ErrMessage
		}
		return e
	}
	return a.writeConfigs(ctx, w, topic)
}

// deleteTopic serves DELETE /v1/topics/{topic}.
func (a *API) deleteTopic(w http.ResponseWriter, r *http.Request) error {
	return a.deleteNamed(w, r, "topic", func(ctx context.Context, name string) error {
		resp, err := a.adm.DeleteTopic(ctx, name)
		if err == nil {
			err = resp.Err
		}
		return err
	})
}

// deleteNamed deletes the resource the path names in its wildcard key with del, answering 204 No
// Content when it is gone.
func (a *API) deleteNamed(w http.ResponseWriter, r *http.Request, key string, del func(ctx context.Context, name string) error) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	if err := del(ctx, r.PathValue(key)); err != nil {
		return fromErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listGroups serves GET /v1/groups.
func (a *API) listGroups(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	groups, err := a.adm.ListGroups(ctx)
	if err != nil {
		return fromErr(err)
	}
	type listed struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
	}
	out := []listed{}
	for _, g := range groups.Sorted() {
		if !a.visible(r, acl.ResourceGroup, g.Group) {
			continue
		}
		out = append(out, listed{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType})
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
	return nil
}

// groupMember is one member of a group's description.
type groupMember struct {
	MemberID   string            `json:"member_id"`
	InstanceID *string           `json:"instance_id,omitempty"`
	ClientID   string            `json:"client_id"`
	ClientHost string            `json:"client_host"`
	Assignment []topicPartitions `json:"assignment"`
}

// groupOffset is one partition of a group's description.
type groupOffset struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     *int64 `json:"committed"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	MemberID      string `json:"member_id,omitempty"`
}

// describeGroup serves GET /v1/groups/{group}.
func (a *API) describeGroup(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	group := r.PathValue("group")
	lags, err := a.adm.Lag(ctx, group)
	if err != nil {
		return fromErr(err)
	}
	l, ok := lags[group]
	if !ok {
		return kafkaErrorf(http.StatusNotFound, "group_not_found", "GROUP_ID_NOT_FOUND", "group %q does not exist", group)
	}
	// An unknown group is Dead, and from DescribeGroups v6 GROUP_ID_NOT_FOUND too.
	lerr := l.Error()
	if lerr != nil && !errors.Is(lerr, kerr.GroupIDNotFound) {
		return fromErr(lerr)
	}
	if lerr != nil || l.State == "Dead" {
		return kafkaErrorf(http.StatusNotFound, "group_not_found", "GROUP_ID_NOT_FOUND", "group %q does not exist", group)
	}
	members := []groupMember{}
	for _, m := range l.Members {
		gm := groupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assignment: []topicPartitions{}}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				gm.Assignment = append(gm.Assignment, topicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		members = append(members, gm)
	}
	offsets := []groupOffset{}
	for _, ml := range l.Lag.Sorted() {
		o := groupOffset{Topic: ml.Topic, Partition: ml.Partition, HighWatermark: ml.End.Offset, Lag: ml.Lag}
		if ml.Commit.At >= 0 {
			o.Committed = &ml.Commit.At
		}
		if ml.Member != nil {
			o.MemberID = ml.Member.MemberID
		}
		offsets = append(offsets, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"group": group, "state": l.State, "protocol_type": l.ProtocolType, "protocol": l.Protocol,
		"coordinator": l.Coordinator.NodeID, "members": members, "offsets": offsets, "total_lag": l.Lag.Total(),
	})
	return nil
}

// deleteGroup serves DELETE /v1/groups/{group}.
func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	return a.deleteNamed(w, r, "group", func(ctx context.Context, name string) error {
		resp, err := a.adm.DeleteGroup(ctx, name)
		if err == nil {
			err = resp.Err
		}
		return err
	})
}

// resetBody is the body of POST /v1/groups/{group}/reset-offsets.
type resetBody struct {
	Topic      string  `json:"topic"`
	To         string  `json:"to"`
	Offset     int64   `json:"offset"`
	Timestamp  int64   `json:"timestamp"`
	Partitions []int32 `json:"partitions"`
	DryRun     bool    `json:"dry_run"`
}

// resetOffsets serves POST /v1/groups/{group}/reset-offsets: it sets the group's committed offsets of
// a topic to its earliest, its latest, an offset or the first record at a timestamp; the group must
// have no members.
func (a *API) resetOffsets(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	group := r.PathValue("group")
	var in resetBody
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.Topic == "" {
		return errorf(http.StatusBadRequest, "invalid_parameter", "name the topic whose offsets to reset")
	}
	var listed kadm.ListedOffsets
	switch in.To {
	case "earliest":
		listed, err = a.adm.ListStartOffsets(ctx, in.Topic)
	case "latest":
		listed, err = a.adm.ListEndOffsets(ctx, in.Topic)
	case "timestamp":
		listed, err = a.adm.ListOffsetsAfterMilli(ctx, in.Timestamp, in.Topic)
	case "offset":
		if in.Offset < 0 {
			return errorf(http.StatusBadRequest, "invalid_parameter", "offset %d is negative", in.Offset)
		}
		listed, err = a.adm.ListEndOffsets(ctx, in.Topic)
	default:
		return errorf(http.StatusBadRequest, "invalid_parameter", "to %q: want earliest, latest, offset or timestamp", in.To)
	}
	if err != nil {
		return fromErr(err)
	}
	if err := listed.Error(); err != nil {
		return fromErr(err)
	}
	if _, ok := listed[in.Topic]; !ok {
		return kafkaErrorf(http.StatusNotFound, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION", "topic %q does not exist", in.Topic)
	}
	offsets := kadm.Offsets{}
	out := []offsetIn{}
	for _, lo := range listed[in.Topic] {
		if len(in.Partitions) > 0 && !slices.Contains(in.Partitions, lo.Partition) {
			continue
		}
		at := lo.Offset
		if in.To == "offset" {
			at = min(in.Offset, lo.Offset)
		}
		offsets.Add(kadm.Offset{Topic: in.Topic, Partition: lo.Partition, At: at, LeaderEpoch: -1})
		out = append(out, offsetIn{Topic: in.Topic, Partition: lo.Partition, Offset: at})
	}
	slices.SortFunc(out, func(a, b offsetIn) int { return int(a.Partition - b.Partition) })
	described, err := a.adm.DescribeGroups(ctx, group)
	if err != nil {
		return fromErr(err)
	}
	if d, ok := described[group]; ok && len(d.Members) > 0 {
		return kafkaErrorf(http.StatusConflict, "group_not_empty", "NON_EMPTY_GROUP",
			"group %q has %d members: stop them (or DELETE their HTTP members) before resetting its offsets", group, len(d.Members))
	}
	if !in.DryRun {
		resps, err := a.adm.CommitOffsets(ctx, group, offsets)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return fromErr(err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"offsets": out, "dry_run": in.DryRun})
	return nil
}

// broker is one broker of GET /v1/cluster.
type broker struct {
	NodeID int32   `json:"node_id"`
	Host   string  `json:"host"`
	Port   int32   `json:"port"`
	Rack   *string `json:"rack,omitempty"`
}

// underReplicated is a partition whose ISR is smaller than its replicas.
type underReplicated struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
}

// cluster serves GET /v1/cluster.
func (a *API) cluster(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	md, err := a.adm.Metadata(ctx)
	if err != nil {
		return fromErr(err)
	}
	brokers := []broker{}
	for _, b := range md.Brokers {
		brokers = append(brokers, broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	under := []underReplicated{}
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			if len(p.ISR) < len(p.Replicas) {
				under = append(under, underReplicated{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader,
					Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR)})
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"cluster_id": md.Cluster, "controller": md.Controller, "brokers": brokers, "under_replicated": under,
	})
	return nil
}
