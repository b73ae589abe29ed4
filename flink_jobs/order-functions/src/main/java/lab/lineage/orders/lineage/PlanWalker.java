package lab.lineage.orders.lineage;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * Walks the ExecNode graph of a compiled plan from each sink back to the table scans, computing for every node the
 * origins of each of its output fields ({@link Rows}). Nodes that only move rows (exchanges, watermark assigners,
 * changelog normalization, union...) map each field to the same input field; calcs, correlates, joins and aggregates
 * are read ({@link RexLineage} for their expressions, {@link AggregateLineage} for aggregates). A node of a type not
 * read here is not skipped: each of its fields depends, INDIRECT, on every field of its inputs, so nothing upstream
 * of it is lost and the lineage says which node it could not see through.
 */
final class PlanWalker {
    /** The origins of each output field of a node, and the INDIRECT origins of all rows it emits. */
    record Rows(List<Set<Origin>> fields, Set<Origin> indirect) {}

    /** A sink of the plan: each written column's origins (in the table's column order) and the rows' INDIRECT ones. */
    record Sink(String table, Map<String, Set<Origin>> columns, Set<Origin> indirect) {}

    /** Node types (without the {@code stream-exec-} prefix and version) that pass every input field through. */
    private static final Set<String> PASS_THROUGH = Set.of("exchange", "watermark-assigner", "changelog-normalize",
            "mini-batch-assigner", "drop-update-before", "union");

    private final Map<Integer, JsonNode> nodes = new LinkedHashMap<>();
    private final Map<Integer, List<Integer>> inputs = new HashMap<>();
    private final Map<Integer, Rows> rows = new HashMap<>();
    private final Map<String, TableFacts> facts = new HashMap<>();
    private final Map<String, FieldOrigins> functions;
    private final Function<String, TableFacts> catalog;

    /**
     * @param plan the compiled plan
     * @param functions table functions that say which field of their decoded argument each output field is
     * @param catalog the facts of a table the plan names by identifier only (temporary tables), or null if unknown
     */
    PlanWalker(JsonNode plan, Map<String, FieldOrigins> functions, Function<String, TableFacts> catalog) {
        plan.path("nodes").forEach(n -> nodes.put(n.get("id").asInt(), n));
        // edges are written in each node's input order (a join's left input first)
        plan.path("edges").forEach(e -> inputs.computeIfAbsent(e.get("target").asInt(), t -> new ArrayList<>())
                .add(e.get("source").asInt()));
        this.functions = functions;
        this.catalog = catalog;
    }

    /** {@code stream-exec-group-aggregate_1} -> {@code group-aggregate}. */
    static String kind(JsonNode node) {
        return node.path("type").asText().replaceFirst("^(stream|batch)-exec-", "").replaceFirst("_\\d+$", "");
    }

    /** The tables the plan scans, in plan order. */
    List<String> sources() {
        List<String> sources = new ArrayList<>();
        for (JsonNode node : nodes.values()) {
            if (kind(node).equals("table-source-scan")) {
                String table = scanTable(node).get("identifier").asText();
                facts(scanTable(node));
                if (!sources.contains(table)) {
                    sources.add(table);
                }
            }
        }
        return sources;
    }

    /** Every sink of the plan (one per INSERT), in plan order. */
    List<Sink> sinks() {
        List<Sink> sinks = new ArrayList<>();
        for (JsonNode node : nodes.values()) {
            if (kind(node).equals("sink")) {
                sinks.add(sink(node));
            }
        }
        return sinks;
    }

    /** The facts of a table of the plan, once {@link #sources()} and {@link #sinks()} have read them. */
    TableFacts facts(String identifier) {
        return facts.getOrDefault(identifier, TableFacts.UNKNOWN);
    }

    /** The facts of a table: from the plan when it has them, else from the catalog; cached by identifier. */
    private TableFacts facts(JsonNode table) {
        String identifier = table.get("identifier").asText();
        TableFacts known = facts.get(identifier);
        if (known == null) {
            known = TableFacts.ofPlan(table);
            if (known == null) {
                known = catalog.apply(identifier);
            }
            known = known == null ? TableFacts.UNKNOWN : known;
            facts.put(identifier, known);
        }
        return known;
    }

    /**
     * The sink's input row is the table's physical columns then the metadata columns it writes (named by the
     * {@code WritingMetadata} ability); its columns are listed in schema order, only those the INSERT targets.
     */
    private Sink sink(JsonNode node) {
        JsonNode spec = node.get("dynamicTableSink");
        TableFacts table = facts(spec.get("table"));
        Rows in = rows(inputs.get(node.get("id").asInt()).get(0));
        // the table's columns by schema position (null: computed or virtual, never written) and the names of the
        // input row's fields; without the table's schema, the query's names stand for both
        List<String> inputNames = PlanNames.fields(node.get("outputType"));
        List<String> tableColumns = inputNames;
        if (table.columns() != null) {
            tableColumns = new ArrayList<>();
            inputNames = new ArrayList<>();
            for (TableFacts.Column c : table.columns()) {
                tableColumns.add(c.persisted() ? c.name() : null);
                if (c.physical()) {
                    inputNames.add(c.name());
                }
            }
        }
        for (JsonNode ability : spec.path("abilities")) {
            if (ability.has("consumedType")) {
                inputNames = PlanNames.fields(ability.get("consumedType"));
            }
        }
        Set<Integer> targets = new LinkedHashSet<>();
        spec.path("targetColumns").forEach(path -> targets.add(path.get(0).asInt()));
        Map<String, Set<Origin>> columns = new LinkedHashMap<>();
        for (int i = 0; i < tableColumns.size(); i++) {
            String column = tableColumns.get(i);
            if (column != null && (targets.isEmpty() || targets.contains(i))) {
                int index = inputNames.indexOf(column);
                if (index < 0) {
                    throw new IllegalStateException("sink " + spec.get("table").get("identifier").asText()
                            + ": column " + column + " is not in its input row " + inputNames);
                }
                columns.put(column, in.fields().get(index));
            }
        }
        return new Sink(spec.get("table").get("identifier").asText(), columns, in.indirect());
    }

    /** The lineage of node {@code id}'s output, computed once (plans share subgraphs between sinks). */
    Rows rows(int id) {
        Rows known = rows.get(id);
        if (known == null) {
            JsonNode node = nodes.get(id);
            List<Rows> in = new ArrayList<>();
            inputs.getOrDefault(id, List.of()).forEach(i -> in.add(rows(i)));
            known = compute(node, in);
            rows.put(id, known);
        }
        return known;
    }

    private Rows compute(JsonNode node, List<Rows> in) {
        String kind = kind(node);
        int arity = PlanNames.fields(node.get("outputType")).size();
        if (kind.equals("table-source-scan")) {
            return scan(node);
        }
        if (kind.equals("calc") && in.size() == 1) {
            return calc(node, in.get(0));
        }
        if (kind.equals("correlate") && in.size() == 1) {
            return correlate(node, in.get(0));
        }
        if (node.has("joinSpec") && in.size() == 2) {
            return join(node, in.get(0), in.get(1), arity);
        }
        if (node.has("grouping") && node.has("aggCalls") && in.size() == 1) {
            Rows localInput = kind.startsWith("global-") ? localAggregateInput(node) : in.get(0);
            if (localInput != null) {
                return AggregateLineage.of(node, in.get(0), localInput, arity);
            }
        }
        if (PASS_THROUGH.contains(kind) && !in.isEmpty()
                && in.stream().allMatch(r -> r.fields().size() == arity)) {
            return passThrough(in, arity);
        }
        return unknown(node, in, arity);
    }

    private Rows scan(JsonNode node) {
        JsonNode spec = node.get("scanTableSource");
        String table = scanTable(node).get("identifier").asText();
        TableFacts facts = facts(scanTable(node));
        List<Set<Origin>> fields = new ArrayList<>();
        PlanNames.fields(node.get("outputType")).forEach(name -> fields.add(Set.of(Origin.column(table, name))));
        return new Rows(fields, ScanFilters.of(table, facts, spec.path("abilities"), fields));
    }

    private static JsonNode scanTable(JsonNode node) {
        return node.get("scanTableSource").get("table");
    }

    private static Rows calc(JsonNode node, Rows in) {
        Set<Origin> indirect = new LinkedHashSet<>(in.indirect());
        RexLineage rex = new RexLineage(in.fields(), indirect);
        List<Set<Origin>> fields = new ArrayList<>();
        node.path("projection").forEach(p -> fields.add(rex.of(p)));
        filter(node.get("condition"), rex, indirect);
        return new Rows(fields, indirect);
    }

    /**
     * A WHERE condition: every column it reads decides which rows are written. Each conjunct is read on its own, so
     * that a description names the test on the column ({@code IS NULL}), not the {@code AND} around it.
     */
    static void filter(JsonNode condition, RexLineage rex, Set<Origin> indirect) {
        if (condition == null || condition.isNull()) {
            return;
        }
        if (condition.path("kind").asText().equals("CALL") && PlanNames.operator(condition).equals("AND")) {
            condition.path("operands").forEach(conjunct -> filter(conjunct, rex, indirect));
        } else {
            rex.of(condition).forEach(o -> indirect.add(o.indirect("FILTER", null)));
        }
    }

    /**
     * A lateral table function: the input's fields, then the function's, each computed from the columns of its
     * arguments (a field that the function's {@link FieldOrigins} names is that field of the argument). The
     * correlate's condition filters on the function's output fields.
     */
    private Rows correlate(JsonNode node, Rows in) {
        Set<Origin> indirect = new LinkedHashSet<>(in.indirect());
        JsonNode call = node.get("functionCall");
        String function = PlanNames.operator(call);
        FieldOrigins decoder = functions.get(function);
        RexLineage rex = new RexLineage(in.fields(), indirect);
        Set<Origin> arguments = new LinkedHashSet<>();
        call.path("operands").forEach(operand -> arguments.addAll(rex.of(operand)));
        List<Set<Origin>> outputs = new ArrayList<>();
        for (String output : PlanNames.fields(call.get("type"))) {
            String field = decoder == null ? null : decoder.fieldOrigins().get(output);
            Set<Origin> origins = new LinkedHashSet<>();
            for (Origin argument : arguments) {
                Origin through = argument.through(function, "TRANSFORMATION");
                origins.add(field == null ? through : through.field(field));
            }
            outputs.add(origins);
        }
        filter(node.get("condition"), new RexLineage(outputs, indirect), indirect);
        List<Set<Origin>> fields = new ArrayList<>(in.fields());
        fields.addAll(outputs);
        return new Rows(fields, indirect);
    }

    /**
     * A join: the left fields then the right ones (only the left for a semi or anti join); its keys and its other
     * condition decide which rows meet.
     */
    private static Rows join(JsonNode node, Rows left, Rows right, int arity) {
        JsonNode spec = node.get("joinSpec");
        String op = spec.path("joinType").asText() + " JOIN";
        Set<Origin> indirect = new LinkedHashSet<>(left.indirect());
        indirect.addAll(right.indirect());
        List<Set<Origin>> both = new ArrayList<>(left.fields());
        both.addAll(right.fields());
        for (JsonNode key : spec.path("leftKeys")) {
            left.fields().get(key.asInt()).forEach(o -> indirect.add(o.indirect("JOIN", op)));
        }
        for (JsonNode key : spec.path("rightKeys")) {
            right.fields().get(key.asInt()).forEach(o -> indirect.add(o.indirect("JOIN", op)));
        }
        JsonNode condition = spec.get("nonEquiCondition");
        if (condition != null && !condition.isNull()) {
            new RexLineage(both, indirect).of(condition).forEach(o -> indirect.add(o.indirect("JOIN", op)));
        }
        return new Rows(arity == left.fields().size() ? left.fields() : both, indirect);
    }

    /**
     * The input of the local aggregate that a global aggregate finishes: the global's aggregate calls refer to the
     * fields of that input, not to the accumulators the local one emits. Null if the plan has no such pair.
     */
    private Rows localAggregateInput(JsonNode global) {
        List<Integer> in = inputs.getOrDefault(global.get("id").asInt(), List.of());
        while (in.size() == 1) {
            JsonNode node = nodes.get(in.get(0));
            if (kind(node).startsWith("local-")) {
                return rows(inputs.get(in.get(0)).get(0));
            }
            in = inputs.getOrDefault(in.get(0), List.of());
        }
        return null;
    }

    private static Rows passThrough(List<Rows> in, int arity) {
        List<Set<Origin>> fields = new ArrayList<>();
        Set<Origin> indirect = new LinkedHashSet<>();
        for (int i = 0; i < arity; i++) {
            Set<Origin> field = new LinkedHashSet<>();
            for (Rows r : in) {
                field.addAll(r.fields().get(i));
            }
            fields.add(field);
        }
        in.forEach(r -> indirect.addAll(r.indirect()));
        return new Rows(fields, indirect);
    }

    /** A node not read here: each output field depends, INDIRECT, on every input field (named after the node). */
    static Rows unknown(JsonNode node, List<Rows> in, int arity) {
        String type = node.path("type").asText();
        Set<Origin> any = new LinkedHashSet<>();
        Set<Origin> indirect = new LinkedHashSet<>();
        for (Rows r : in) {
            RexLineage.all(r.fields()).forEach(o -> any.add(o.indirect("UNKNOWN", type)));
            indirect.addAll(r.indirect());
        }
        List<Set<Origin>> fields = new ArrayList<>();
        for (int i = 0; i < arity; i++) {
            fields.add(any);
        }
        return new Rows(fields, indirect);
    }
}
