package lab.lineage.orders.lineage;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * The origins of one RexNode of the compiled plan ({@code {"kind":"INPUT_REF","inputIndex":..}}, {@code CALL},
 * {@code LITERAL}, {@code FIELD_ACCESS}...), given the origins of each field of the node's input. A value computed
 * by a call is a TRANSFORMATION of its operands' columns, named after the operator; a literal has none. The WHEN
 * conditions of a CASE do not flow into the value but decide it: they are collected as INDIRECT CONDITIONAL origins
 * of the node instead (OpenLineage's reading of CASE).
 */
final class RexLineage {
    private final List<Set<Origin>> inputs;
    private final Set<Origin> indirect;

    /**
     * @param inputs the origins of each input field, by index
     * @param indirect receives the node's INDIRECT origins found inside the expressions (CASE conditions)
     */
    RexLineage(List<Set<Origin>> inputs, Set<Origin> indirect) {
        this.inputs = inputs;
        this.indirect = indirect;
    }

    Set<Origin> of(JsonNode rex) {
        switch (rex.path("kind").asText()) {
            case "INPUT_REF":
            case "PATTERN_INPUT_REF":
                return inputs.get(rex.get("inputIndex").asInt());
            case "LITERAL":
                return Set.of();
            case "FIELD_ACCESS":
                return fieldAccess(rex);
            case "CORREL_VARIABLE":
                return all(inputs);
            case "CALL":
                return call(rex);
            default:
                // a kind this reader does not know: whatever it is, it can only read the input
                Set<Origin> unknown = new LinkedHashSet<>();
                all(inputs).forEach(o -> unknown.add(o.indirect("UNKNOWN", rex.path("kind").asText())));
                return unknown;
        }
    }

    /**
     * {@code $cor0.v} (a correlate's argument: the input field of that name, the correlation variable's row type
     * starting with the input's fields) or {@code expr.name} (a field of a ROW value: that field of its origins).
     */
    private Set<Origin> fieldAccess(JsonNode rex) {
        JsonNode expr = rex.get("expr");
        String name = rex.get("name").asText();
        if (expr.path("kind").asText().equals("CORREL_VARIABLE")) {
            return inputs.get(PlanNames.fields(expr.get("type")).indexOf(name));
        }
        Set<Origin> out = new LinkedHashSet<>();
        of(expr).forEach(o -> out.add(o.field(name)));
        return out;
    }

    private Set<Origin> call(JsonNode call) {
        String op = PlanNames.operator(call);
        JsonNode operands = call.path("operands");
        if (op.equals("CAST") && operands.size() == 1 && nullable(operands.get(0).get("type"))
                .equals(nullable(call.get("type")))) {
            // the planner's own cast of a NOT NULL value (a metadata column) to the declared nullable type
            return of(operands.get(0));
        }
        Set<Origin> out = new LinkedHashSet<>();
        for (int i = 0; i < operands.size(); i++) {
            // CASE operands: WHEN condition, THEN value, ..., ELSE value
            boolean condition = op.equals("CASE") && i % 2 == 0 && i < operands.size() - 1;
            for (Origin o : of(operands.get(i))) {
                Origin through = o.through(op, "TRANSFORMATION");
                if (condition) {
                    indirect.add(through.indirect("CONDITIONAL", null));
                } else {
                    out.add(through);
                }
            }
        }
        return out;
    }

    /** A type as written in the plan, without its NOT NULL. */
    private static String nullable(JsonNode type) {
        return type == null ? "" : type.toString().replace(" NOT NULL", "");
    }

    /** The origins of every input field. */
    static Set<Origin> all(List<Set<Origin>> fields) {
        Set<Origin> all = new LinkedHashSet<>();
        fields.forEach(all::addAll);
        return all;
    }
}
