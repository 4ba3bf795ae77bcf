package weir.e2e;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DeleteAclsResult;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * Creates, describes and deletes ACLs with the Java AdminClient.
 *
 * <p>Usage: {@code AclAdmin BOOTSTRAP}. It creates an ALLOW of READ on the literal topic {@code orders}
 * for {@code User:alice} and a DENY of ALL on the prefixed topic {@code logs-} for {@code User:bob}
 * from 10.0.0.1, then prints {@code acl PRINCIPAL HOST OPERATION PERMISSION TYPE NAME PATTERN} for
 * every ACL, {@code match ...} likewise for those a MATCH filter on topic {@code logs-app} finds,
 * {@code deleted N} after deleting alice's, {@code after N} with the number left, then {@code done};
 * it exits non-zero on any error.
 */
public final class AclAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(props)) {
            List<AclBinding> create = new ArrayList<>();
            create.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)));
            create.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "logs-", PatternType.PREFIXED),
                new AccessControlEntry("User:bob", "10.0.0.1", AclOperation.ALL, AclPermissionType.DENY)));
            admin.createAcls(create).all().get();

            print("acl", admin.describeAcls(AclBindingFilter.ANY).values().get());
            AclBindingFilter match = new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "logs-app", PatternType.MATCH), AccessControlEntryFilter.ANY);
            print("match", admin.describeAcls(match).values().get());

            AclBindingFilter alice = new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
            DeleteAclsResult deleted = admin.deleteAcls(List.of(alice));
            System.out.println("deleted " + deleted.all().get().size());
            System.out.println("after " + admin.describeAcls(AclBindingFilter.ANY).values().get().size());
        }
        System.out.println("done");
    }

    private static void print(String tag, Collection<AclBinding> bindings) {
        for (AclBinding b : bindings) {
            System.out.println(String.join(" ", tag, b.entry().principal(), b.entry().host(),
                b.entry().operation().name(), b.entry().permissionType().name(), b.pattern().resourceType().name(),
                b.pattern().name(), b.pattern().patternType().name()));
        }
    }
}
