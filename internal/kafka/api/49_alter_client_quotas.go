package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// alterClientQuotas answers AlterClientQuotas (key 49). Each entry is checked on its own, as
// Kafka's controller checks it: an entity of a user, a client id or both (each type once, a nil name
// for the default entity), known keys (producer_byte_rate, consumer_byte_rate, request_percentage),
// byte rates whole and values positive; an entry that fails answers INVALID_REQUEST and changes
// nothing. The entries that pass are proposed together as one controller command, unless
// validate_only.
func (b *Broker) alterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	errs := make([]error, len(req.Entries))
	var cmd controller.AlterClientQuotas
	var accepted []int
	for i, e := range req.Entries {
		a, err := quotaAlteration(e)
		if err == nil {
			err = controller.ValidateQuotaAlteration(a)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		cmd.Alterations = append(cmd.Alterations, a)
		accepted = append(accepted, i)
	}
	if len(cmd.Alterations) > 0 && !req.ValidateOnly {
		if err := b.meta.AlterClientQuotas(ctx, cmd); err != nil {
			for _, i := range accepted {
				errs[i] = err
			}
		}
	}
	for i, e := range req.Entries {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			r.Entity = append(r.Entity, rc)
		}
		if errs[i] != nil {
			r.ErrorCode, r.ErrorMessage = b.errorCode(errs[i]), errorMessage(errs[i])
		}
		resp.Entries = append(resp.Entries, r)
	}
	return resp
}

// errEmptyQuotaEntity: an AlterClientQuotas entry without an entity.
var errEmptyQuotaEntity = errors.New("api: quota entity without a component")

// quotaAlteration reads one entry of an AlterClientQuotas request.
func quotaAlteration(e kmsg.AlterClientQuotasRequestEntry) (controller.QuotaAlteration, error) {
	var a controller.QuotaAlteration
	if len(e.Entity) == 0 {
		return a, fmt.Errorf("%w: %w", errInvalidRequest, errEmptyQuotaEntity)
	}
	for _, c := range e.Entity {
		n := controller.QuotaDefault()
		if c.Name != nil {
			n = controller.QuotaNamed(*c.Name)
		}
		var into *controller.QuotaName
		switch c.Type {
		case quotaEntityUser:
			into = &a.Entity.User
		case quotaEntityClientID:
			into = &a.Entity.ClientID
		default:
			return a, fmt.Errorf("%w: unsupported quota entity type %q", errInvalidRequest, c.Type)
		}
		if into.Set {
			return a, fmt.Errorf("%w: entity type %s appears more than once", errInvalidRequest, c.Type)
		}
		*into = n
	}
	for _, op := range e.Ops {
		if op.Remove {
			a.Remove = append(a.Remove, op.Key)
			continue
		}
		if a.Set == nil {
			a.Set = map[string]float64{}
		}
		a.Set[op.Key] = op.Value
	}
	return a, nil
}
