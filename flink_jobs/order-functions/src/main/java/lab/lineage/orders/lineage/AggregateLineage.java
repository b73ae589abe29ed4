package lab.lineage.orders.lineage;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import lab.lineage.orders.lineage.PlanWalker.Rows;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * An aggregate node ({@code group-aggregate}, its {@code local-}/{@code global-} halves, window aggregates): the
 * grouping keys pass through and decide the groups (INDIRECT GROUP_BY), each aggregate call is an AGGREGATION of its
 * arguments' columns ({@code COUNT(*)} has none), a call's FILTER clause filters.
 */
final class AggregateLineage {
    private AggregateLineage() {}

    /**
     * @param in the node's input: the grouping keys refer to it
     * @param arguments what the calls' arguments refer to: the input, except for a global aggregate, whose calls
     *     refer to the input of its local half
     */
    static Rows of(JsonNode node, Rows in, Rows arguments, int arity) {
        Set<Origin> indirect = new LinkedHashSet<>(in.indirect());
        List<Set<Origin>> fields = new ArrayList<>();
        for (JsonNode g : node.get("grouping")) {
            Set<Origin> key = in.fields().get(g.asInt());
            fields.add(key);
            key.forEach(o -> indirect.add(o.indirect("GROUP_BY", "GROUP BY")));
        }
        List<Set<Origin>> calls = new ArrayList<>();
        for (JsonNode call : node.get("aggCalls")) {
            String name = PlanNames.operator(call);
            Set<Origin> origins = new LinkedHashSet<>();
            call.path("argList").forEach(
                    a -> arguments.fields().get(a.asInt()).forEach(o -> origins.add(o.through(name, "AGGREGATION"))));
            int filterArg = call.path("filterArg").asInt(-1);
            if (filterArg >= 0) {
                arguments.fields().get(filterArg).forEach(o -> indirect.add(o.indirect("FILTER", name)));
            }
            calls.add(origins);
        }
        if (PlanWalker.kind(node).startsWith("local-")) {
            // a local aggregate emits accumulators, not one field per call (AVG keeps a sum and a count)
            Set<Origin> accumulators = RexLineage.all(calls);
            while (fields.size() < arity) {
                fields.add(accumulators);
            }
        } else {
            fields.addAll(calls);
            // what follows the calls (a window aggregate's window_start, window_end...) is not read here
            fields.addAll(PlanWalker.unknown(node, List.of(in), arity - fields.size()).fields());
        }
        return new Rows(fields, indirect);
    }
}
