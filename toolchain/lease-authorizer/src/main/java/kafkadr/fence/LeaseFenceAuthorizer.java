package kafkadr.fence;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.common.Endpoint;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.metrics.Monitorable;
import org.apache.kafka.common.metrics.PluginMetrics;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.metadata.authorizer.AclMutator;
import org.apache.kafka.metadata.authorizer.ClusterMetadataAuthorizer;
import org.apache.kafka.metadata.authorizer.StandardAcl;
import org.apache.kafka.metadata.authorizer.StandardAuthorizer;
import org.apache.kafka.server.authorizer.AclCreateResult;
import org.apache.kafka.server.authorizer.AclDeleteResult;
import org.apache.kafka.server.authorizer.Action;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.authorizer.AuthorizationResult;
import org.apache.kafka.server.authorizer.AuthorizerServerInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Kafka's {@link StandardAuthorizer} (KRaft ACLs, unchanged) plus a fence that fails closed: an
 * application write — WRITE on a topic or a transactional id, IDEMPOTENT_WRITE on the cluster — is
 * refused unless the site's lease permit is valid now.
 *
 * <p>The permit is a properties file the site's kafka-dr controller rewrites (atomically, 0600) after
 * each successful renewal of its lease: {@code until.ms} is the epoch millisecond until which writes
 * are allowed (the renewal's send time + the lease's TTL − the margin). A missing, unreadable or
 * malformed file, or an instant that has passed, refuses the write. The file is read on the request
 * path, at most every {@code kdr.lease.permit.cache.ms} (default 100 ms, on the monotonic clock, so a
 * broker resumed after a freeze reads it again before it serves a queued request); a cached permit can
 * only be more recent than the instant it allows, never extend it.
 *
 * <p>Exempt: the principals of {@code super.users} (the brokers, the product's admin) and those of
 * {@code kdr.lease.exempt.principals} (the replication principals: MirrorMaker 2 keeps writing its
 * internal topics), both {@code ;}-separated {@code User:name} lists. Every other decision is the
 * delegate's.
 */
public class LeaseFenceAuthorizer implements ClusterMetadataAuthorizer, Monitorable {
    /** The permit file's path (required). */
    public static final String PERMIT_FILE_CONFIG = "kdr.lease.permit.file";
    /** Principals never fenced besides super.users: {@code User:a;User:b}. */
    public static final String EXEMPT_PRINCIPALS_CONFIG = "kdr.lease.exempt.principals";
    /** How long a permit read stays cached, in milliseconds (default 100). */
    public static final String CACHE_MS_CONFIG = "kdr.lease.permit.cache.ms";

    private static final Logger LOG = LoggerFactory.getLogger(LeaseFenceAuthorizer.class);

    private final StandardAuthorizer delegate = new StandardAuthorizer();
    private final AtomicBoolean lastAllowed = new AtomicBoolean(true);
    private Path permitFile;
    private Set<String> exempt = Collections.emptySet();
    private long cacheNanos = 100_000_000L;
    private volatile Permit cached;

    /** One read of the permit file: the instant it allows writes until (0: none), and when it was read. */
    private record Permit(long untilMs, long readNanos, String problem) {}

    @Override
    public void configure(Map<String, ?> configs) {
        delegate.configure(configs);
        Object file = configs.get(PERMIT_FILE_CONFIG);
        if (file == null || file.toString().isBlank()) {
            throw new ConfigException(PERMIT_FILE_CONFIG + " is required by " + getClass().getName()
                + ": the path of the lease permit the site's kafka-dr controller writes");
        }
        permitFile = Paths.get(file.toString().trim());
        Set<String> names = new HashSet<>(principals(configs.get("super.users")));
        names.addAll(principals(configs.get(EXEMPT_PRINCIPALS_CONFIG)));
        exempt = Collections.unmodifiableSet(names);
        Object cache = configs.get(CACHE_MS_CONFIG);
        if (cache != null && !cache.toString().isBlank()) {
            cacheNanos = Math.max(0L, Long.parseLong(cache.toString().trim())) * 1_000_000L;
        }
        LOG.info("kafka-dr lease fence: application writes need a valid permit in {}; exempt: {}", permitFile, exempt);
    }

    private static List<String> principals(Object value) {
        if (value == null) {
            return Collections.emptyList();
        }
        List<String> out = new ArrayList<>();
        for (String p : value.toString().split(";")) {
            if (!p.isBlank()) {
                out.add(p.trim());
            }
        }
        return out;
    }

    /** Whether {@code action} is an application write the fence judges. */
    static boolean fenced(AclOperation op, ResourceType type) {
        return (op == AclOperation.WRITE && (type == ResourceType.TOPIC || type == ResourceType.TRANSACTIONAL_ID))
            || (op == AclOperation.IDEMPOTENT_WRITE && type == ResourceType.CLUSTER);
    }

    private Permit permit() {
        long now = System.nanoTime();
        Permit p = cached;
        if (p != null && now - p.readNanos() < cacheNanos) {
            return p;
        }
        p = read(now);
        cached = p;
        return p;
    }

    private Permit read(long now) {
        Properties props = new Properties();
        try (InputStream in = Files.newInputStream(permitFile)) {
            props.load(in);
            String until = props.getProperty("until.ms");
            if (until == null) {
                return new Permit(0L, now, "no until.ms in " + permitFile);
            }
            return new Permit(Long.parseLong(until.trim()), now, null);
        } catch (IOException | IllegalArgumentException e) {
            return new Permit(0L, now, "cannot read " + permitFile + ": " + e);
        }
    }

    /** True when application writes are allowed now; logs each change of the verdict once. */
    boolean writesAllowed() {
        Permit p = permit();
        long nowMs = System.currentTimeMillis();
        boolean allowed = p.problem() == null && nowMs < p.untilMs();
        if (lastAllowed.getAndSet(allowed) != allowed) {
            if (allowed) {
                LOG.info("kafka-dr lease fence: the permit is valid until {}: application writes allowed", p.untilMs());
            } else {
                LOG.warn("kafka-dr lease fence: application writes refused ({})",
                    p.problem() != null ? p.problem() : "the permit ran out at " + p.untilMs() + ", now " + nowMs);
            }
        }
        return allowed;
    }

    @Override
    public List<AuthorizationResult> authorize(AuthorizableRequestContext context, List<Action> actions) {
        List<AuthorizationResult> results = delegate.authorize(context, actions);
        if (exempt.contains(context.principal().toString())) {
            return results;
        }
        List<AuthorizationResult> out = null;
        Boolean allowed = null;
        for (int i = 0; i < actions.size(); i++) {
            Action a = actions.get(i);
            if (results.get(i) != AuthorizationResult.ALLOWED
                || !fenced(a.operation(), a.resourcePattern().resourceType())) {
                continue;
            }
            if (allowed == null) {
                allowed = writesAllowed();
            }
            if (allowed) {
                return results;
            }
            if (out == null) {
                out = new ArrayList<>(results);
            }
            out.set(i, AuthorizationResult.DENIED);
        }
        return out == null ? results : out;
    }

    @Override
    public AuthorizationResult authorizeByResourceType(
            AuthorizableRequestContext context, AclOperation op, ResourceType resourceType) {
        if (fenced(op, resourceType) && !exempt.contains(context.principal().toString()) && !writesAllowed()) {
            return AuthorizationResult.DENIED;
        }
        return delegate.authorizeByResourceType(context, op, resourceType);
    }

    // ------------------------------------------------------------------ everything else is the delegate's
    @Override
    public Map<Endpoint, ? extends CompletionStage<Void>> start(AuthorizerServerInfo serverInfo) {
        return delegate.start(serverInfo);
    }

    @Override
    public List<? extends CompletionStage<AclCreateResult>> createAcls(
            AuthorizableRequestContext context, List<AclBinding> aclBindings) {
        return delegate.createAcls(context, aclBindings);
    }

    @Override
    public List<? extends CompletionStage<AclDeleteResult>> deleteAcls(
            AuthorizableRequestContext context, List<AclBindingFilter> filters) {
        return delegate.deleteAcls(context, filters);
    }

    @Override
    public Iterable<AclBinding> acls(AclBindingFilter filter) {
        return delegate.acls(filter);
    }

    @Override
    public int aclCount() {
        return delegate.aclCount();
    }

    @Override
    public void setAclMutator(AclMutator aclMutator) {
        delegate.setAclMutator(aclMutator);
    }

    @Override
    public AclMutator aclMutatorOrException() {
        return delegate.aclMutatorOrException();
    }

    @Override
    public void completeInitialLoad() {
        delegate.completeInitialLoad();
    }

    @Override
    public void completeInitialLoad(Exception e) {
        delegate.completeInitialLoad(e);
    }

    @Override
    public void loadSnapshot(Map<Uuid, StandardAcl> acls) {
        delegate.loadSnapshot(acls);
    }

    @Override
    public void addAcl(Uuid id, StandardAcl acl) {
        delegate.addAcl(id, acl);
    }

    @Override
    public void removeAcl(Uuid id) {
        delegate.removeAcl(id);
    }

    @Override
    public void withPluginMetrics(PluginMetrics metrics) {
        delegate.withPluginMetrics(metrics);
    }

    @Override
    public void close() throws IOException {
        delegate.close();
    }

    @Override
    public String toString() {
        return "LeaseFenceAuthorizer(" + permitFile + ", exempt " + Arrays.toString(exempt.toArray()) + ")";
    }
}
