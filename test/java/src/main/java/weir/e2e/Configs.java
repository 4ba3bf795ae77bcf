package weir.e2e;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Creates a topic with storage and compaction configs through the Java AdminClient, describes it and
 * the broker with {@code describeConfigs}, alters a topic config, a cluster-wide broker default and a
 * config of the broker itself with {@code incrementalAlterConfigs}, and describes both again.
 *
 * <p>Usage: {@code Configs BOOTSTRAP TOPIC BROKER_ID}. It prints one line per described config,
 * {@code PHASE KIND NAME=VALUE SOURCE readonly|writable}, where PHASE is {@code before} or
 * {@code after} and KIND is {@code topic} or {@code broker}, then {@code done}; it exits non-zero on any
 * error.
 */
public final class Configs {
    private Configs() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Configs BOOTSTRAP TOPIC BROKER_ID");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], broker = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            NewTopic nt = new NewTopic(topic, 1, (short) 1).configs(Map.of(
                "cleanup.policy", "compact",
                "min.compaction.lag.ms", "1000",
                "segment.jitter.ms", "5000",
                "preallocate", "true",
                "file.delete.delay.ms", "0"));
            admin.createTopics(List.of(nt)).all().get(60, TimeUnit.SECONDS);
            ConfigResource t = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, broker);
            ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
            print(admin, "before", t, b);
            admin.incrementalAlterConfigs(Map.of(
                t, List.of(new AlterConfigOp(new ConfigEntry("min.cleanable.dirty.ratio", "0.2"), AlterConfigOp.OpType.SET)),
                cluster, List.of(new AlterConfigOp(new ConfigEntry("log.retention.ms", "3600000"), AlterConfigOp.OpType.SET))
            )).all().get(60, TimeUnit.SECONDS);
            admin.incrementalAlterConfigs(Map.of(
                b, List.of(new AlterConfigOp(new ConfigEntry("log.segment.bytes", "1048576"), AlterConfigOp.OpType.SET))
            )).all().get(60, TimeUnit.SECONDS);
            print(admin, "after", t, b);
        }
        System.out.println("done");
    }

    private static void print(Admin admin, String phase, ConfigResource t, ConfigResource b) throws Exception {
        Map<ConfigResource, Config> got = admin.describeConfigs(List.of(t, b), new DescribeConfigsOptions().includeSynonyms(true))
            .all().get(60, TimeUnit.SECONDS);
        for (Map.Entry<ConfigResource, Config> e : got.entrySet()) {
            String kind = e.getKey().type() == ConfigResource.Type.TOPIC ? "topic" : "broker";
            Collection<ConfigEntry> entries = e.getValue().entries();
            for (ConfigEntry c : entries) {
                System.out.println(phase + " " + kind + " " + c.name() + "=" + c.value() + " " + c.source()
                    + " " + (c.isReadOnly() ? "readonly" : "writable"));
            }
        }
    }
}
