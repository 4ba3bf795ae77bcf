package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// errNoPassword is returned by user create when no password could be read.
var errNoPassword = errors.New("no password: give it on standard input with --password-stdin, or run in a terminal to be prompted")

func newUserCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SCRAM users (DescribeUserScramCredentials, AlterUserScramCredentials)",
	}
	cmd.AddCommand(newUserCreateCmd(g), newUserDeleteCmd(g), newUserListCmd(g))
	return cmd
}

func newUserCreateCmd(g *globalOpts) *cobra.Command {
	var (
		mechanism  string
		iterations int32
		fromStdin  bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user, or set a user's password, for one SCRAM mechanism",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mech, err := scramMechanism(mechanism)
			if err != nil {
				return err
			}
			password, err := readPassword(cmd, args[0], fromStdin)
			if err != nil {
				return err
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				up := []kadm.UpsertSCRAM{{User: args[0], Mechanism: mech, Iterations: iterations, Password: password}}
				res, err := call(ctx, g, "user create", func(ctx context.Context) (kadm.AlteredUserSCRAMs, error) {
					return adm.AlterUserSCRAMs(ctx, nil, up)
				})
				if err != nil {
					return err
				}
				if err := alteredErr(res); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "user %s: %s credential set\n", args[0], mech)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&mechanism, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	cmd.Flags().Int32Var(&iterations, "iterations", 8192, "SCRAM iterations, 4096 to 16384")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of standard input")
	return cmd
}

func newUserDeleteCmd(g *globalOpts) *cobra.Command {
	var mechanisms []string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user's SCRAM credentials (every mechanism it has, unless --mechanism names some)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				del, err := userDeletions(ctx, g, adm, args[0], mechanisms)
				if err != nil {
					return err
				}
				res, err := call(ctx, g, "user delete", func(ctx context.Context) (kadm.AlteredUserSCRAMs, error) {
					return adm.AlterUserSCRAMs(ctx, del, nil)
				})
				if err != nil {
					return err
				}
				if err := alteredErr(res); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "user %s deleted\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&mechanisms, "mechanism", nil, "only these mechanisms (SCRAM-SHA-256, SCRAM-SHA-512)")
	return cmd
}

// userDeletions lists what delete removes: the named mechanisms, or every one the user has.
func userDeletions(ctx context.Context, g *globalOpts, adm *kadm.Client, user string, names []string) ([]kadm.DeleteSCRAM, error) {
	var del []kadm.DeleteSCRAM
	for _, n := range names {
		m, err := scramMechanism(n)
		if err != nil {
			return nil, err
		}
		del = append(del, kadm.DeleteSCRAM{User: user, Mechanism: m})
	}
	if len(del) > 0 {
		return del, nil
	}
	described, err := call(ctx, g, "user delete", func(ctx context.Context) (kadm.DescribedUserSCRAMs, error) {
		return adm.DescribeUserSCRAMs(ctx, user)
	})
	if err != nil {
		return nil, err
	}
	d, ok := described[user]
	if !ok || d.Err != nil {
		return nil, fmt.Errorf("user delete: no such user %s", user)
	}
	for _, c := range d.CredInfos {
		del = append(del, kadm.DeleteSCRAM{User: user, Mechanism: c.Mechanism})
	}
	return del, nil
}

func newUserListCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List users and their SCRAM mechanisms and iterations (never a secret)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				described, err := call(ctx, g, "user list", func(ctx context.Context) (kadm.DescribedUserSCRAMs, error) {
					return adm.DescribeUserSCRAMs(ctx)
				})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				for _, d := range described.Sorted() {
					var creds []string
					for _, c := range d.CredInfos {
						creds = append(creds, fmt.Sprintf("%s(%d)", c.Mechanism, c.Iterations))
					}
					fmt.Fprintf(out, "%s\t%s\n", d.User, strings.Join(creds, ","))
				}
				return nil
			})
		},
	}
}

func scramMechanism(name string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(name) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	default:
		return 0, fmt.Errorf("%w: mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", errUsage, name)
	}
}

// alteredErr is the first user's error of an alter, with the broker's message.
func alteredErr(res kadm.AlteredUserSCRAMs) error {
	for _, r := range res.Sorted() {
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("user %s: %w: %s", r.User, r.Err, r.ErrMessage)
			}
			return fmt.Errorf("user %s: %w", r.User, r.Err)
		}
	}
	return nil
}

// readPassword reads the password: the first line of standard input with --password-stdin, else a
// prompt on a terminal with echo off.
func readPassword(cmd *cobra.Command, user string, fromStdin bool) (string, error) {
	if fromStdin {
		return firstLine(cmd.InOrStdin())
	}
	f, ok := cmd.InOrStdin().(*os.File)
	if !ok || !isTerminal(f) {
		return "", fmt.Errorf("%w: %w", errUsage, errNoPassword)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Password for %s: ", user)
	restore, err := echoOff(f)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errUsage, errNoPassword)
	}
	defer fmt.Fprintln(cmd.ErrOrStderr())
	defer restore()
	return firstLine(f)
}

func firstLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("%w: %w", errUsage, errNoPassword)
	}
	return line, nil
}
