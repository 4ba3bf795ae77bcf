package main

import (
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// kafkaRow is one line of the -kafka mode's summary: weir's key against Kafka's, with the target
// for the ratio weir/Kafka when it has one (atMost: the ratio must not exceed goal; otherwise it must
// reach it).
type kafkaRow struct {
	what, unit   string
	weirKey      string
	kafkaKey     string
	lowerBetter  bool
	goal         float64
	atMost       bool
	weirLabel    string
	kafkaLabel   string
	generatorTag string
}

// headlinePartitions is the partition count of the summary's produce rows; the scaling table has the rest.
const headlinePartitions = 4

func kafkaRows() []kafkaRow {
	p := fmt.Sprintf("-p%d", headlinePartitions)
	return []kafkaRow{
		{what: fmt.Sprintf("produce, %d partitions", headlinePartitions), unit: "rec/s", weirKey: "rps-durable" + p, kafkaKey: "rps-default" + p, goal: 1, weirLabel: "durable", kafkaLabel: "default"},
		{what: fmt.Sprintf("produce, %d partitions", headlinePartitions), unit: "rec/s", weirKey: "rps-durable" + p, kafkaKey: "rps-flush1" + p, goal: 10, weirLabel: "durable", kafkaLabel: "flush.messages=1"},
		{what: fmt.Sprintf("produce, %d partitions", headlinePartitions), unit: "rec/s", weirKey: "rps-never" + p, kafkaKey: "rps-default" + p, weirLabel: "never", kafkaLabel: "default"},
		{what: "produce the consume phase's records, 4 partitions, broker CPU per GB produced", unit: "CPU s/GB", weirKey: "cpugb-produce", kafkaKey: "cpugb-produce", lowerBetter: true, weirLabel: "durable", kafkaLabel: "default"},
		{what: "consume from the start, 4 partitions", unit: "rec/s", weirKey: "w3", kafkaKey: "w3", goal: 1, weirLabel: "durable", kafkaLabel: "default"},
		{what: "consume, broker CPU per GB consumed", unit: "CPU s/GB", weirKey: "cpugb-consume", kafkaKey: "cpugb-consume", lowerBetter: true, goal: 0.5, atMost: true, weirLabel: "durable", kafkaLabel: "default"},
		{what: fmt.Sprintf("end to end at %d rec/s, p50", e2eRate), unit: "ms", weirKey: "e2ep50-durable", kafkaKey: "e2ep50-default", lowerBetter: true, weirLabel: "durable", kafkaLabel: "default"},
		{what: fmt.Sprintf("end to end at %d rec/s, p99", e2eRate), unit: "ms", weirKey: "e2ep99-durable", kafkaKey: "e2ep99-default", lowerBetter: true, goal: 1, atMost: true, weirLabel: "durable", kafkaLabel: "default"},
		{what: fmt.Sprintf("end to end at %d rec/s, p99", e2eRate), unit: "ms", weirKey: "e2ep99-durable", kafkaKey: "e2ep99-flush1", lowerBetter: true, weirLabel: "durable", kafkaLabel: "flush.messages=1"},
		{what: fmt.Sprintf("end to end at %d rec/s, p99", e2eRate), unit: "ms", weirKey: "e2ep99-never", kafkaKey: "e2ep99-default", lowerBetter: true, weirLabel: "never", kafkaLabel: "default"},
		{what: "idle RSS after start", unit: "MiB", weirKey: "idlerss", kafkaKey: "idlerss", lowerBetter: true, goal: 0.1, atMost: true},
		{what: "peak RSS over the round", unit: "MiB", weirKey: "peakrss", kafkaKey: "peakrss", lowerBetter: true},
		{what: "time to serve after start", unit: "s", weirKey: "serve", kafkaKey: "serve", lowerBetter: true, goal: 0.2, atMost: true},
		{what: "produce, 4 partitions", unit: "rec/s", weirKey: "perf-produce", kafkaKey: "perf-produce", weirLabel: "durable", kafkaLabel: "default", generatorTag: "ProducerPerformance"},
		{what: "consume, 4 partitions", unit: "rec/s", weirKey: "perf-consume", kafkaKey: "perf-consume", weirLabel: "durable", kafkaLabel: "default", generatorTag: "ConsumerPerformance"},
	}
}

// verdict says whether ratio meets the row's target ("" when it has none).
func (r kafkaRow) verdict(ratio float64) (target, met string) {
	if r.goal == 0 {
		return "", ""
	}
	if r.atMost {
		target = fmt.Sprintf("≤ %g×", r.goal)
		met = map[bool]string{true: "met", false: "**missed**"}[ratio <= r.goal]
	} else {
		target = fmt.Sprintf("≥ %g×", r.goal)
		met = map[bool]string{true: "met", false: "**missed**"}[ratio >= r.goal]
	}
	return target, met
}

func (k *kafkaHarness) report(quick bool, fsyncP50, fsyncP99 float64) report {
	var b strings.Builder
	mode := "full"
	flags := " -kafka"
	if quick {
		mode = "quick (small counts: checks the harness, not for conclusions)"
		flags += " -quick"
	}
	if k.rounds != 3 {
		flags += fmt.Sprintf(" -rounds %d", k.rounds)
	}
	commit, _ := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	fmt.Fprintf(&b, "# weir vs Apache Kafka %s, one node: speed and cost (%s)\n\n", kafkaVersion, time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "- run: `bench/run.sh%s` (%s), %d rounds alternating (a fresh weir and a fresh Kafka, weir first in odd rounds, Kafka first in even ones), medians and "+
		"the ratio of the medians (and the median of each round's ratio); weir at commit %s, Apache Kafka %s (Maven Central, KRaft combined mode, `java %s`), franz-go v1.22.3\n",
		flags, mode, k.rounds, strings.TrimSpace(string(commit)), kafkaVersion, strings.Join(kafkaJVMArgs, " "))
	fmt.Fprintf(&b, "- machine: %s, shared with other engineers building and testing while this ran: read ratios and medians, not absolute figures\n", machine())
	fmt.Fprintf(&b, "- 1 KiB records, one `weir bench` (franz-go) producer, acks=all, idempotent, linger 0, 1 MiB batches; "+
		"each produce of the scaling row runs %s on a topic created beforehand; the consume phase reads %d records "+
		"(produced just before, timed too) with one consumer; end to end at %d records/s for %s on one partition; "+
		"every broker first gets an untimed %s produce and a consume (the JVM's JIT warms up)\n",
		k.ksz.dur, k.ksz.consumeN, e2eRate, k.ksz.latDur, k.ksz.warm)
	b.WriteString("- durability: weir `durable` is its default (fsync before the acknowledgement, group commit), `never` the topic config " +
		"`weir.flush.policy=never`; Kafka `default` never fsyncs on the produce path, `flush.messages=1` fsyncs each batch " +
		"before acknowledging it. Only weir durable and Kafka flush.messages=1 survive power loss on one node.\n")
	b.WriteString("- cost: utime+stime of the broker process (/proc/PID/stat; the JVM with all its threads) over each measured phase, " +
		"per GB of record values (10^9 bytes) or per record; RSS from /proc/PID/status (VmRSS idle after serving and settling, " +
		"VmHWM at the end of the round)\n")
	b.WriteString("- time to serve: from starting the process (weir on an empty folder; Kafka on a folder formatted just before, " +
		"the format not counted) until a one-partition topic created through it answers ListOffsets\n")
	if _, v, ok := k.table.get("kafka-format", sidePeer); ok {
		fmt.Fprintf(&b, "- Kafka's `kafka.tools.StorageTool format`, needed before the first start: %s s per round\n", joinVals(v))
	}
	fmt.Fprintf(&b, "- the disk's own 1 KiB append+fdatasync at %d/s, same run: p50 %.3g ms, p99 %.3g ms (the floor under "+
		"durable end-to-end latency)\n\n", e2eRate, fsyncP50, fsyncP99)

	b.WriteString("| measurement | weir | Kafka | weir | Kafka | weir/Kafka | target | | round by round weir/Kafka, median | weir per round | Kafka per round |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---|---|---:|---|---|\n")
	var bars []bar
	for _, r := range kafkaRows() {
		w, wr, okW := k.table.get(r.weirKey, sideWeir)
		p, pr, okP := k.table.get(r.kafkaKey, sidePeer)
		if !okW || !okP {
			continue
		}
		ratio := w / p
		target, met := r.verdict(ratio)
		better := "higher is better"
		if r.lowerBetter {
			better = "lower is better"
		}
		what := r.what
		if r.generatorTag != "" {
			what += ", " + r.generatorTag
		}
		fmt.Fprintf(&b, "| %s (%s, %s) | %s | %s | %s | %s | %.2f | %s | %s | %.2f | %s | %s |\n", what, r.unit, better,
			r.weirLabel, r.kafkaLabel, fmtVal(w), fmtVal(p), ratio, target, met, roundRatio(wr, pr), joinVals(wr), joinVals(pr))
		bars = append(bars, bar{label: strings.TrimSpace(fmt.Sprintf("%s: %s vs %s (%s)", what, r.weirLabel, r.kafkaLabel, r.unit)), peer: "Kafka", weir: w, other: p})
	}
	k.scalingTable(&b)
	b.WriteString("\n![weir vs Kafka](CHART)\n")
	return report{markdown: b.String(), svg: chart(bars)}
}

// roundRatio is the median over rounds of weir's value divided by Kafka's in the same round: each round
// runs weir and Kafka minutes apart, so when the shared machine's load drifts across the run, this
// follows it less than the ratio of the medians does.
func roundRatio(weir, kafka []float64) float64 {
	var r []float64
	for i := range min(len(weir), len(kafka)) {
		if kafka[i] != 0 {
			r = append(r, weir[i]/kafka[i])
		}
	}
	if len(r) == 0 {
		return 0
	}
	return median(r)
}

// scalingTable writes the partition scaling row: records/s and broker CPU per record at each partition
// count for weir durable and never and Kafka default and flush.messages=1, with the ratios.
func (k *kafkaHarness) scalingTable(b *strings.Builder) {
	med := func(key string, s side) float64 {
		v, _, _ := k.table.get(key, s)
		return v
	}
	ratio := func(a, c float64) string {
		if c == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", a/c)
	}
	b.WriteString("\n## Partition scaling: produce as fast as possible, one producer, 1 KiB records (medians)\n\n")
	b.WriteString("| partitions | weir durable rec/s | weir never rec/s | Kafka default rec/s | Kafka flush.messages=1 rec/s | " +
		"durable / never | durable / Kafka default | durable / Kafka flush=1 | never / Kafka default | " +
		"CPU µs/rec weir durable | weir never | Kafka default | Kafka flush=1 | CPU durable / never | CPU weir durable / Kafka default |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range k.ksz.partitions {
		wd, wn := med(scaleKey("rps", weirDurable, p), sideWeir), med(scaleKey("rps", weirNever, p), sideWeir)
		kd, kf := med(scaleKey("rps", kafkaDefault, p), sidePeer), med(scaleKey("rps", kafkaFlush1, p), sidePeer)
		cwd, cwn := med(scaleKey("cpurec", weirDurable, p), sideWeir), med(scaleKey("cpurec", weirNever, p), sideWeir)
		ckd, ckf := med(scaleKey("cpurec", kafkaDefault, p), sidePeer), med(scaleKey("cpurec", kafkaFlush1, p), sidePeer)
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p,
			fmtVal(wd), fmtVal(wn), fmtVal(kd), fmtVal(kf), ratio(wd, wn), ratio(wd, kd), ratio(wd, kf), ratio(wn, kd),
			fmtVal(cwd), fmtVal(cwn), fmtVal(ckd), fmtVal(ckf), ratio(cwd, cwn), ratio(cwd, ckd))
	}
	b.WriteString("\nThe same phases' broker CPU split: user CPU µs per record (the broker's own code), then the system CPU " +
		"per record beside what writing through the page cache cost the kernel right after the phase, with no broker " +
		"(`pageCacheWriteCost`: s of system CPU per GB written in 16 KiB writes). On a virtual machine that cost " +
		"moves several times over with the memory's history, and the brokers' system CPU with it " +
		"(docs/bench.md, \"What the page cache costs here\").\n\n")
	b.WriteString("| partitions | user µs/rec weir durable | weir never | Kafka default | Kafka flush=1 | user weir durable / Kafka default | " +
		"system µs/rec weir durable | weir never | Kafka default | Kafka flush=1 | page cache s/GB after weir durable | weir never | Kafka default | Kafka flush=1 |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range k.ksz.partitions {
		var user, sys, raw []float64
		for _, c := range scaleConfigs {
			u, t := med(scaleKey("userrec", c.cfg, p), c.s), med(scaleKey("cpurec", c.cfg, p), c.s)
			user, sys = append(user, u), append(sys, t-u)
			raw = append(raw, med(scaleKey("pagecache", c.cfg, p), c.s))
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p,
			fmtVal(user[0]), fmtVal(user[1]), fmtVal(user[2]), fmtVal(user[3]), ratio(user[0], user[2]),
			fmtVal(sys[0]), fmtVal(sys[1]), fmtVal(sys[2]), fmtVal(sys[3]), fmtVal(raw[0]), fmtVal(raw[1]), fmtVal(raw[2]), fmtVal(raw[3]))
	}
	b.WriteString("\nThe writeback the broker's own CPU leaves out: the CPU time of the kernel's threads (kthreadd's children: " +
		"the flusher workers, completion work) during the phase, plus a sync(2) right after it for the pages not yet written " +
		"back, in µs per record of the phase, and the broker's CPU with it. A broker that fsyncs pays its writeback in its " +
		"own threads; one that does not leaves it to these, so the last column compares the durability settings at the " +
		"same work (docs/bench.md, \"What the page cache costs here\").\n\n")
	b.WriteString("| partitions | writeback µs/rec weir durable | weir never | Kafka default | Kafka flush=1 | with the broker's: weir durable | weir never | Kafka default | Kafka flush=1 | weir durable / never | weir durable / Kafka default |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range k.ksz.partitions {
		var wb, all []float64
		for _, c := range scaleConfigs {
			w := med(scaleKey("writeback", c.cfg, p), c.s)
			wb, all = append(wb, w), append(all, w+med(scaleKey("cpurec", c.cfg, p), c.s))
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p,
			fmtVal(wb[0]), fmtVal(wb[1]), fmtVal(wb[2]), fmtVal(wb[3]),
			fmtVal(all[0]), fmtVal(all[1]), fmtVal(all[2]), fmtVal(all[3]), ratio(all[0], all[1]), ratio(all[0], all[2]))
	}
	if len(k.failed) > 0 {
		b.WriteString("\nPhases a broker failed (left out of the medians above):\n\n")
		for _, f := range k.failed {
			fmt.Fprintf(b, "- %s\n", f)
		}
	}
	b.WriteString("\nEvery round's records/s (weir durable; weir never; Kafka default; Kafka flush.messages=1):\n\n")
	for _, p := range k.ksz.partitions {
		var parts []string
		for _, c := range scaleConfigs {
			_, v, _ := k.table.get(scaleKey("rps", c.cfg, p), c.s)
			parts = append(parts, joinVals(v))
		}
		fmt.Fprintf(b, "- %d partitions: %s\n", p, strings.Join(parts, "; "))
	}
}

// scaleConfigs are the scaling row's four columns, in the report's order.
var scaleConfigs = []struct {
	cfg brokerConfig
	s   side
}{{weirDurable, sideWeir}, {weirNever, sideWeir}, {kafkaDefault, sidePeer}, {kafkaFlush1, sidePeer}}
