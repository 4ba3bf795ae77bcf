package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/weir-mq/weir/internal/acl"
)

// createAcls applies CreateAcls: every binding valid, or none added.
func (img *Image) createAcls(c CreateAcls) error {
	for _, b := range c.Bindings {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidCommand, err)
		}
	}
	next := slices.Clone(img.ACLs)
	for _, b := range c.Bindings {
		if !slices.Contains(next, b) {
			next = append(next, b)
		}
	}
	img.ACLs = slices.Clip(next)
	return nil
}

// deleteAcls applies DeleteAcls.
func (img *Image) deleteAcls(c DeleteAcls) error {
	img.ACLs = slices.DeleteFunc(slices.Clone(img.ACLs), func(b acl.Binding) bool { return slices.Contains(c.Bindings, b) })
	return nil
}

// CreateAcls adds bindings to the cluster's ACLs.
func (s *Store) CreateAcls(ctx context.Context, bindings []acl.Binding) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return CreateAcls{Bindings: bindings} }, false)
	return err
}

// DeleteAcls removes bindings from the cluster's ACLs.
func (s *Store) DeleteAcls(ctx context.Context, bindings []acl.Binding) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return DeleteAcls{Bindings: bindings} }, false)
	return err
}
