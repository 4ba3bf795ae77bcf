package weir.e2e;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count: the lines of an input topic are split into lower-case words, counted per
 * word (through a repartition topic and a changelogged store), and every new count is written to the
 * output topic as the word's key and the count in decimal as the value.
 *
 * <p>Usage: {@code WordCount BOOTSTRAP APP_ID IN OUT GUARANTEE REPLICATION STATE_DIR}, GUARANTEE being
 * {@code exactly_once_v2} or {@code at_least_once}. The record cache is off, so each input word yields
 * exactly one output record: under exactly-once the values of one word are 1, 2, 3, ... with no
 * repeat, whatever crashed meanwhile.
 *
 * <p>It prints {@code state NEW_STATE} on every state change (the test waits for {@code state
 * RUNNING}) and {@code error ...} for an exception that stops a stream thread. It runs until its
 * standard input closes, then closes the Streams instance, prints {@code closed} and exits.
 */
public final class WordCount {
    private WordCount() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: WordCount BOOTSTRAP APP_ID IN OUT GUARANTEE REPLICATION STATE_DIR");
            System.exit(2);
        }
        String in = args[2], out = args[3];
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, args[5]);
        p.put(StreamsConfig.topicPrefix("min.insync.replicas"), Integer.parseInt(args[5]) >= 3 ? "2" : "1");
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // Streams leaves no group on close, so a restarted instance waits for the old member's session
        // to expire: 6s instead of Streams' 45s.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);

        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(in)
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
            .filter((k, w) -> !w.isEmpty())
            .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(String::valueOf)
            .to(out, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> System.out.println("state " + now));
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("error " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        try (BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            while (stdin.readLine() != null) {
                // Nothing to do with the lines: the program runs until standard input closes.
            }
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("closed");
    }
}
