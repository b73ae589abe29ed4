package lab.lineage.orders;

import java.io.Serializable;
import java.time.Duration;

/**
 * What a task needs to decode orders: the registry (its Confluent-compatible base URL and basic-auth user info) and
 * the rule. Serializable, so a Flink function carries it to the TaskManagers; the decoder is built there.
 */
public final class DecodeSettings implements Serializable {
    private static final long serialVersionUID = 1L;

    private final String registryUrl;
    private final String registryUserInfo;
    private final OrderRule rule;

    public DecodeSettings(String registryUrl, String registryUserInfo, long maxFutureS, long maxPastS) {
        if (registryUrl == null || !(registryUrl.startsWith("http://") || registryUrl.startsWith("https://"))) {
            throw new IllegalArgumentException("the schema registry URL must be http(s)://host:port/..., got '"
                    + registryUrl + "' (--registry of the job, LINEAGE_LAB_SCHEMA_REGISTRY_URL of the deployment)");
        }
        this.registryUrl = registryUrl;
        this.registryUserInfo = registryUserInfo == null ? "" : registryUserInfo;
        this.rule = new OrderRule(maxFutureS, maxPastS);
    }

    public OrderRule rule() {
        return rule;
    }

    public OrderDecoder newDecoder() {
        return new OrderDecoder(new RegistrySchemas(registryUrl, registryUserInfo, Duration.ofSeconds(10)), rule);
    }

    @Override
    public String toString() {  // never the credentials
        return "DecodeSettings(" + registryUrl + ", max_future_s=" + rule.maxFutureS() + ", max_past_s="
                + rule.maxPastS() + ")";
    }
}
