"""A librdkafka share consumer (confluent-kafka's ShareConsumer, KIP-932 preview) with explicit acknowledgement.

Usage: confluent_share_consumer.py BOOTSTRAP TOPIC GROUP NAME. It does what weir.e2e.ShareConsumer does
and prints the same lines (test/share_java_test.go reads both): each record's value decides its fate
(a value ending in "r" is rejected, one ending in "l" is released on its first delivery and accepted on a
later one, any other is accepted); after each poll it acknowledges every record and commits the
acknowledgements with commit_sync. For each partition whose commit succeeded it prints
"accept|release|reject P OFFSET DELIVERY_COUNT VALUE" per record, for one whose commit failed
"failed P ERROR". It prints "closed" once it has left the group, which it does when its standard input
has a line "stop" or ends.
"""
import sys
import threading

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

bootstrap, topic, group, name = sys.argv[1:5]
stop = threading.Event()


def watch_stdin():
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


threading.Thread(target=watch_stdin, daemon=True).start()


def fate(value, count):
    if value.endswith("r"):
        return AcknowledgeType.REJECT
    if value.endswith("l") and count <= 1:
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


c = ShareConsumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "client.id": name,
    "share.acknowledgement.mode": "explicit",
})
c.subscribe([topic])
while not stop.is_set():
    msgs = c.poll(0.2)
    if not msgs:
        continue
    lines = {}
    for m in msgs:
        if m.error():
            raise KafkaException(m.error())
        value = m.value().decode()
        count = m.delivery_count() or 0
        kind = fate(value, count)
        c.acknowledge(m, kind)
        lines.setdefault(m.partition(), []).append(
            "%s %d %d %d %s" % (kind.name.lower(), m.partition(), m.offset(), count, value))
    out = []
    for tp, err in c.commit_sync().items():
        if err is not None:
            out.append("failed %d %s" % (tp.partition, err))
            continue
        out.extend(lines.get(tp.partition, []))
    if out:
        print("\n".join(out), flush=True)
c.close()
print("closed", flush=True)
