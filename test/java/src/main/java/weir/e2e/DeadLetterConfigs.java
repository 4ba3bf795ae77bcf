package weir.e2e;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Exercises KIP-1191's dead-letter safeguards through the Java AdminClient: creates two topics, one
 * with {@code errors.deadletterqueue.group.enable=true}, then sets a share group's
 * {@code errors.deadletterqueue.topic.name} with {@code incrementalAlterConfigs} on the GROUP resource
 * to each name given, and describes the group's config, the opted-in topic's flag and the broker's
 * {@code errors.deadletterqueue.topic.name.prefix}.
 *
 * <p>Usage: {@code DeadLetterConfigs BOOTSTRAP BROKER_ID GROUP PLAIN_TOPIC ENABLED_TOPIC NAME...}. It
 * prints {@code set NAME RESULT} for each name, where RESULT is {@code ok} or the simple name of the
 * exception, then {@code group VALUE SOURCE}, {@code topic VALUE SOURCE}, {@code prefix VALUE SOURCE}
 * and {@code done}; it exits non-zero on any other error.
 */
public final class DeadLetterConfigs {
    private DeadLetterConfigs() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: DeadLetterConfigs BOOTSTRAP BROKER_ID GROUP PLAIN_TOPIC ENABLED_TOPIC NAME...");
            System.exit(2);
        }
        String bootstrap = args[0], broker = args[1], group = args[2], plain = args[3], enabled = args[4];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(
                new NewTopic(plain, 1, (short) 1),
                new NewTopic(enabled, 1, (short) 1).configs(Map.of("errors.deadletterqueue.group.enable", "true"))
            )).all().get(60, TimeUnit.SECONDS);
            ConfigResource g = new ConfigResource(ConfigResource.Type.GROUP, group);
            for (int i = 5; i < args.length; i++) {
                String name = args[i];
                String result = "ok";
                try {
                    admin.incrementalAlterConfigs(Map.of(g, List.of(new AlterConfigOp(
                        new ConfigEntry("errors.deadletterqueue.topic.name", name), AlterConfigOp.OpType.SET))))
                        .all().get(60, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    result = e.getCause().getClass().getSimpleName();
                }
                System.out.println("set " + name + ' ' + result);
            }
            print(admin, "group", g, "errors.deadletterqueue.topic.name");
            print(admin, "topic", new ConfigResource(ConfigResource.Type.TOPIC, enabled), "errors.deadletterqueue.group.enable");
            print(admin, "prefix", new ConfigResource(ConfigResource.Type.BROKER, broker), "errors.deadletterqueue.topic.name.prefix");
        }
        System.out.println("done");
    }

    private static void print(Admin admin, String label, ConfigResource res, String name) throws Exception {
        ConfigEntry e = admin.describeConfigs(List.of(res)).all().get(60, TimeUnit.SECONDS).get(res).get(name);
        System.out.println(label + ' ' + e.value() + ' ' + e.source());
    }
}
