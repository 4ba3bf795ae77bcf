package weir.e2e;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Collectors;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Copies the n records of an input topic to an output topic in three steps with the Java client, then
 * reads the output back with a read_committed consumer and lists the group's committed offsets.
 *
 * <p>Usage: {@code TxnCopy BOOTSTRAP IN OUT GROUP MODE N}. In mode {@code txn} the producer is
 * transactional: the first half of the input is copied in a committed transaction, then every input
 * record is sent as {@code aborted-VALUE} in an aborted transaction, then the second half is copied in
 * a committed transaction; each transaction carries the consumer's offsets through
 * {@code sendOffsetsToTransaction} with the consumer's group metadata. In mode {@code plain} the
 * producer is only idempotent, the two halves are sent and flushed and the offsets committed with
 * {@code commitSync}, and there is nothing to abort: the same path without transactions.
 *
 * <p>It prints {@code out VALUE} for every record the read_committed reader sees, {@code offset TOPIC
 * PARTITION OFFSET} for every offset the group has committed, then {@code done}; it exits non-zero on
 * any error. Every client also takes the properties of the file {@code WEIR_CLIENT_CONFIG} names.
 */
public final class TxnCopy {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private TxnCopy() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: TxnCopy BOOTSTRAP IN OUT GROUP txn|plain N");
            System.exit(2);
        }
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], mode = args[4];
        int n = Integer.parseInt(args[5]);
        boolean txn = mode.equals("txn");

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group));
             KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap, txn ? group + "-txn" : null))) {
            consumer.subscribe(List.of(in));
            List<ConsumerRecord<String, String>> input = readN(consumer, n);
            if (txn) {
                producer.initTransactions();
            }
            List<ConsumerRecord<String, String>> first = input.subList(0, n / 2);
            List<ConsumerRecord<String, String>> second = input.subList(n / 2, n);

            copy(producer, consumer, out, first, offsetsAfter(first), "copied-", txn);
            if (txn) {
                producer.beginTransaction();
                for (ConsumerRecord<String, String> r : input) {
                    producer.send(new ProducerRecord<>(out, r.key(), "aborted-" + r.value()));
                }
                producer.sendOffsetsToTransaction(offsetsAfter(input), consumer.groupMetadata());
                producer.flush();
                producer.abortTransaction();
            }
            copy(producer, consumer, out, second, offsetsAfter(input), "copied-", txn);
        }

        for (String value : readCommitted(bootstrap, out)) {
            System.out.println("out " + value);
        }
        try (Admin admin = Admin.create(clientProps(bootstrap))) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                System.out.println("offset " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset());
            }
        }
        System.out.println("done");
    }

    /** Sends records as prefix+value with their keys and commits offsets with them, in one transaction if txn. */
    private static void copy(KafkaProducer<String, String> producer, KafkaConsumer<String, String> consumer, String out,
                             List<ConsumerRecord<String, String>> records, Map<TopicPartition, OffsetAndMetadata> offsets,
                             String prefix, boolean txn) {
        if (txn) {
            producer.beginTransaction();
        }
        for (ConsumerRecord<String, String> r : records) {
            producer.send(new ProducerRecord<>(out, r.key(), prefix + r.value()));
        }
        if (txn) {
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
        } else {
            producer.flush();
            consumer.commitSync(offsets);
        }
    }

    /** Polls the group's consumer until it has n records, or fails after TIMEOUT. */
    private static List<ConsumerRecord<String, String>> readN(KafkaConsumer<String, String> consumer, int n) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (got.size() < n) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("read " + got.size() + " of " + n + " input records in " + TIMEOUT);
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                got.add(r);
            }
        }
        if (got.size() != n) {
            throw new IllegalStateException("read " + got.size() + " input records, want " + n);
        }
        return got;
    }

    /** The offsets one past the last of records, per partition. */
    private static Map<TopicPartition, OffsetAndMetadata> offsetsAfter(List<ConsumerRecord<String, String>> records) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
            out.merge(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1),
                (a, b) -> a.offset() >= b.offset() ? a : b);
        }
        return out;
    }

    /** Reads every partition of topic from the start to its last stable offset with a read_committed consumer. */
    private static List<String> readCommitted(String bootstrap, String topic) throws IOException {
        Properties p = clientProps(bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = c.partitionsFor(topic, TIMEOUT).stream()
                .map(pi -> new TopicPartition(topic, pi.partition())).collect(Collectors.toList());
            c.assign(parts);
            c.seekToBeginning(parts);
            Map<TopicPartition, Long> ends = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
            ends.putAll(c.endOffsets(parts, TIMEOUT));
            List<String> values = new ArrayList<>();
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (ends.entrySet().stream().anyMatch(e -> c.position(e.getKey(), TIMEOUT) < e.getValue())) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("read_committed reader did not reach " + ends + " in " + TIMEOUT);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
            return values;
        }
    }

    /**
     * The settings every client of this program shares: the bootstrap servers, and the properties file
     * the environment variable {@code WEIR_CLIENT_CONFIG} names, if any (security.protocol, sasl.*,
     * ssl.*, as a secure listener needs them).
     */
    private static Properties clientProps(String bootstrap) throws IOException {
        Properties p = new Properties();
        String file = System.getenv("WEIR_CLIENT_CONFIG");
        if (file != null && !file.isEmpty()) {
            try (Reader r = Files.newBufferedReader(Path.of(file))) {
                p.load(r);
            }
        }
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return p;
    }

    private static Properties consumerProps(String bootstrap, String group) throws IOException {
        Properties p = clientProps(bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    private static Properties producerProps(String bootstrap, String transactionalId) throws IOException {
        Properties p = clientProps(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        if (transactionalId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }
        return p;
    }
}
