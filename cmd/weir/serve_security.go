package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/server"
)

// envInterBrokerPassword holds the password of --inter-broker-sasl-user; it is never a flag.
const envInterBrokerPassword = "WEIR_INTER_BROKER_PASSWORD"

// securityFlags are the serve flags of listeners, TLS and SASL that need parsing into the Config
// (docs/security.md).
type securityFlags struct {
	listeners, advertised, protocolMap string
	mechanisms                         []string
}

// addSecurityFlags registers serve's security flags on f.
func addSecurityFlags(f *pflag.FlagSet, cfg *server.Config, sec *securityFlags) {
	f.StringVar(&sec.listeners, "listeners", "",
		"Kafka listeners as NAME://host:port,... (Kafka's listeners; replaces --kafka-addr)")
	f.StringVar(&sec.advertised, "advertised-listeners", "",
		"addresses given to clients per listener, NAME://host:port,... (default: each listener's own)")
	f.StringVar(&sec.protocolMap, "listener-security-protocol-map", "",
		"NAME:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (a listener named after its protocol needs none)")
	f.StringVar(&cfg.InterBrokerListener, "inter-broker-listener-name", "",
		"the listener followers, transaction markers and the HTTP API use (default: the first)")
	f.BoolVar(&cfg.ControllerTLS, "controller-tls", false,
		"mutual TLS on the controller listener with --tls-cert/--tls-key, peers verified against --tls-ca")
	f.StringVar(&cfg.InterBrokerSASLUser, "inter-broker-sasl-user", "",
		"the node's SCRAM-SHA-512 user on a SASL inter-broker listener (the password in "+envInterBrokerPassword+")")
	f.StringVar(&cfg.TLS.CertFile, "tls-cert", "", "PEM certificate chain of the SSL and SASL_SSL listeners (reloaded when it changes)")
	f.StringVar(&cfg.TLS.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&cfg.TLS.CAFile, "tls-ca", "", "PEM CA certificates client certificates must chain to")
	f.StringVar(&cfg.TLS.ClientAuth, "tls-client-auth", "none", "client certificates: none, requested or required (Kafka's ssl.client.auth)")
	f.StringSliceVar(&sec.mechanisms, "sasl-mechanisms", api.SASLMechanisms, "SASL mechanisms offered on SASL listeners")
	f.DurationVar(&cfg.SASLFailureDelay, "sasl-failure-delay", api.DefaultSASLFailureDelay,
		"wait before answering a failed SASL authentication and closing the connection")
	f.DurationVar(&cfg.SASLSessionLifetime, "sasl-session-lifetime", 0,
		"how long a SASL session lasts before the client must re-authenticate (connections.max.reauth.ms); 0 for ever")
	f.StringVar(&cfg.BootstrapUser, "bootstrap-user", "",
		"NAME:PASSWORD of a user whose SCRAM credentials are created at start if the cluster has none for NAME (better as WEIR_BOOTSTRAP_USER)")
}

// applySecurity parses the security flags into cfg and checks them: --listeners replaces
// --kafka-addr and --advertised-kafka-addr, which may then not be given.
func applySecurity(cmd *cobra.Command, cfg *server.Config, sec securityFlags) error {
	ls, err := server.ParseListeners(sec.listeners, sec.advertised, sec.protocolMap)
	if err != nil {
		return usageError(err)
	}
	if len(ls) > 0 {
		f := cmd.Flags()
		if f.Changed("kafka-addr") || f.Changed("advertised-kafka-addr") {
			return fmt.Errorf("%w: give --listeners or --kafka-addr (and --advertised-kafka-addr), not both", errUsage)
		}
		cfg.KafkaAddr, cfg.Listeners = "", ls
		for _, l := range ls {
			if err := checkAddr("--listeners "+l.Name, l.Addr, true); err != nil {
				return err
			}
		}
	}
	for _, m := range sec.mechanisms {
		if !slices.Contains(api.SASLMechanisms, m) {
			return fmt.Errorf("%w: --sasl-mechanisms %s: want %s", errUsage, m, strings.Join(api.SASLMechanisms, ", "))
		}
	}
	cfg.SASLMechanisms = sec.mechanisms
	cfg.InterBrokerSASLPassword = os.Getenv(envInterBrokerPassword)
	if cfg.SASLFailureDelay < 0 || cfg.SASLSessionLifetime < 0 {
		return fmt.Errorf("%w: --sasl-failure-delay and --sasl-session-lifetime may not be negative", errUsage)
	}
	if cfg.BootstrapUser != "" {
		if _, _, err := server.ParseBootstrapUser(cfg.BootstrapUser); err != nil {
			return usageError(err)
		}
	}
	return usageError(cfg.CheckListeners())
}

// usageError turns a server.ErrBadConfig into one line of serve's usage errors.
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", errUsage, strings.TrimPrefix(err.Error(), server.ErrBadConfig.Error()+": "))
}
