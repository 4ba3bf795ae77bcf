package weir.e2e;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Sets a share group's configs with the AdminClient's {@code incrementalAlterConfigs} on the GROUP
 * resource, describes them, then has a KafkaShareConsumer (explicit acknowledgement) take one record,
 * renew its lock (KIP-1222's {@code AcknowledgeType.RENEW}) and, when the renewal succeeded, accept it
 * when the next poll hands it back (the Java client returns a renewed record again), committing each
 * with {@code commitSync}. After a renewal that failed the client no longer lets the record be
 * acknowledged; closing the consumer releases it.
 *
 * <p>Usage: {@code ShareRenew BOOTSTRAP TOPIC GROUP NAME=VALUE...}. It prints {@code config NAME VALUE
 * SOURCE} for each config named, then {@code renew RESULT} and, after a renewal that succeeded,
 * {@code accept DELIVERY_COUNT RESULT}, where RESULT is
 * {@code ok} or the simple name of the commit's exception, then {@code done}; it exits non-zero on any
 * other error.
 */
public final class ShareRenew {
    private ShareRenew() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: ShareRenew BOOTSTRAP TOPIC GROUP NAME=VALUE...");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], group = args[2];
        Map<String, String> set = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            set.put(kv[0], kv[1]);
        }
        Properties aprops = new Properties();
        aprops.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        try (Admin admin = Admin.create(aprops)) {
            List<AlterConfigOp> ops = set.entrySet().stream()
                .map(e -> new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET))
                .toList();
            admin.incrementalAlterConfigs(Map.of(res, ops)).all().get(60, TimeUnit.SECONDS);
            var described = admin.describeConfigs(List.of(res)).all().get(60, TimeUnit.SECONDS).get(res);
            for (String name : set.keySet().stream().sorted().toList()) {
                ConfigEntry e = described.get(name);
                System.out.println("config " + name + ' ' + e.value() + ' ' + e.source());
            }
        }

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            ConsumerRecord<String, String> rec = null;
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (rec == null) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no record in 60 s");
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    if (rec == null) {
                        rec = r;
                    } else {
                        consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    }
                }
            }
            consumer.acknowledge(rec, AcknowledgeType.RENEW);
            String renew = result(consumer.commitSync());
            System.out.println("renew " + renew);
            if (renew.equals("ok")) {
                ConsumerRecord<String, String> again = null;
                while (again == null) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("the renewed record did not come back in 60 s");
                    }
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        if (r.offset() == rec.offset() && r.partition() == rec.partition()) {
                            again = r;
                        } else {
                            consumer.acknowledge(r, AcknowledgeType.RELEASE);
                        }
                    }
                }
                consumer.acknowledge(again, AcknowledgeType.ACCEPT);
                System.out.println("accept " + again.deliveryCount().orElse((short) 0) + ' ' + result(consumer.commitSync()));
            }
        }
        System.out.println("done");
        System.out.flush();
    }

    /** result is "ok", or the simple name of the first exception of a commit. */
    private static String result(Map<TopicIdPartition, Optional<KafkaException>> results) {
        for (Optional<KafkaException> e : results.values()) {
            if (e.isPresent()) {
                return e.get().getClass().getSimpleName();
            }
        }
        return results.isEmpty() ? "empty" : "ok";
    }
}
