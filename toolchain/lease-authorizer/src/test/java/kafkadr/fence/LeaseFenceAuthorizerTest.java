package kafkadr.fence;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.internals.PluginMetricsImpl;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.metadata.authorizer.StandardAcl;
import org.apache.kafka.server.authorizer.Action;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.authorizer.AuthorizationResult;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LeaseFenceAuthorizerTest {
    @TempDir Path dir;
    Path permit;
    LeaseFenceAuthorizer authorizer;

    @BeforeEach
    void setUp() {
        permit = dir.resolve("lease-permit");
        Map<String, Object> configs = new HashMap<>();
        configs.put("super.users", "User:broker;User:admin");
        configs.put(LeaseFenceAuthorizer.PERMIT_FILE_CONFIG, permit.toString());
        configs.put(LeaseFenceAuthorizer.EXEMPT_PRINCIPALS_CONFIG, "User:replicator");
        configs.put(LeaseFenceAuthorizer.CACHE_MS_CONFIG, "0");
        authorizer = new LeaseFenceAuthorizer();
        authorizer.configure(configs);
        authorizer.withPluginMetrics(new PluginMetricsImpl(new Metrics(), Map.of()));  // as the broker does
        authorizer.completeInitialLoad();
        for (String who : List.of("User:app", "User:replicator")) {
            for (AclOperation op : List.of(AclOperation.WRITE, AclOperation.READ)) {
                authorizer.addAcl(Uuid.randomUuid(), new StandardAcl(ResourceType.TOPIC, "orders",
                    PatternType.LITERAL, who, "*", op, AclPermissionType.ALLOW));
            }
        }
    }

    private void writePermit(long untilMs) throws Exception {
        Files.writeString(permit, "until.ms=" + untilMs + "\ntoken=7\n");
    }

    private static AuthorizableRequestContext as(String user) {
        return new AuthorizableRequestContext() {
            public String listenerName() { return "CLIENT"; }
            public SecurityProtocol securityProtocol() { return SecurityProtocol.SASL_PLAINTEXT; }
            public KafkaPrincipal principal() { return new KafkaPrincipal(KafkaPrincipal.USER_TYPE, user); }
            public InetAddress clientAddress() { return InetAddress.getLoopbackAddress(); }
            public int requestType() { return 0; }
            public int requestVersion() { return 0; }
            public String clientId() { return "test"; }
            public int correlationId() { return 1; }
        };
    }

    private AuthorizationResult decide(String user, AclOperation op) {
        Action action = new Action(op, new ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL), 1, true, true);
        return authorizer.authorize(as(user), List.of(action)).get(0);
    }

    @Test
    void aValidPermitLeavesTheAclsToDecide() throws Exception {
        writePermit(System.currentTimeMillis() + 60_000);
        assertEquals(AuthorizationResult.ALLOWED, decide("app", AclOperation.WRITE));
        assertEquals(AuthorizationResult.DENIED, decide("stranger", AclOperation.WRITE));
        assertEquals(AuthorizationResult.ALLOWED,
            authorizer.authorizeByResourceType(as("app"), AclOperation.WRITE, ResourceType.TOPIC));
    }

    @Test
    void aPermitThatRanOutRefusesApplicationWritesOnly() throws Exception {
        writePermit(System.currentTimeMillis() - 1);
        assertEquals(AuthorizationResult.DENIED, decide("app", AclOperation.WRITE));
        assertEquals(AuthorizationResult.DENIED,
            authorizer.authorizeByResourceType(as("app"), AclOperation.WRITE, ResourceType.TOPIC));
        assertEquals(AuthorizationResult.DENIED,
            authorizer.authorizeByResourceType(as("app"), AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER));
        assertEquals(AuthorizationResult.ALLOWED, decide("app", AclOperation.READ));
        assertEquals(AuthorizationResult.ALLOWED, decide("replicator", AclOperation.WRITE));
        assertEquals(AuthorizationResult.ALLOWED, decide("admin", AclOperation.WRITE));
    }

    @Test
    void aMissingOrMalformedPermitFailsClosed() throws Exception {
        assertEquals(AuthorizationResult.DENIED, decide("app", AclOperation.WRITE));
        Files.writeString(permit, "until.ms=soon\n");
        assertEquals(AuthorizationResult.DENIED, decide("app", AclOperation.WRITE));
        Files.writeString(permit, "token=7\n");
        assertEquals(AuthorizationResult.DENIED, decide("app", AclOperation.WRITE));
    }

    @Test
    void aRenewedPermitIsReadAgain() throws Exception {
        writePermit(System.currentTimeMillis() - 1);
        assertEquals(AuthorizationResult.DENIED, decide("app", AclOperation.WRITE));
        writePermit(System.currentTimeMillis() + 60_000);
        assertEquals(AuthorizationResult.ALLOWED, decide("app", AclOperation.WRITE));
    }

    @Test
    void thePermitFileIsRequired() {
        Map<String, Object> configs = new HashMap<>();
        configs.put("super.users", "User:admin");
        assertThrows(ConfigException.class, () -> new LeaseFenceAuthorizer().configure(configs));
    }
}
