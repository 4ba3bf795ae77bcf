package main

import (
	"context"
	"fmt"
	"strings"
)

// Workload 5: three nodes on loopback, one partition (one stream) replicated three times. weir: RF=3,
// min.insync.replicas=2, acks=all (the leader acknowledges once every ISR member has the record);
// JetStream: Replicas 3 (the leader acknowledges once a majority of the stream's Raft group has it).

const (
	clusterNodes = 3
	clusterRF    = 3
	minISR       = "2"
)

// weirClusterTopic creates a workload 5 topic for pairing p on c.
func weirClusterTopic(ctx context.Context, c *weirCluster, topic string, p *pairing) error {
	isr := minISR
	configs := map[string]*string{"min.insync.replicas": &isr}
	for i := 0; i+1 < len(p.weirArgs); i += 2 {
		if p.weirArgs[i] == "--topic-config" {
			k, v, _ := strings.Cut(p.weirArgs[i+1], "=")
			configs[k] = &v
		}
	}
	return c.createTopic(ctx, topic, clusterRF, configs)
}

// calibrateCluster measures each pairing's maximum three-node publish rate once on both systems;
// workload 5's latency runs at half the lower of the two.
func (h *harness) calibrateCluster(ctx context.Context) error {
	c, err := startWeirCluster(ctx, h.weirBin, h.fresh("weir3"), clusterNodes)
	if err != nil {
		return err
	}
	defer c.stop()
	for _, p := range h.pairs {
		topic := "cal5-" + p.name
		if err := weirClusterTopic(ctx, c, topic, p); err != nil {
			return err
		}
		r, err := c.target(h.weirBin).bench(ctx, "produce", h.maxArgs(topic)...)
		if err != nil {
			return err
		}
		js, _, err := h.natsClusterPublish(ctx, p, 0)
		if err != nil {
			return err
		}
		p.rate5 = min(r.RecordsPerSec, js) / 2
		h.progress("  three nodes, %s: weir %.0f/s, JetStream %.0f/s: workload 5 latency at %.0f/s",
			p.name, r.RecordsPerSec, js, p.rate5)
	}
	return nil
}

// weirClusterRound runs workload 5 on a fresh three-node weir cluster: for each pairing, produce as
// fast as possible, then at the calibrated half rate for latency.
func (h *harness) weirClusterRound(ctx context.Context) error {
	c, err := startWeirCluster(ctx, h.weirBin, h.fresh("weir3"), clusterNodes)
	if err != nil {
		return err
	}
	defer c.stop()
	t := c.target(h.weirBin)
	for _, p := range h.pairs {
		maxTopic, rateTopic := "w5-"+p.name, "w5r-"+p.name
		for _, topic := range []string{maxTopic, rateTopic} {
			if err := weirClusterTopic(ctx, c, topic, p); err != nil {
				return err
			}
		}
		r, err := t.bench(ctx, "produce", h.maxArgs(maxTopic)...)
		if err != nil {
			return err
		}
		h.table.add("w5-"+p.name, sideWeir, r.RecordsPerSec)
		r, err = t.bench(ctx, "produce", "--topic", rateTopic, "--duration", h.sz.latDur.String(), "--rate", rateArg(p.rate5))
		if err != nil {
			return err
		}
		h.table.add("w5p50-"+p.name, sideWeir, r.Latency.P50)
		h.table.add("w5p99-"+p.name, sideWeir, r.Latency.P99)
	}
	return nil
}

// natsClusterRound runs workload 5 on a fresh three-server JetStream cluster per pairing (the sync
// interval is a server setting).
func (h *harness) natsClusterRound(ctx context.Context) error {
	for _, p := range h.pairs {
		rate, lat, err := h.natsClusterPublish(ctx, p, p.rate5)
		if err != nil {
			return err
		}
		h.table.add("w5-"+p.name, sidePeer, rate)
		h.table.add("w5p50-"+p.name, sidePeer, lat.quantile(0.5))
		h.table.add("w5p99-"+p.name, sidePeer, lat.quantile(0.99))
	}
	return nil
}

// natsClusterPublish starts a three-server cluster for pairing p, publishes as fast as possible to an
// R3 stream and returns that rate; with rate > 0 it then publishes at rate to a second R3 stream and
// returns those ack latencies too.
func (h *harness) natsClusterPublish(ctx context.Context, p *pairing, rate float64) (float64, *samples, error) {
	c, err := startNATSCluster(ctx, h.natsBin, h.fresh("nats3"), clusterNodes, p.natsAlways)
	if err != nil {
		return 0, nil, err
	}
	defer c.stop()
	cl, err := c.createStream(ctx, "w5", clusterRF)
	if err != nil {
		return 0, nil, err
	}
	maxRate, _, err := cl.publish(ctx, "w5", h.sz.maxRecords, h.sz.dur, 0)
	cl.close()
	if err != nil || rate == 0 {
		return maxRate, nil, err
	}
	cl, err = c.createStream(ctx, "w5r", clusterRF)
	if err != nil {
		return 0, nil, err
	}
	defer cl.close()
	_, lat, err := cl.publish(ctx, "w5r", 0, h.sz.latDur, rate)
	if err != nil {
		return 0, nil, fmt.Errorf("publish at %.0f/s: %w", rate, err)
	}
	return maxRate, lat, nil
}
