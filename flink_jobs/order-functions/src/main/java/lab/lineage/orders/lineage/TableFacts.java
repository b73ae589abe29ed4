package lab.lineage.orders.lineage;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.catalog.ResolvedCatalogBaseTable;
import org.apache.flink.table.operations.QueryOperation;
import org.apache.flink.table.operations.SourceQueryOperation;

/**
 * What the lineage needs of a table beyond its identifier: its columns (to name a sink's columns) and its options (to
 * say which topic or path it is). A compiled plan carries them only for permanent catalog tables; a temporary table
 * ({@code CREATE TEMPORARY TABLE}, how the jobs declare their Kafka tables) is written by identifier alone, so
 * {@link #of(TableEnvironment, String)} asks the table environment that compiled the plan. All options are kept
 * here; only {@link LineageJson} decides which may be written out.
 *
 * @param columns the table's columns in schema order, null when not known
 */
record TableFacts(List<Column> columns, Map<String, String> options) {
    static final TableFacts UNKNOWN = new TableFacts(null, Map.of());

    /** A column of the table's schema: physical, metadata (persisted unless virtual) or computed (neither). */
    record Column(String name, boolean physical, boolean persisted) {}

    /** The facts a plan writes for a table ({@code "resolvedTable"}), or null when it writes only the identifier. */
    static TableFacts ofPlan(JsonNode table) {
        JsonNode resolved = table.get("resolvedTable");
        if (resolved == null) {
            return null;
        }
        List<Column> columns = new ArrayList<>();
        for (JsonNode c : resolved.path("schema").path("columns")) {
            String kind = c.path("kind").asText("PHYSICAL");
            boolean physical = kind.equals("PHYSICAL");
            boolean persisted = physical || (kind.equals("METADATA") && !c.path("isVirtual").asBoolean(false));
            columns.add(new Column(c.get("name").asText(), physical, persisted));
        }
        Map<String, String> options = new LinkedHashMap<>();
        resolved.path("options").fields().forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
        return new TableFacts(columns, options);
    }

    /** The table {@code identifier} as resolved by {@code tEnv} (through the public API, not the planner). */
    static TableFacts of(TableEnvironment tEnv, String identifier) {
        QueryOperation operation = tEnv.from(identifier).getQueryOperation();
        if (!(operation instanceof SourceQueryOperation)) {
            return UNKNOWN;
        }
        ResolvedCatalogBaseTable<?> table =
                ((SourceQueryOperation) operation).getContextResolvedTable().getResolvedTable();
        List<Column> columns = new ArrayList<>();
        table.getResolvedSchema().getColumns()
                .forEach(c -> columns.add(new Column(c.getName(), c.isPhysical(), c.isPersisted())));
        return new TableFacts(columns, table.getOptions());
    }
}
