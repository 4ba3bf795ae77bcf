package weir.e2e;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KafkaShareConsumer (KIP-932) with explicit acknowledgement. Each record's value decides its fate: a
 * value ending in {@code r} is rejected; one ending in {@code l} is released on its first delivery and
 * accepted on a later one; one ending in {@code h} on its first delivery is held: the consumer prints
 * {@code held P OFFSET DELIVERY_COUNT VALUE} and stops there, acknowledging nothing, until it is killed
 * (a consumer that hangs or crashes holding records); any other is accepted. After each poll it
 * acknowledges every record and commits the acknowledgements with {@code commitSync}.
 *
 * <p>Usage: {@code ShareConsumer BOOTSTRAP TOPIC GROUP NAME}. For each partition whose commit succeeded
 * it prints {@code accept|release|reject P OFFSET DELIVERY_COUNT VALUE} per record; for one whose commit
 * failed, {@code failed P ERROR}. It prints {@code closed} once it has left the group, which it does when
 * its standard input has a line {@code stop} or ends. It exits non-zero on any other error.
 */
public final class ShareConsumer {
    private ShareConsumer() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: ShareConsumer BOOTSTRAP TOPIC GROUP NAME");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        props.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        AtomicBoolean stop = StopOnStdin.watch();

        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[1]));
            while (!stop.get()) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                Map<Integer, List<String>> lines = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    short count = r.deliveryCount().orElse((short) 0);
                    if (r.value().endsWith("h") && count <= 1) {
                        System.out.println("held " + r.partition() + ' ' + r.offset() + ' ' + count + ' ' + r.value());
                        System.out.flush();
                        Thread.sleep(Long.MAX_VALUE);
                    }
                    AcknowledgeType type = fate(r.value(), count);
                    consumer.acknowledge(r, type);
                    lines.computeIfAbsent(r.partition(), p -> new ArrayList<>()).add(
                        type.name().toLowerCase() + ' ' + r.partition() + ' ' + r.offset() + ' ' + count + ' ' + r.value());
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
                StringBuilder sb = new StringBuilder();
                for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
                    int p = e.getKey().partition();
                    if (e.getValue().isPresent()) {
                        sb.append("failed ").append(p).append(' ').append(e.getValue().get()).append('\n');
                        continue;
                    }
                    for (String l : lines.getOrDefault(p, List.of())) {
                        sb.append(l).append('\n');
                    }
                }
                System.out.print(sb);
                System.out.flush();
            }
        }
        System.out.println("closed");
        System.out.flush();
    }

    /** fate is what the consumer does with a record of value at its delivery count. */
    private static AcknowledgeType fate(String value, short count) {
        if (value.endsWith("r")) {
            return AcknowledgeType.REJECT;
        }
        if (value.endsWith("l") && count <= 1) {
            return AcknowledgeType.RELEASE;
        }
        return AcknowledgeType.ACCEPT;
    }
}
