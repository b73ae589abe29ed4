package lab.lineage.orders.lineage;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Writes the lineage account: sinks (each with its columns' DIRECT origins and its rows' INDIRECT ones) and sources.
 * A table's options are written only for the keys of {@link #OPTIONS}: they name what the table is (a topic and its
 * brokers, a path, a catalog table), while the rest can hold secrets (SASL JAAS configuration, passwords, tokens)
 * that must never leave the job, and the account is published in the job's visible configuration.
 */
final class LineageJson {
    /** The only options ever written. */
    static final Set<String> OPTIONS = Set.of("connector", "topic", "topic-pattern", "properties.bootstrap.servers",
            "path", "location", "catalog-name", "catalog-database", "catalog-table", "uri", "url", "table-name",
            "format", "value.format", "key.format");

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private final Function<String, Map<String, String>> options;

    /** @param options a table's options by identifier, all of them: only the whitelisted ones are written */
    LineageJson(Function<String, Map<String, String>> options) {
        this.options = options;
    }

    String write(List<PlanWalker.Sink> sinks, List<String> sources) {
        ObjectNode root = MAPPER.createObjectNode();
        ArrayNode sinkArray = root.putArray("sinks");
        for (PlanWalker.Sink sink : sinks) {
            ObjectNode s = table(sinkArray.addObject(), sink.table());
            ObjectNode columns = s.putObject("columns");
            sink.columns().forEach((column, origins) -> origins(columns.putArray(column), origins));
            origins(s.putArray("indirect"), sink.indirect());
        }
        ArrayNode sourceArray = root.putArray("sources");
        sources.forEach(source -> table(sourceArray.addObject(), source));
        return root.toString();
    }

    private ObjectNode table(ObjectNode node, String table) {
        node.put("table", table);
        ObjectNode written = node.putObject("options");
        new TreeMap<>(options.apply(table)).forEach((key, value) -> {
            if (OPTIONS.contains(key)) {
                written.put(key, value);
            }
        });
        return node;
    }

    private void origins(ArrayNode array, Set<Origin> origins) {
        for (Origin o : origins) {
            ObjectNode node = table(array.addObject(), o.table());
            node.put("column", o.column());
            node.put("field", o.field());
            node.put("type", o.type());
            node.put("subtype", o.subtype());
            node.put("description", o.description());
        }
    }
}
