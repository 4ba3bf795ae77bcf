package controller

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateConfigDocs = flag.Bool("update", false, "rewrite docs/configs.md from the config definitions")

// configDocPath is docs/configs.md, relative to this package.
const configDocPath = "../../docs/configs.md"

// TestConfigDocs keeps docs/configs.md equal to the config definitions; -update rewrites it.
func TestConfigDocs(t *testing.T) {
	want := configDoc()
	if *updateConfigDocs {
		if err := os.WriteFile(configDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/configs.md differs from the config definitions: run go test ./internal/controller -run TestConfigDocs -update")
	}
}

// configDoc renders every topic and broker config with its type, default and what weir does with it.
func configDoc() string {
	var b strings.Builder
	b.WriteString(`# Configs

Generated from the config definitions in ` + "`internal/controller/config.go`" + ` by
` + "`go test ./internal/controller -run TestConfigDocs -update`" + `; a test fails when the two differ.

Every topic config of Kafka 4.x is known: CreateTopics, AlterConfigs and IncrementalAlterConfigs
validate it with Kafka's type and range (a bad value is INVALID_CONFIG naming the config and why), and
DescribeConfigs lists it with its value, source and synonyms. **weir** in the weir column means weir
implements it; **accepted** means it is validated, stored and described but changes nothing in weir yet
(the topic behaves as with weir's default); **not applicable** means weir accepts and ignores it because
it has no such mechanism; **refused** values are named. A key that is not listed is refused
with INVALID_CONFIG. List configs (` + "`cleanup.policy`" + ` and the throttled-replica lists) take
IncrementalAlterConfigs' APPEND and SUBTRACT as well as SET and DELETE.

## Topic configs

The broker synonym, set cluster-wide with IncrementalAlterConfigs on the broker resource, is the
default of every topic that does not set the config itself.

| config | broker synonym | type | default | weir | meaning |
|---|---|---|---|---|---|
`)
	for _, d := range topicDefs {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", d.name, code(d.brokerName), typeName(d.typ),
			code(d.def), support(d), strings.TrimPrefix(strings.TrimPrefix(d.doc, compat), notApplicable))
	}
	b.WriteString(produceDoc)
	b.WriteString(`
## Broker configs

Cluster-wide, set at run time with IncrementalAlterConfigs on the broker resource (any broker id, or
the empty name), besides the topic configs' broker synonyms above.

| config | type | default | meaning |
|---|---|---|---|
`)
	for _, d := range brokerOnlyDefs {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.brokerName, typeName(d.typ), code(d.def), d.doc)
	}
	b.WriteString(`
A broker resource named by a broker id takes that broker's own values of the topic configs' broker
synonyms, which its logs and its produce path use before the cluster-wide ones
(DYNAMIC_BROKER_CONFIG). The configs above, ` + "`min.insync.replicas`" + ` and
` + "`unclean.leader.election.enable`" + ` are decided for the whole cluster and refused for one
broker with INVALID_REQUEST.

## Read-only broker configs

Set on each node's command line (docs/cli.md) and described on that broker as STATIC_BROKER_CONFIG, or
DEFAULT_CONFIG when left at the default; a change is refused with INVALID_REQUEST.

| config | type | default | meaning |
|---|---|---|---|
`)
	for _, d := range staticDefs {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.brokerName, typeName(d.typ), code(d.def), d.doc)
	}
	return b.String()
}

// support says what weir does with a topic config.
func support(d configDef) string {
	switch {
	case d.name == "remote.storage.enable":
		return "refused when true"
	case strings.HasPrefix(d.doc, compat):
		return "accepted"
	case strings.HasPrefix(d.doc, notApplicable):
		return "not applicable"
	}
	return "weir"
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

func typeName(t ConfigType) string {
	switch t {
	case ConfigTypeString:
		return "string"
	case ConfigTypeInt:
		return "int"
	case ConfigTypeLong:
		return "long"
	case ConfigTypeBoolean:
		return "boolean"
	case ConfigTypeList:
		return "list"
	case ConfigTypeDouble:
		return "double"
	}
	return fmt.Sprintf("type %d", t)
}
