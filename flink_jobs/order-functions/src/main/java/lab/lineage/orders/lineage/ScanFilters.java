package lab.lineage.orders.lineage;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * Filters the planner pushed into a source, which leave no calc in the plan: a source that supports filter push-down
 * (its {@code FilterPushDown} ability) or partition pruning ({@code PartitionPushDown}). Either decides which rows
 * are read, so the columns it reads are INDIRECT FILTER origins of everything downstream.
 */
final class ScanFilters {
    private ScanFilters() {}

    /**
     * @param outputs the scan's output fields' origins, what a predicate's fields resolve against when the table's
     *     columns are unknown
     */
    static Set<Origin> of(String table, TableFacts facts, JsonNode abilities, List<Set<Origin>> outputs) {
        Set<Origin> indirect = new LinkedHashSet<>();
        // a predicate refers to the row as the abilities before it left it: the table's physical columns at first
        List<String> row = null;
        if (facts.columns() != null) {
            row = new ArrayList<>();
            for (TableFacts.Column c : facts.columns()) {
                if (c.physical()) {
                    row.add(c.name());
                }
            }
        }
        for (JsonNode ability : abilities) {
            String type = ability.path("type").asText();
            if (type.equals("FilterPushDown")) {
                List<Set<Origin>> fields = outputs;
                if (row != null) {
                    fields = new ArrayList<>();
                    for (String column : row) {
                        fields.add(Set.of(Origin.column(table, column)));
                    }
                }
                RexLineage rex = new RexLineage(fields, indirect);
                ability.path("predicates").forEach(p -> PlanWalker.filter(p, rex, indirect));
            } else if (type.equals("PartitionPushDown")) {
                for (JsonNode partition : ability.path("partitions")) {
                    partition.fieldNames().forEachRemaining(
                            column -> indirect.add(Origin.column(table, column).indirect("FILTER", "PARTITION")));
                }
            }
            if (ability.has("producedType")) {
                row = PlanNames.fields(ability.get("producedType"));
            }
        }
        return indirect;
    }
}
