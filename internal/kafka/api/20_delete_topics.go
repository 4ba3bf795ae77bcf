package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteTopics answers DeleteTopics (key 20): by name (v0–v5) or by name or id (v6+). The topic's
// local logs are deleted before the response is sent.
func (b *Broker) deleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	targets := make([]target, 0, len(req.TopicNames)+len(req.Topics))
	if req.Version < 6 {
		for i := range req.TopicNames {
			targets = append(targets, target{name: &req.TopicNames[i]})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	deleted := false
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		t, err := b.lookupTopic(b.meta.Image(), tg.name, tg.id)
		if err == nil {
			name := t.Name
			st.Topic, st.TopicID = &name, t.ID
			err = b.meta.DeleteTopic(ctx, t.Name)
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(fmt.Errorf("delete topic: %w", err))
		} else {
			deleted = true
			b.log.Info("api: topic deleted", "topic", t.Name)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if deleted {
		b.reconcile()
	}
	return resp
}
