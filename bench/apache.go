package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Apache Kafka as a peer: the broker's jars come from Maven Central through the machine's Maven, into a
// cache outside the repository, and the broker runs as one JVM in KRaft combined mode (broker and
// controller in one process) on loopback.

// kafkaVersion is the Apache Kafka release the harness fetches and runs.
const kafkaVersion = "4.4.0"

// kafkaPOM asks Maven for the broker (kafka_2.13, whose main class is kafka.Kafka and which holds
// kafka.tools.StorageTool) and kafka-tools (ProducerPerformance, ConsumerPerformance) with every
// runtime dependency.
const kafkaPOM = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>weir.bench</groupId>
  <artifactId>apache-kafka</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>%[1]s</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>%[1]s</version></dependency>
  </dependencies>
</project>
`

// kafkaJVMArgs are the JVM options kafka-server-start.sh uses by default: a 1 GiB heap and G1.
var kafkaJVMArgs = []string{"-Xmx1g", "-Xms1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

// kafkaCache is where the jars are kept between runs: $XDG_CACHE_HOME/weir-bench/kafka-VERSION, or
// ~/.cache/weir-bench/kafka-VERSION.
func kafkaCache() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "weir-bench", "kafka-"+kafkaVersion), nil
}

// fetchKafka returns the folder holding the broker's jars, fetching them with `mvn
// dependency:copy-dependencies` on a generated pom when the cache does not have them yet. The jars are
// copied into a temporary folder renamed into place at the end, so an interrupted fetch leaves no
// half-filled cache.
func fetchKafka(ctx context.Context, progress func(string, ...any)) (string, error) {
	cache, err := kafkaCache()
	if err != nil {
		return "", err
	}
	libs := filepath.Join(cache, "libs")
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+kafkaVersion+".jar")); err == nil {
		return libs, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("Apache Kafka %s is not in %s and there is no mvn to fetch it: %w", kafkaVersion, cache, err)
	}
	progress("fetching Apache Kafka %s from Maven Central into %s", kafkaVersion, cache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	pom := filepath.Join(cache, "pom.xml")
	if err := os.WriteFile(pom, fmt.Appendf(nil, kafkaPOM, kafkaVersion), 0o644); err != nil {
		return "", err
	}
	tmp := libs + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", pom, "dependency:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn dependency:copy-dependencies: %w\n%s", err, out.String())
	}
	if err := os.Rename(tmp, libs); err != nil {
		return "", err
	}
	return libs, nil
}

// javaBin is $JAVA_HOME/bin/java when JAVA_HOME is set, else java from PATH. Kafka 4.4's broker needs
// Java 17 or later.
func javaBin() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		return filepath.Join(home, "bin", "java"), nil
	}
	return exec.LookPath("java")
}

// apacheKafka is the fetched broker: a java binary and the folder of jars on its classpath.
type apacheKafka struct {
	java, libs string
}

// javaCmd builds a JVM command running class main with the cached jars as its classpath.
func (k apacheKafka) javaCmd(ctx context.Context, jvm []string, main string, args ...string) *exec.Cmd {
	full := append(append(slices.Clone(jvm), "-cp", filepath.Join(k.libs, "*"), main), args...)
	return exec.CommandContext(ctx, k.java, full...)
}

// kafkaBroker is one Apache Kafka JVM in KRaft combined mode with its own data folder.
type kafkaBroker struct{ cmd *exec.Cmd }

// formatKafka writes dir/server.properties for a combined broker and controller (node 1) listening on
// addr for clients and ctlAddr for the controller quorum, and formats dir/data with a new cluster id
// (kafka.tools.StorageTool format, which Kafka requires before a KRaft node's first start).
func (k apacheKafka) formatKafka(ctx context.Context, dir, addr, ctlAddr string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	props := strings.Join([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.voters=1@" + ctlAddr,
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + ctlAddr,
		"advertised.listeners=PLAINTEXT://" + addr,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=1",
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
	}, "\n") + "\n"
	conf := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		return "", err
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	cmd := k.javaCmd(ctx, nil, "kafka.tools.StorageTool", "format", "-t", base64.RawURLEncoding.EncodeToString(id), "-c", conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kafka storage format: %w\n%s", err, out)
	}
	return conf, nil
}

// launchKafka starts the broker with the server.properties formatKafka wrote and does not wait for it.
func (k apacheKafka) launchKafka(conf string) (*kafkaBroker, error) {
	logf, err := os.Create(filepath.Join(filepath.Dir(conf), "kafka.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := k.javaCmd(context.Background(), kafkaJVMArgs, "kafka.Kafka", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &kafkaBroker{cmd: cmd}, nil
}

func (b *kafkaBroker) stop() { stopProcess(b.cmd) }

// producerPerf runs org.apache.kafka.tools.ProducerPerformance: records of recordSize bytes to topic
// as fast as possible, acks=all, with weir bench's batching (no linger, 1 MiB batches), and returns
// the records/s it reported.
func (k apacheKafka) producerPerf(ctx context.Context, brokers, topic string, records int) (float64, error) {
	out, err := k.javaCmd(ctx, []string{"-Xmx512m"}, "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(recordSize),
		"--throughput", "-1", "--producer-props", "bootstrap.servers="+brokers, "acks=all", "linger.ms=0",
		"batch.size=1048576").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ProducerPerformance: %w\n%s", err, out)
	}
	// The summary is the last line: "N records sent, X records/sec (Y MB/sec), ...".
	for line := range strings.Lines(string(out)) {
		if n, rest, ok := strings.Cut(line, " records sent, "); ok && n == strconv.Itoa(records) {
			v, _, _ := strings.Cut(rest, " ")
			r, err := strconv.ParseFloat(v, 64)
			return r, err
		}
	}
	return 0, fmt.Errorf("ProducerPerformance printed no summary:\n%s", out)
}

// consumerPerf runs org.apache.kafka.tools.ConsumerPerformance reading records from topic's start in a
// new group and returns its fetch.nMsg.sec: records/s over the time spent fetching, the group's join
// left out.
func (k apacheKafka) consumerPerf(ctx context.Context, brokers, topic string, records int) (float64, error) {
	out, err := k.javaCmd(ctx, []string{"-Xmx512m"}, "org.apache.kafka.tools.ConsumerPerformance",
		"--bootstrap-server", brokers, "--topic", topic, "--num-records", strconv.Itoa(records),
		"--timeout", "60000").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ConsumerPerformance: %w\n%s", err, out)
	}
	var header []string
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), ", ")
		if slices.Index(f, "fetch.nMsg.sec") >= 0 {
			header = f
			continue
		}
		if header != nil && len(f) == len(header) {
			r, err := strconv.ParseFloat(f[slices.Index(header, "fetch.nMsg.sec")], 64)
			return r, err
		}
	}
	return 0, errors.New("ConsumerPerformance printed no summary:\n" + string(out))
}

// serveTimeout bounds how long a broker may take from its start to serving.
const serveTimeout = 3 * time.Minute
