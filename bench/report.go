package main

import (
	"fmt"
	"html"
	"os/exec"
	"strings"
	"time"
)

type side int

const (
	sideWeir side = iota
	sidePeer
)

// table holds every round's value of every measurement, by key and side.
type table struct{ vals map[string][2][]float64 }

func newTable() *table { return &table{vals: map[string][2][]float64{}} }

func (t *table) add(key string, s side, v float64) {
	e := t.vals[key]
	e[s] = append(e[s], v)
	t.vals[key] = e
}

// get returns the median of one side and every round's value; ok is false when nothing was measured.
func (t *table) get(key string, s side) (float64, []float64, bool) {
	v := t.vals[key][s]
	if len(v) == 0 {
		return 0, nil, false
	}
	return median(v), v, true
}

// row is one line of the results table: weir's key against the peer's key (often the same).
type row struct {
	workload, metric, unit string
	weirKey, peerKey       string
	peer                   string
	lowerBetter            bool
	target                 string
}

func rows() []row {
	var rs []row
	for _, p := range []struct{ name, label, w1target, w5target, disktarget string }{
		{"durable", "durable", "≥ 50×", "≥ 3×", "≥ 0.4×"},
		{"fast", "`never` vs JS default", "", "", ""},
	} {
		rs = append(rs,
			row{"1 produce, " + p.label, "records/s", "rec/s", "w1-" + p.name, "w1-" + p.name, "JetStream", false, p.w1target},
			row{"1 produce, " + p.label + ", vs the disk", "write bandwidth", "MB/s", "w1MBs-" + p.name, "disk-" + p.name, diskPeer, false, p.disktarget},
			row{"2 produce at ½ max, " + p.label, "p50 ack", "ms", "w2p50-" + p.name, "w2p50-" + p.name, "JetStream", true, ""},
			row{"2 produce at ½ max, " + p.label, "p99 ack", "ms", "w2p99-" + p.name, "w2p99-" + p.name, "JetStream", true, ""},
			row{"4 end to end, " + p.label, "p50", "ms", "w4p50-" + p.name, "w4p50-" + p.name, "JetStream", true, ""},
			row{"4 end to end, " + p.label, "p99", "ms", "w4p99-" + p.name, "w4p99-" + p.name, "JetStream", true, ""},
			row{"5 three nodes RF=3 acks=all vs R3, " + p.label, "records/s", "rec/s", "w5-" + p.name, "w5-" + p.name, "JetStream R3", false, p.w5target},
			row{"5 three nodes at ½ max, " + p.label, "p50 ack", "ms", "w5p50-" + p.name, "w5p50-" + p.name, "JetStream R3", true, ""},
			row{"5 three nodes at ½ max, " + p.label, "p99 ack", "ms", "w5p99-" + p.name, "w5p99-" + p.name, "JetStream R3", true, ""},
		)
	}
	return append(rs,
		row{"1 produce, durable weir vs JS default", "records/s", "rec/s", "w1-durable", "w1-fast", "JetStream", false, "≥ 3×"},
		row{"2 p99 at ½ max, durable weir vs JS default", "p99 ack", "ms", "w2p99-durable", "w2p99-fast", "JetStream", true, "≤ 1×"},
		row{"4 e2e p99, durable weir vs JS default", "p99", "ms", "w4p99-durable", "w4p99-fast", "JetStream", true, "≤ 1×"},
		row{"5 three nodes, durable weir RF=3 vs JS R3 default", "records/s", "rec/s", "w5-durable", "w5-fast", "JetStream R3", false, ""},
		row{"3 consume from start (weir data durable, JS default)", "records/s", "rec/s", "w3", "w3", "JetStream", false, "≥ 3×"},
		row{"1 produce, durable, broker CPU per GB produced", "CPU seconds", "s/GB", "cpugb-w1-durable", "cpugb-w1-durable", "JetStream", true, ""},
		row{"1 produce, `never` vs JS default, broker CPU per GB produced", "CPU seconds", "s/GB", "cpugb-w1-fast", "cpugb-w1-fast", "JetStream", true, ""},
		row{"3 produce the records to consume (weir durable, JS default), broker CPU per GB", "CPU seconds", "s/GB", "cpugb-w3produce", "cpugb-w3produce", "JetStream", true, ""},
		row{"3 consume from start, broker CPU per GB consumed", "CPU seconds", "s/GB", "cpugb-w3", "cpugb-w3", "JetStream", true, ""},
		row{"1–4 peak RSS (weir: its round's node; JS: the default-sync server, which runs workload 3 too)", "memory", "MiB", "peakrss", "peakrss", "JetStream", true, ""},
		row{"6 scale: create 1 topic × N partitions / N streams", "seconds", "s", "w6create", "w6create", "JetStream", true, ""},
		row{"6 scale: restart until ready", "seconds", "s", "w6start", "w6start", "JetStream", true, ""},
		row{"6 scale: idle RSS after restart", "memory", "MiB", "w6rss", "w6rss", "JetStream", true, ""},
		row{"1 produce, durable weir vs kfake (no disk)", "records/s", "rec/s", "w1-durable", "fake-w1", "kfake", false, "≥ 0.8×"},
		row{"3 consume, weir vs kfake", "records/s", "rec/s", "w3", "fake-w3", "kfake", false, "≥ 1.2×"},
	)
}

// diskPeer names the disk's row: sequential 1 MiB writes and one fdatasync, measured beside weir's run.
const diskPeer = "disk, fdatasync write"

type report struct{ markdown, svg string }

func fmtVal(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func joinVals(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmtVal(x)
	}
	return strings.Join(s, " ")
}

func (h *harness) report(quick bool, hw hardware) report {
	var b strings.Builder
	mode := "full"
	if quick {
		mode = "quick (small counts: not for conclusions)"
	}
	commit, _ := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	fmt.Fprintf(&b, "# weir vs NATS JetStream, one node and three nodes (%s)\n\n", time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "- run: `cd bench && go run .%s` (%s), %d rounds A B A B (weir, JetStream, kfake, weir ×3, JetStream ×3), medians; "+
		"weir at commit %s, nats-server v2.15.3, nats.go v1.56.0, franz-go v1.22.3\n",
		map[bool]string{true: " -quick", false: ""}[quick], mode, h.rounds, strings.TrimSpace(string(commit)))
	fmt.Fprintf(&b, "- machine: %s; data folders under %s\n", machine(), h.root)
	fmt.Fprintf(&b, "- 1 KiB records; one producer (weir: franz-go, acks=all, idempotent, linger 0, 1 partition; JetStream: "+
		"PublishAsync, one file stream, %d pending max, as kgo buffers %d records); workload 1 lasts %s, the latency phases "+
		"(workloads 2, 4 and 5) %s each; `weir bench` sends one untimed warm-up record per producer first\n",
		maxPending, maxPending, h.sz.dur, h.sz.latDur)
	fmt.Fprintf(&b, "- durability: weir's default flush policy (fsync before ack, group commit) vs JetStream `sync_interval: always` "+
		"(set in the server config file's jetstream block); and weir with topic config `weir.flush.policy=never` vs JetStream's "+
		"default (sync every 2 minutes). Neither of the second pair is durable on power loss.\n")
	for _, p := range h.pairs {
		fmt.Fprintf(&b, "- workload 2 rate for %s: %.0f records/s (half the lower max in calibration); workload 4: %.0f records/s\n",
			p.name, p.rate2, p.rate4)
	}
	fmt.Fprintf(&b, "- workload 3 reads %d records; workload 6 uses %d partitions of one weir topic against %d JetStream streams "+
		"of one subject each (restart: weir until every partition answers ListOffsets, JetStream until /healthz)\n",
		h.sz.consumeN, h.sz.scaleN, h.sz.scaleN)
	fmt.Fprintf(&b, "- workload 5: three processes of each on loopback, fresh data folders, one producer to one partition / stream "+
		"(the client talks to its leader). weir: every node a controller voter and broker, RF=3, min.insync.replicas=2, acks=all "+
		"(ack once every ISR member has the record; with the default flush policy each fsyncs before it counts); JetStream: "+
		"cluster routes, a file stream with Replicas: 3 (ack once a majority of its Raft group has the message), published to on the "+
		"stream leader's server. Latency rows at half the lower three-node max of calibration:")
	for _, p := range h.pairs {
		fmt.Fprintf(&b, " %s %.0f records/s;", p.name, p.rate5)
	}
	b.WriteString(" kfake runs as its own process (`bench/kfakeserver`)\n")
	if h.sz.maxRecords > 0 {
		fmt.Fprintf(&b, "- every as-fast-as-possible produce stops after %d records (quick mode)\n", h.sz.maxRecords)
	}
	b.WriteString("\n")

	b.WriteString("| workload | metric | weir | peer | peer value | weir/peer | target | weir per round | peer per round |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---|---|---|\n")
	var bars []bar
	for _, r := range rows() {
		w, wr, okW := h.table.get(r.weirKey, sideWeir)
		p, pr, okP := h.table.get(r.peerKey, sidePeer)
		if !okW || !okP {
			continue
		}
		ratio := "–"
		if p != 0 {
			ratio = fmt.Sprintf("%.2f", w/p)
		}
		better := "higher is better"
		if r.lowerBetter {
			better = "lower is better"
		}
		fmt.Fprintf(&b, "| %s | %s (%s, %s) | %s | %s | %s | %s | %s | %s | %s |\n", r.workload, r.metric, r.unit, better,
			fmtVal(w), r.peer, fmtVal(p), ratio, r.target, joinVals(wr), joinVals(pr))
		bars = append(bars, bar{label: r.workload + ": " + r.metric + " (" + r.unit + ")", peer: r.peer, weir: w, other: p})
	}
	fmt.Fprintf(&b, "\nRaw hardware, same run: the disk's write bandwidth is in the table (%q: %d MiB written in 1 MiB blocks "+
		"with one fdatasync at the end, right before and right after each weir workload 1 run, the better of the two); "+
		"loopback TCP, one connection: **%.0f MB/s**; a 1 KiB append and its fdatasync at %d/s: "+
		"**p50 %.3g ms, p99 %.3g ms** (the floor under durable latency: a durable broker shows a record to consumers "+
		"only once it is synced). Broker CPU is utime+stime of the broker process from /proc/PID/stat over the phase, per GB of "+
		"record values (10^9 bytes); peak RSS is VmHWM from /proc/PID/status at the end of the single-node workloads.\n", diskPeer, h.sz.diskBytes>>20, hw.tcpMBs, e2eRate, hw.fsyncP50, hw.fsyncP99)
	b.WriteString("\n![weir vs peer](CHART)\n")
	return report{markdown: b.String(), svg: chart(bars)}
}

// bar is one pair of bars in the chart.
type bar struct {
	label, peer string
	weir, other float64
}

// chart draws each measurement as two horizontal bars (weir and its peer) scaled to the larger of the
// two, with the values written beside them, so rows of different units share one picture.
func chart(bars []bar) string {
	const (
		width, labelH, barH, gap, left, barMax = 900, 18, 14, 14, 70, 640
	)
	rowH := labelH + 2*barH + gap
	height := 40 + len(bars)*rowH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	b.WriteString(`<text x="10" y="20" font-size="14" font-weight="bold">weir (blue) vs peer (grey), medians; each pair scaled to its larger value</text>` + "\n")
	for i, br := range bars {
		y := 40 + i*rowH
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+12, html.EscapeString(br.label))
		top := max(br.weir, br.other)
		for j, v := range []struct {
			name  string
			val   float64
			color string
		}{{"weir", br.weir, "#1f77b4"}, {br.peer, br.other, "#999999"}} {
			by := y + labelH + j*barH
			w := 0.0
			if top > 0 {
				w = v.val / top * barMax
			}
			fmt.Fprintf(&b, `<text x="10" y="%d" font-size="11">%s</text>`+"\n", by+11, html.EscapeString(v.name))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, by, w, barH-2, v.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%s</text>`+"\n", float64(left)+w+4, by+11, fmtVal(v.val))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
