package weir.e2e;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KafkaConsumer of the KIP-848 group protocol ({@code group.protocol=consumer}) that commits, with
 * {@code commitSync}, the records of each poll before it polls again, so that a partition it gives up has
 * nothing read and not committed.
 *
 * <p>Usage: {@code Kip848Consumer BOOTSTRAP TOPIC GROUP NAME [ASSIGNOR]}. With the system property
 * {@code weir.group.protocol=classic} it is a consumer of the classic protocol instead (its default
 * assignors, range then cooperative-sticky), for the tests of the online upgrade; with
 * {@code weir.group.instance.id=ID} it is a static member of that instance id. It prints {@code assigned P...}
 * and {@code revoked P...} (or {@code lost P...}) as its assignment changes, {@code read P OFFSET VALUE}
 * for each record once its offset is committed, and {@code closed} once it has left the group, which it
 * does when its standard input has a line {@code stop} or ends. It exits non-zero on any error.
 */
public final class Kip848Consumer {
    private Kip848Consumer() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 4 && args.length != 5) {
            System.err.println("usage: Kip848Consumer BOOTSTRAP TOPIC GROUP NAME [ASSIGNOR]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, System.getProperty("weir.group.protocol", "consumer"));
        String instance = System.getProperty("weir.group.instance.id");
        if (instance != null) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        }
        if (args.length == 5) {
            props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[4]);
        }
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        AtomicBoolean stop = StopOnStdin.watch();

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    print("revoked", parts);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    print("assigned", parts);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    print("lost", parts);
                }
            });
            while (!stop.get()) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                consumer.commitSync(offsets);
                StringBuilder sb = new StringBuilder();
                for (ConsumerRecord<String, String> r : recs) {
                    sb.append("read ").append(r.partition()).append(' ').append(r.offset()).append(' ').append(r.value()).append('\n');
                }
                System.out.print(sb);
                System.out.flush();
            }
        }
        System.out.println("closed");
        System.out.flush();
    }

    private static void print(String what, Collection<TopicPartition> parts) {
        TreeSet<Integer> ps = new TreeSet<>();
        for (TopicPartition tp : parts) {
            ps.add(tp.partition());
        }
        StringBuilder sb = new StringBuilder(what);
        for (int p : ps) {
            sb.append(' ').append(p);
        }
        System.out.println(sb);
        System.out.flush();
    }
}
