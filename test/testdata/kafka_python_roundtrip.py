"""Produce 100 records to partition 0 of a topic with kafka-python (acks='all'), then read them back
with a consumer that has no group (assign + seek_to_beginning). Prints one line per record read:
"<offset> <value>". The acknowledged offsets must be 0..99 in produce order. Exits non-zero with a
message on stderr when anything goes wrong.

Usage: kafka_python_roundtrip.py BOOTSTRAP TOPIC

The environment variable KAFKA_PYTHON_CONFIG may hold a JSON object of more client settings
(security_protocol, sasl_mechanism, sasl_plain_username, ...), given to the producer and the consumer.
"""

import json
import os
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

COUNT = 100


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    extra = json.loads(os.environ.get("KAFKA_PYTHON_CONFIG", "{}"))

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        max_block_ms=15000,
        request_timeout_ms=20000,
        **extra,
    )
    futures = [
        producer.send(topic, key=b"k%d" % (i % 3), value=b"py-%03d" % i, partition=0)
        for i in range(COUNT)
    ]
    producer.flush(timeout=30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(timeout=10)
    # The topic is fresh: record i must be acknowledged at offset i, where the consumer reads it.
    if offsets != list(range(COUNT)):
        sys.exit("acknowledged offsets are not 0..%d in produce order: %r" % (COUNT - 1, offsets))

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
        **extra,
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < COUNT and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    for r in got:
        print(r.offset, r.value.decode())
    if len(got) < COUNT:
        sys.exit("read %d of %d records within 30 s" % (len(got), COUNT))


if __name__ == "__main__":
    main()
