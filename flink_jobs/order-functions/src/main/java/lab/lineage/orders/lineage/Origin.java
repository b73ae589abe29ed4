package lab.lineage.orders.lineage;

import java.util.List;

/**
 * One source column (or a field inside it) that a value of the plan depends on, and how: OpenLineage's
 * transformation type and subtype, with the operators met on the way, outermost first ({@code CAST(UPPER)}).
 * Immutable and comparable by value, so that sets of origins deduplicate the many paths through a plan.
 */
record Origin(String table, String column, String field, String type, String subtype, String description) {
    static final String DIRECT = "DIRECT";
    static final String INDIRECT = "INDIRECT";
    /** The DIRECT subtypes from weakest to strongest: a chain of operators keeps the strongest it met. */
    private static final List<String> STRENGTH = List.of("IDENTITY", "TRANSFORMATION", "AGGREGATION");

    /** A column as a source table scan reads it. */
    static Origin column(String table, String column) {
        return new Origin(table, column, null, DIRECT, "IDENTITY", null);
    }

    /**
     * This value after operator {@code op} of strength {@code subtype}. An INDIRECT origin stays as it is: what it
     * names (the filter, the join...) is what influences the value, whatever is computed from it later.
     */
    Origin through(String op, String subtype) {
        if (type.equals(INDIRECT)) {
            return this;
        }
        String strongest = STRENGTH.indexOf(subtype) > STRENGTH.indexOf(this.subtype) ? subtype : this.subtype;
        return new Origin(table, column, field, type, strongest, wrap(op, description));
    }

    /** The same column, influencing rather than being copied: a filter, a join key, a grouping key... */
    Origin indirect(String indirectSubtype, String op) {
        return new Origin(table, column, field, INDIRECT, indirectSubtype, op == null ? description
                : wrap(op, description));
    }

    /** The field {@code name} of this (decoded or nested) value. */
    Origin field(String name) {
        return new Origin(table, column, field == null ? name : field + "." + name, type, subtype, description);
    }

    private static String wrap(String op, String inner) {
        return inner == null ? op : op + "(" + inner + ")";
    }
}
