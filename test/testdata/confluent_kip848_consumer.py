"""A librdkafka consumer (confluent-kafka) of the KIP-848 group protocol (group.protocol=consumer).

Usage: confluent_kip848_consumer.py BOOTSTRAP TOPIC GROUP NAME. It prints the lines
weir.e2e.Kip848Consumer prints (test/kip848_test.go reads both): "assigned P..." and "revoked P..."
(or "lost P...") as its assignment changes, "read P OFFSET VALUE" for each record once its offset is
committed (synchronously, before the next poll), and "closed" once it has left the group, which it
does when its standard input has a line "stop" or ends.
"""
import sys
import threading

from confluent_kafka import Consumer, KafkaException

bootstrap, topic, group, name = sys.argv[1:5]
stop = threading.Event()


def watch_stdin():
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


threading.Thread(target=watch_stdin, daemon=True).start()


def show(what, parts):
    print(" ".join([what] + [str(p.partition) for p in sorted(parts, key=lambda p: p.partition)]), flush=True)


c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "client.id": name,
    "group.protocol": "consumer",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
})
c.subscribe([topic],
            on_assign=lambda _, parts: show("assigned", parts),
            on_revoke=lambda _, parts: show("revoked", parts),
            on_lost=lambda _, parts: show("lost", parts))
while not stop.is_set():
    msg = c.poll(0.2)
    if msg is None:
        continue
    if msg.error():
        raise KafkaException(msg.error())
    c.commit(message=msg, asynchronous=False)
    print("read %d %d %s" % (msg.partition(), msg.offset(), msg.value().decode()), flush=True)
c.close()
print("closed", flush=True)
