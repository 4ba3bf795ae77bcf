package weir.e2e;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * Runs the share group admin calls of the Java AdminClient (KIP-932) on one share group and topic.
 *
 * <p>Usage: {@code ShareAdmin BOOTSTRAP GROUP TOPIC STEP...}, each step one of:
 * <ul>
 *   <li>{@code list:P,P...}: listShareGroupOffsets for those partitions; prints
 *       {@code offset P START LEADER_EPOCH LAG} for each partition answered (-1 for an absent epoch or
 *       lag), and {@code none P} for each partition left out;
 *   <li>{@code alter:P=OFFSET,...}: alterShareGroupOffsets; prints {@code altered};
 *   <li>{@code delete-offsets}: deleteShareGroupOffsets for the topic; prints {@code deleted-offsets};
 *   <li>{@code delete-group}: deleteShareGroups; prints {@code deleted-group}.
 * </ul>
 * A step the broker refuses prints {@code error STEP EXCEPTION}, with the simple name of the cause's
 * class, and the next step runs. It prints {@code done} at the end and exits non-zero on any other
 * error.
 */
public final class ShareAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        String group = args[1];
        String topic = args[2];
        try (Admin admin = Admin.create(props)) {
            for (int i = 3; i < args.length; i++) {
                String step = args[i];
                try {
                    run(admin, group, topic, step);
                } catch (ExecutionException e) {
                    String name = step.contains(":") ? step.substring(0, step.indexOf(':')) : step;
                    System.out.println("error " + name + " " + e.getCause().getClass().getSimpleName());
                }
            }
        }
        System.out.println("done");
    }

    private static void run(Admin admin, String group, String topic, String step) throws Exception {
        if (step.startsWith("list:")) {
            List<TopicPartition> parts = new ArrayList<>();
            for (String p : step.substring(5).split(",")) {
                parts.add(new TopicPartition(topic, Integer.parseInt(p)));
            }
            Map<String, ListShareGroupOffsetsSpec> specs = Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(parts));
            Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(specs).partitionsToOffsetInfo(group).get();
            for (TopicPartition tp : parts) {
                SharePartitionOffsetInfo info = got.get(tp);
                if (info == null) {
                    System.out.println("none " + tp.partition());
                    continue;
                }
                System.out.println("offset " + tp.partition() + " " + info.startOffset() + " "
                    + info.leaderEpoch().orElse(-1) + " " + info.lag().orElse(-1L));
            }
        } else if (step.startsWith("alter:")) {
            Map<TopicPartition, Long> offsets = new HashMap<>();
            for (String po : step.substring(6).split(",")) {
                String[] kv = po.split("=");
                offsets.put(new TopicPartition(topic, Integer.parseInt(kv[0])), Long.parseLong(kv[1]));
            }
            admin.alterShareGroupOffsets(group, offsets).all().get();
            System.out.println("altered");
        } else if (step.equals("delete-offsets")) {
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get();
            System.out.println("deleted-offsets");
        } else if (step.equals("delete-group")) {
            admin.deleteShareGroups(List.of(group)).all().get();
            System.out.println("deleted-group");
        } else {
            throw new IllegalArgumentException("unknown step " + step);
        }
    }
}
