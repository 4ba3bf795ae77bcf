package group

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/share"
)

// Share groups on the shard (docs/queues.md, "A share group in __consumer_offsets"): each share group's
// membership (share.Group) is the shard's, beside its classic and KIP-848 groups, so the owner goroutine
// alone decides what a group id names. A share group's existence and group epoch are written to the
// partition (shareGroupEntry) and rebuilt, empty, by a load; its members are not.

// TypeShare is a share group's group type and protocol type in a Listing.
const TypeShare = "share"

// shareGroupState is one share group on the shard.
type shareGroupState struct {
	g *share.Group
	// written is the group epoch of the last record appended (-1: none, or the last append failed).
	written int32
}

// ShareMembersGone is told, on a shard's owner goroutine, of the members a share group removed because
// their session ended: their share sessions end and the records they hold are released. It must not
// block.
type ShareMembersGone func(group string, members []string)

// OnShareMembersGone sets the function told of expired share group members; nil tells nobody.
func (c *Coordinator) OnShareMembersGone(fn ShareMembersGone) {
	c.shareGone.Store(&fn)
}

// ShareTopics is share.Topics over img.
func ShareTopics(img *controller.Image) share.Topics {
	return func(name string) (share.TopicInfo, bool) {
		t, ok := img.Topic(name)
		if !ok {
			return share.TopicInfo{}, false
		}
		return share.TopicInfo{ID: t.ID, Partitions: t.Partitions}, true
	}
}

// ShareHeartbeat handles a ShareGroupHeartbeat with the group's membership settings cfg: a join creates
// the share group, unless the id names a classic or KIP-848 group (ErrGroupNotFound). A heartbeat that
// moves the group epoch is answered once the group's record is committed.
func (c *Coordinator) ShareHeartbeat(ctx context.Context, group string, req share.HeartbeatRequest, cfg share.GroupConfig) share.HeartbeatResponse {
	resp, err := memberCall(ctx, c, group, func(s *shard, reply func(share.HeartbeatResponse, error)) {
		s.shareHeartbeat(group, req, cfg, reply)
	})
	if err != nil {
		return share.HeartbeatResponse{Err: err}
	}
	return resp
}

// ShareDescribe reports a share group; ErrGroupNotFound for an id that names none.
func (c *Coordinator) ShareDescribe(ctx context.Context, group string) (share.GroupDescription, error) {
	return call(ctx, c, group, func(s *shard, reply func(share.GroupDescription, error)) {
		sg := s.shares[group]
		if sg == nil {
			reply(share.GroupDescription{}, fmt.Errorf("%w: %q is not a share group", ErrGroupNotFound, group))
			return
		}
		reply(sg.g.Describe(), nil)
	})
}

// ShareEnsure makes group a share group without members for an admin change of its share-partitions:
// ErrNonEmptyGroup while it has members, ErrGroupNotFound when the id names a classic or KIP-848 group.
// An id nobody holds becomes an empty share group, answered once its record is committed.
func (c *Coordinator) ShareEnsure(ctx context.Context, group string) error {
	_, err := memberCall(ctx, c, group, func(s *shard, reply func(struct{}, error)) {
		if sg := s.shares[group]; sg != nil {
			if err := nonEmptyShare(group, sg); err != nil || sg.written == sg.g.Epoch() {
				reply(struct{}{}, err)
				return
			}
			s.shareWrite(sg, func(err error) { reply(struct{}{}, err) })
			return
		}
		if err := s.otherKind(group); err != nil {
			reply(struct{}{}, err)
			return
		}
		sg, err := s.newShareGroup(group, share.GroupConfig{})
		if err != nil {
			reply(struct{}{}, err)
			return
		}
		s.shareWrite(sg, func(err error) { reply(struct{}{}, err) })
	})
	return err
}

// ShareEmpty reports whether group is a share group: ErrNonEmptyGroup while it has members.
func (c *Coordinator) ShareEmpty(ctx context.Context, group string) (bool, error) {
	return call(ctx, c, group, func(s *shard, reply func(bool, error)) {
		sg := s.shares[group]
		if sg == nil {
			reply(false, nil)
			return
		}
		reply(true, nonEmptyShare(group, sg))
	})
}

// ShareDelete deletes the share group group, without members, answering once its tombstone is
// committed; ErrGroupNotFound for an id that names none, ErrNonEmptyGroup while it has members.
func (c *Coordinator) ShareDelete(ctx context.Context, group string) error {
	_, err := call(ctx, c, group, func(s *shard, reply func(struct{}, error)) {
		sg := s.shares[group]
		if sg == nil {
			reply(struct{}{}, fmt.Errorf("%w: %q is not a share group", ErrGroupNotFound, group))
			return
		}
		if err := nonEmptyShare(group, sg); err != nil {
			reply(struct{}{}, err)
			return
		}
		delete(s.shares, group)
		s.write(s.c.clock.Now(), []entry{{key: shareGroupKey(group)}}, func(err error) {
			if err != nil {
				err = writeFailed(err)
			}
			reply(struct{}{}, err)
		})
	})
	return err
}

func nonEmptyShare(group string, sg *shareGroupState) error {
	if sg.g.State() != share.GroupEmpty {
		return fmt.Errorf("%w: share group %q has members", ErrNonEmptyGroup, group)
	}
	return nil
}

// otherKind returns ErrGroupNotFound when group names a classic or KIP-848 group (one with members,
// committed offsets or a record), as Kafka answers a request for a group of another type.
func (s *shard) otherKind(group string) error {
	if s.groups[group] != nil {
		return fmt.Errorf("%w: group %s is not a share group", ErrGroupNotFound, group)
	}
	return nil
}

// shareHeld returns ErrGroupNotFound when group is a share group: a classic join or a KIP-848 join
// with its id is refused, with or without members.
func (s *shard) shareHeld(group, kind string) error {
	if s.shares[group] != nil {
		return fmt.Errorf("%w: group %s is not a %s group", ErrGroupNotFound, group, kind)
	}
	return nil
}

// newShareGroup adds an empty share group to the shard, its record not yet written.
func (s *shard) newShareGroup(group string, cfg share.GroupConfig) (*shareGroupState, error) {
	if len(group) > math.MaxUint16 {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidGroupID, len(group))
	}
	g, err := share.NewGroup(group, cfg)
	if err != nil {
		return nil, err
	}
	sg := &shareGroupState{g: g, written: -1}
	s.shares[group] = sg
	return sg, nil
}

func (s *shard) shareHeartbeat(group string, req share.HeartbeatRequest, cfg share.GroupConfig, reply func(share.HeartbeatResponse, error)) {
	sg := s.shares[group]
	created := sg == nil
	if created {
		if req.MemberEpoch != share.JoinEpoch {
			reply(share.HeartbeatResponse{Err: fmt.Errorf("%w: %q", share.ErrUnknownMemberID, req.MemberID)}, nil)
			return
		}
		if err := s.otherKind(group); err != nil {
			reply(share.HeartbeatResponse{Err: err}, nil)
			return
		}
		var err error
		if sg, err = s.newShareGroup(group, cfg); err != nil {
			reply(share.HeartbeatResponse{Err: err}, nil)
			return
		}
	}
	if err := sg.g.SetConfig(cfg); err != nil {
		reply(share.HeartbeatResponse{Err: err}, nil)
		return
	}
	now := s.c.clock.Now()
	topics := s.c.shareTopics()
	s.shareGone(group, sg.g.Expire(now, topics))
	resp := sg.g.Heartbeat(req, topics, now)
	if created && resp.Err != nil {
		// A join the group refused (no member id, no topics) creates no group.
		delete(s.shares, group)
		reply(resp, nil)
		return
	}
	s.arm(now, sg.g.Deadline())
	if sg.written == sg.g.Epoch() {
		reply(resp, nil)
		return
	}
	s.shareWrite(sg, func(err error) {
		if err != nil {
			resp = share.HeartbeatResponse{Err: err}
		}
		reply(resp, nil)
	})
}

// shareWrite appends sg's record at its group epoch and calls done on the owner once it is committed,
// with the error of a failed write (writeFailed's). A failure leaves the epoch unwritten, so that the
// next change writes it again.
func (s *shard) shareWrite(sg *shareGroupState, done func(error)) {
	epoch := sg.g.Epoch()
	sg.written = epoch
	s.write(s.c.clock.Now(), []entry{shareGroupEntry(sg.g.ID(), epoch)}, func(err error) {
		if err != nil {
			if sg.written == epoch {
				sg.written = -1
			}
			err = writeFailed(err)
		}
		done(err)
	})
}

// shareGone tells the coordinator's listener of the members group removed.
func (s *shard) shareGone(group string, members []string) {
	if len(members) == 0 {
		return
	}
	if fn := s.c.shareGone.Load(); fn != nil && *fn != nil {
		(*fn)(group, members)
	}
}

// tickShares removes the share group members whose session ended by now, writes the groups' new epochs,
// and arms the next deadline.
func (s *shard) tickShares(now time.Time) {
	var topics share.Topics
	for id, sg := range s.shares {
		d := sg.g.Deadline()
		if d.IsZero() || now.Before(d) {
			continue
		}
		if topics == nil {
			topics = s.c.shareTopics()
		}
		gone := sg.g.Expire(now, topics)
		s.shareGone(id, gone)
		if len(gone) > 0 && sg.written != sg.g.Epoch() {
			s.shareWrite(sg, func(err error) {
				if err != nil {
					s.c.log.Warn("group: writing a share group's epoch after an expiry", "group", id, "err", err)
				}
			})
		}
	}
}

// restoreShares rebuilds the share groups a load read: empty, at their recorded epochs.
func (s *shard) restoreShares(recorded map[string]int32) {
	for id, epoch := range recorded {
		g, err := share.RestoreGroup(id, share.GroupConfig{}, epoch)
		if err != nil {
			s.c.log.Warn("group: share group not restored", "group", id, "err", err)
			continue
		}
		s.shares[id] = &shareGroupState{g: g, written: epoch}
	}
}

// listShares returns the share groups as ListGroups shows them.
func (s *shard) listShares() []Listing {
	out := make([]Listing, 0, len(s.shares))
	for id, sg := range s.shares {
		out = append(out, Listing{Group: id, ProtocolType: TypeShare, StateName: sg.g.State().String(), Type: TypeShare})
	}
	return out
}

// shareTopics is share.Topics over the node's current metadata.
func (c *Coordinator) shareTopics() share.Topics { return ShareTopics(c.meta.Image()) }
