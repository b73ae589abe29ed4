package lab.lineage.connect.s3;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * Kafka Connect sink that archives record values to S3 (or an S3-compatible store) as JSON lines.
 * See README.md next to the pom for configuration and delivery semantics.
 */
public class S3JsonLinesSinkConnector extends SinkConnector {

    static final String VERSION = resolveVersion();

    private Map<String, String> props;

    @Override
    public String version() {
        return VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        // Fail fast on bad config (Connect reports the ConfigException on the connector status).
        new S3JsonLinesSinkConfig(props);
        this.props = Map.copyOf(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return S3JsonLinesSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        // All tasks share one config; Connect's consumer group spreads the partitions across them.
        List<Map<String, String>> configs = new ArrayList<>(maxTasks);
        for (int i = 0; i < maxTasks; i++) {
            configs.add(new HashMap<>(props));
        }
        return configs;
    }

    @Override
    public void stop() {
        // Nothing to release.
    }

    @Override
    public ConfigDef config() {
        return S3JsonLinesSinkConfig.CONFIG_DEF;
    }

    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        Config result = super.validate(connectorConfigs);
        boolean singleKeyErrors = result.configValues().stream().anyMatch(v -> !v.errorMessages().isEmpty());
        if (singleKeyErrors) {
            return result;
        }
        List<String> problems =
                S3JsonLinesSinkConfig.crossFieldProblems(new AbstractConfig(config(), connectorConfigs, false));
        if (!problems.isEmpty()) {
            for (ConfigValue v : result.configValues()) {
                if (v.name().equals(S3JsonLinesSinkConfig.AWS_ACCESS_KEY_ID)
                        || v.name().equals(S3JsonLinesSinkConfig.AWS_SECRET_ACCESS_KEY)) {
                    problems.forEach(v::addErrorMessage);
                }
            }
        }
        return result;
    }

    private static String resolveVersion() {
        String v = S3JsonLinesSinkConnector.class.getPackage().getImplementationVersion();
        return v != null ? v : "0.1.0-dev";
    }
}
