"""Config admin calls through librdkafka, by the confluent-kafka package's AdminClient.

Usage: confluent_kafka_configs.py BOOTSTRAP < PLAN. PLAN is a JSON object:
  topic         the topic to create
  create        {name: value}: the topic's configs, given to create_topics
  alter         [[op, name, value]]: one incremental_alter_configs on the topic, op SET or DELETE
  broker_alter  [[resource, name, value]]: incremental_alter_configs SET on the broker resource named
                resource, a broker id (librdkafka refuses the empty name of the cluster-wide default)
  broker        the broker id whose BROKER resource describe_configs lists
  bad           [[name, value]]: each tried by create_topics on a new topic and by
                incremental_alter_configs on the topic, both expected to be refused

It prints one JSON object: "created", "altered" and "final" map each config of the topic, described
after create_topics, after the topic's alter and after the broker alters, to [value, source];
"broker" maps each config of the broker to [value, source, read_only]; "refused" lists
[call, name, value, error name, error message] for each bad value, call being "create" or "alter".
A call that fails where it should not exits non-zero.
"""
import json
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ResourceType)


def describe(admin, restype, name):
    res = ConfigResource(restype, name)
    return admin.describe_configs([res], request_timeout=30)[res].result()


def incremental(admin, restype, name, entries):
    res = ConfigResource(restype, name, incremental_configs=entries)
    admin.incremental_alter_configs([res], request_timeout=30)[res].result()


def topic_view(admin, topic):
    return {n: [e.value, ConfigSource(e.source).name] for n, e in describe(admin, ResourceType.TOPIC, topic).items()}


def refusal(call, name, value, exc):
    err = exc.args[0]
    return [call, name, value, err.name(), err.str()]


def main():
    bootstrap = sys.argv[1]
    plan = json.load(sys.stdin)
    topic = plan["topic"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = {}

    admin.create_topics([NewTopic(topic, 1, 1, config=plan["create"])], request_timeout=30)[topic].result()
    out["created"] = topic_view(admin, topic)

    ops = {"SET": AlterConfigOpType.SET, "DELETE": AlterConfigOpType.DELETE}
    incremental(admin, ResourceType.TOPIC, topic,
                [ConfigEntry(n, v, incremental_operation=ops[op]) for op, n, v in plan["alter"]])
    out["altered"] = topic_view(admin, topic)

    for resource, n, v in plan["broker_alter"]:
        incremental(admin, ResourceType.BROKER, resource,
                    [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET)])
    out["final"] = topic_view(admin, topic)
    out["broker"] = {n: [e.value, ConfigSource(e.source).name, e.is_read_only]
                     for n, e in describe(admin, ResourceType.BROKER, plan["broker"]).items()}

    out["refused"] = []
    for i, (n, v) in enumerate(plan["bad"]):
        bad_topic = "%s-bad-%d" % (topic, i)
        try:
            admin.create_topics([NewTopic(bad_topic, 1, 1, config={n: v})], request_timeout=30)[bad_topic].result()
            raise SystemExit("create_topics with %s=%s succeeded" % (n, v))
        except KafkaException as e:
            out["refused"].append(refusal("create", n, v, e))
        try:
            incremental(admin, ResourceType.TOPIC, topic,
                        [ConfigEntry(n, v, incremental_operation=AlterConfigOpType.SET)])
            raise SystemExit("incremental_alter_configs with %s=%s succeeded" % (n, v))
        except KafkaException as e:
            out["refused"].append(refusal("alter", n, v, e))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
