package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newACLCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and remove ACLs (kafka-acls.sh's options; the node needs --authorizer acl)",
	}
	cmd.AddCommand(newACLAddCmd(g), newACLListCmd(g), newACLRemoveCmd(g))
	return cmd
}

// aclOpts are kafka-acls.sh's options, shared by add, list and remove.
type aclOpts struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	topics, groups, txnIDs          []string
	cluster                         bool
	patternType                     string
}

// register adds the options to cmd; patternDefault is --resource-pattern-type's default.
func (o *aclOpts) register(cmd *cobra.Command, patternDefault string) {
	f := cmd.Flags()
	f.StringArrayVar(&o.allowPrincipals, "allow-principal", nil, "principal allowed, User:NAME or User:* (repeatable)")
	f.StringArrayVar(&o.denyPrincipals, "deny-principal", nil, "principal denied, User:NAME or User:* (repeatable)")
	f.StringArrayVar(&o.allowHosts, "allow-host", nil, "IP address the allow applies from (repeatable; default *)")
	f.StringArrayVar(&o.denyHosts, "deny-host", nil, "IP address the deny applies from (repeatable; default *)")
	f.StringArrayVar(&o.operations, "operation", nil,
		"All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite (repeatable)")
	f.StringArrayVar(&o.topics, "topic", nil, "topic name, prefix or * (repeatable)")
	f.StringArrayVar(&o.groups, "group", nil, "consumer group name, prefix or * (repeatable)")
	f.StringArrayVar(&o.txnIDs, "transactional-id", nil, "transactional id, prefix or * (repeatable)")
	f.BoolVar(&o.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	f.StringVar(&o.patternType, "resource-pattern-type", patternDefault, "literal, prefixed, any or match (any and match filter list and remove only)")
}

func (o *aclOpts) hasResource() bool {
	return len(o.topics)+len(o.groups)+len(o.txnIDs) > 0 || o.cluster
}

// builder turns the options into kadm's ACL builder. For a filter (list, remove), a missing
// principal, host, operation or resource matches any.
func (o *aclOpts) builder(filter bool) (*kadm.ACLBuilder, error) {
	pattern, err := kmsg.ParseACLResourcePatternType(o.patternType)
	if err != nil || pattern == kmsg.ACLResourcePatternTypeUnknown {
		return nil, fmt.Errorf("%w: --resource-pattern-type %q: want literal, prefixed, any or match", errUsage, o.patternType)
	}
	if !filter && pattern != kadm.ACLPatternLiteral && pattern != kadm.ACLPatternPrefixed {
		return nil, fmt.Errorf("%w: --resource-pattern-type %s: an ACL is literal or prefixed", errUsage, o.patternType)
	}
	ops := make([]kadm.ACLOperation, 0, len(o.operations))
	for _, s := range o.operations {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny && !filter {
			return nil, fmt.Errorf("%w: --operation %q is not an ACL operation", errUsage, s)
		}
		ops = append(ops, op)
	}
	for _, p := range append(append([]string(nil), o.allowPrincipals...), o.denyPrincipals...) {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("%w: principal %q is not Type:name (User:alice)", errUsage, p)
		}
	}
	b := kadm.NewACLs().ResourcePatternType(pattern).Topics(o.topics...).Groups(o.groups...).TransactionalIDs(o.txnIDs...).MaybeClusters(o.cluster)
	switch {
	case filter && !o.hasResource():
		b.AnyResource()
	case !filter && !o.hasResource():
		return nil, fmt.Errorf("%w: name a resource: --topic, --group, --transactional-id or --cluster", errUsage)
	}
	switch {
	case len(ops) > 0:
		b.Operations(ops...)
	case filter:
		b.Operations(kadm.OpAny)
	default:
		b.Operations(kadm.OpAll)
	}
	switch {
	case filter && len(o.allowPrincipals)+len(o.denyPrincipals) == 0:
		b.Allow().Deny().AllowHosts(o.allowHosts...).DenyHosts(o.denyHosts...)
	case !filter && len(o.allowPrincipals)+len(o.denyPrincipals) == 0:
		return nil, fmt.Errorf("%w: name who: --allow-principal or --deny-principal", errUsage)
	default:
		b.MaybeAllow(o.allowPrincipals...).MaybeDeny(o.denyPrincipals...)
		if len(o.allowPrincipals) > 0 {
			b.AllowHosts(hostsOrAny(o.allowHosts, filter)...)
		}
		if len(o.denyPrincipals) > 0 {
			b.DenyHosts(hostsOrAny(o.denyHosts, filter)...)
		}
	}
	return b, nil
}

// hostsOrAny is the hosts given, else every host: "*" for an ACL, none (any) for a filter.
func hostsOrAny(hosts []string, filter bool) []string {
	if len(hosts) > 0 || filter {
		return hosts
	}
	return []string{"*"}
}

func newACLAddCmd(g *globalOpts) *cobra.Command {
	var o aclOpts
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add ACLs: each principal, host, operation and resource named, combined",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := o.builder(false)
			if err != nil {
				return err
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				res, err := call(ctx, g, "acl add", func(ctx context.Context) (kadm.CreateACLsResults, error) { return adm.CreateACLs(ctx, b) })
				if err != nil {
					return err
				}
				var errs []error
				for _, r := range res {
					if r.Err != nil {
						errs = append(errs, fmt.Errorf("acl add %s %s %s: %w", r.Principal, r.Operation, r.Name, r.Err))
					}
				}
				if len(errs) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "added %d ACLs\n", len(res))
				}
				return errors.Join(errs...)
			})
		},
	}
	o.register(cmd, "literal")
	return cmd
}

// aclEntry is one ACL of acl list and acl remove, and their --json objects.
type aclEntry struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
}

func newACLListCmd(g *globalOpts) *cobra.Command {
	var (
		o      aclOpts
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the ACLs the options select (all without any)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := o.builder(true)
			if err != nil {
				return err
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				res, err := call(ctx, g, "acl list", func(ctx context.Context) (kadm.DescribeACLsResults, error) { return adm.DescribeACLs(ctx, b) })
				if err != nil {
					return err
				}
				list := []aclEntry{}
				seen := map[aclEntry]bool{}
				for _, r := range res {
					if r.Err != nil {
						return fmt.Errorf("acl list: %w", r.Err)
					}
					for _, d := range r.Described {
						e := aclEntry{d.Principal, d.Host, d.Operation.String(), d.Permission.String(), d.Type.String(), d.Name, d.Pattern.String()}
						if !seen[e] {
							seen[e] = true
							list = append(list, e)
						}
					}
				}
				return writeACLs(cmd, list, asJSON)
			})
		},
	}
	o.register(cmd, "any")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {principal, host, operation, permission, resource_type, resource_name, pattern_type}")
	return cmd
}

func writeACLs(cmd *cobra.Command, list []aclEntry, asJSON bool) error {
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), list)
	}
	tw := newTable(cmd.OutOrStdout())
	fmt.Fprintln(tw, "PRINCIPAL\tHOST\tOPERATION\tPERMISSION\tRESOURCE-TYPE\tRESOURCE-NAME\tPATTERN-TYPE")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Principal, e.Host, e.Operation, e.Permission, e.ResourceType, e.ResourceName, e.PatternType)
	}
	return tw.Flush()
}

func newACLRemoveCmd(g *globalOpts) *cobra.Command {
	var (
		o      aclOpts
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Remove the ACLs the options select, and print them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !o.hasResource() && len(o.allowPrincipals)+len(o.denyPrincipals) == 0 {
				return fmt.Errorf("%w: name a resource or a principal; acl remove does not remove every ACL at once", errUsage)
			}
			b, err := o.builder(true)
			if err != nil {
				return err
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				res, err := call(ctx, g, "acl remove", func(ctx context.Context) (kadm.DeleteACLsResults, error) { return adm.DeleteACLs(ctx, b) })
				if err != nil {
					return err
				}
				list := []aclEntry{}
				seen := map[aclEntry]bool{}
				for _, r := range res {
					if r.Err != nil {
						return fmt.Errorf("acl remove: %w", r.Err)
					}
					for _, d := range r.Deleted {
						e := aclEntry{d.Principal, d.Host, d.Operation.String(), d.Permission.String(), d.Type.String(), d.Name, d.Pattern.String()}
						if !seen[e] {
							seen[e] = true
							list = append(list, e)
						}
					}
				}
				return writeACLs(cmd, list, asJSON)
			})
		},
	}
	o.register(cmd, "any")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the removed ACLs as a JSON array, as acl list does")
	return cmd
}
