package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newQuotaCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set, describe and delete client quotas of users and client ids (kafka-configs --entity-type users/clients)",
	}
	cmd.AddCommand(newQuotaSetCmd(g), newQuotaDescribeCmd(g), newQuotaDeleteCmd(g))
	return cmd
}

// quotaEntityOpts name a quota entity: a user, a client id or both, each a name or the default.
type quotaEntityOpts struct {
	user, client               string
	userDefault, clientDefault bool
}

func (o *quotaEntityOpts) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.user, "user", "", "the user (a principal's name, without User:)")
	f.BoolVar(&o.userDefault, "user-default", false, "the default user (<default>)")
	f.StringVar(&o.client, "client-id", "", "the client id")
	f.BoolVar(&o.clientDefault, "client-id-default", false, "the default client id (<default>)")
}

// entity is the entity named; with required, one must be.
func (o *quotaEntityOpts) entity(required bool) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	for _, c := range []struct {
		typ, flag, name string
		def             bool
	}{{"user", "--user", o.user, o.userDefault}, {"client-id", "--client-id", o.client, o.clientDefault}} {
		switch {
		case c.name != "" && c.def:
			return nil, fmt.Errorf("%w: %s and %s-default name two entities; give one", errUsage, c.flag, c.flag)
		case c.def:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: c.typ})
		case c.name != "":
			e = append(e, kadm.ClientQuotaEntityComponent{Type: c.typ, Name: kmsg.StringPtr(c.name)})
		}
	}
	if required && len(e) == 0 {
		return nil, fmt.Errorf("%w: name the entity: --user, --user-default, --client-id or --client-id-default", errUsage)
	}
	return e, nil
}

// alterQuotas sends one entity's operations and reports the entity's result.
func alterQuotas(cmd *cobra.Command, g *globalOpts, what string, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
		res, err := call(ctx, g, what, func(ctx context.Context) (kadm.AlteredClientQuotas, error) {
			return adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
		})
		if err != nil {
			return err
		}
		name := quotaEntityString(e)
		if len(res) != 1 {
			return fmt.Errorf("%s %s: %d results for one entity", what, name, len(res))
		}
		if r := res[0]; r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("%s %s: %w: %s", what, name, r.Err, r.ErrMessage)
			}
			return fmt.Errorf("%s %s: %w", what, name, r.Err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", what, name)
		return nil
	})
}

func newQuotaSetCmd(g *globalOpts) *cobra.Command {
	var (
		o       quotaEntityOpts
		configs []string
	)
	cmd := &cobra.Command{
		Use:   "set --add-config KEY=VALUE[,KEY=VALUE] (--user NAME | --user-default) (--client-id NAME | --client-id-default)",
		Short: "Set quotas of an entity: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.entity(true)
			if err != nil {
				return err
			}
			var ops []kadm.AlterClientQuotaOp
			for _, c := range splitConfigs(configs) {
				k, v, ok := strings.Cut(c, "=")
				f, perr := strconv.ParseFloat(v, 64)
				if !ok || k == "" || perr != nil {
					return fmt.Errorf("%w: --add-config %q: want KEY=NUMBER", errUsage, c)
				}
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
			}
			if len(ops) == 0 {
				return fmt.Errorf("%w: quota set needs --add-config KEY=VALUE", errUsage)
			}
			return alterQuotas(cmd, g, "quota set", e, ops)
		},
	}
	o.register(cmd)
	cmd.Flags().StringArrayVar(&configs, "add-config", nil, "KEY=VALUE pairs, comma-separated or repeated")
	return cmd
}

func newQuotaDeleteCmd(g *globalOpts) *cobra.Command {
	var (
		o    quotaEntityOpts
		keys []string
	)
	cmd := &cobra.Command{
		Use:   "delete --delete-config KEY[,KEY] (--user NAME | --user-default) (--client-id NAME | --client-id-default)",
		Short: "Delete quotas of an entity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.entity(true)
			if err != nil {
				return err
			}
			var ops []kadm.AlterClientQuotaOp
			for _, k := range splitConfigs(keys) {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
			if len(ops) == 0 {
				return fmt.Errorf("%w: quota delete needs --delete-config KEY", errUsage)
			}
			return alterQuotas(cmd, g, "quota delete", e, ops)
		},
	}
	o.register(cmd)
	cmd.Flags().StringArrayVar(&keys, "delete-config", nil, "keys, comma-separated or repeated")
	return cmd
}

// quotaEntry is one entity of quota describe --json.
type quotaEntry struct {
	Entity string             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func newQuotaDescribeCmd(g *globalOpts) *cobra.Command {
	var (
		o      quotaEntityOpts
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe the quotas of the entities that have the components named (all without any)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.entity(false)
			if err != nil {
				return err
			}
			var comps []kadm.DescribeClientQuotaComponent
			for _, c := range e {
				comp := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: kmsg.QuotasMatchTypeExact}
				if c.Name == nil {
					comp.MatchType = kmsg.QuotasMatchTypeDefault
				}
				comps = append(comps, comp)
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				res, err := call(ctx, g, "quota describe", func(ctx context.Context) (kadm.DescribedClientQuotas, error) {
					return adm.DescribeClientQuotas(ctx, false, comps)
				})
				if err != nil {
					return err
				}
				list := []quotaEntry{}
				for _, q := range res {
					qe := quotaEntry{Entity: quotaEntityString(q.Entity), Values: map[string]float64{}}
					for _, v := range q.Values {
						qe.Values[v.Key] = v.Value
					}
					list = append(list, qe)
				}
				sort.Slice(list, func(i, j int) bool { return list[i].Entity < list[j].Entity })
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), list)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "ENTITY\tQUOTAS")
				for _, qe := range list {
					keys := make([]string, 0, len(qe.Values))
					for k, v := range qe.Values {
						keys = append(keys, k+"="+strconv.FormatFloat(v, 'f', -1, 64))
					}
					sort.Strings(keys)
					fmt.Fprintf(tw, "%s\t%s\n", qe.Entity, strings.Join(keys, ","))
				}
				return tw.Flush()
			})
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {entity, values}")
	return cmd
}

// quotaEntityString is an entity as kafka-configs names it: user=alice,client-id=<default>.
func quotaEntityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, 0, len(e))
	for _, c := range e {
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		parts = append(parts, c.Type+"="+name)
	}
	return strings.Join(parts, ",")
}

// splitConfigs splits comma-separated values of a repeatable flag.
func splitConfigs(vals []string) []string {
	var out []string
	for _, v := range vals {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
