"""Round trip of topic configs through kafka-python's KafkaAdminClient.

Usage: kafka_python_configs.py BOOTSTRAP TOPIC NAME=VALUE... creates TOPIC with the given configs,
describes it (DescribeConfigs), sets each config to the value after the colon in NAME=VALUE:OTHER with
AlterConfigs, and describes it again. It prints "before NAME=VALUE" and "after NAME=VALUE" for each
config named, then "done"; any error exits non-zero.
"""
import sys

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic


def describe(admin, topic, names):
    resp = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    out = {}
    for r in resp:
        for res in r.resources:
            error_code, error_message = res[0], res[1]
            if error_code != 0:
                raise SystemExit("describe %s: error %d %s" % (topic, error_code, error_message))
            for entry in res[4]:
                out[entry[0]] = entry[1]
    return [(n, out.get(n)) for n in names]


def main():
    bootstrap, topic, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
    first, second = {}, {}
    for p in pairs:
        name, values = p.split("=", 1)
        first[name], second[name] = values.split(":", 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs=first)])
    for name, value in describe(admin, topic, list(first)):
        print("before %s=%s" % (name, value))
    resp = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=second)])
    for res in resp.resources:
        if res[0] != 0:
            raise SystemExit("alter %s: error %d %s" % (topic, res[0], res[1]))
    for name, value in describe(admin, topic, list(first)):
        print("after %s=%s" % (name, value))
    admin.close()
    print("done")


if __name__ == "__main__":
    main()
