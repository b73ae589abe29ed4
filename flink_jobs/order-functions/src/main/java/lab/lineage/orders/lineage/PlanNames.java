package lab.lineage.orders.lineage;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;

/**
 * Reads the names the compiled plan gives: the fields of a row type and the operator or function of a call. The plan
 * writes a row type either as Flink's serializable string ({@code ROW<`a` INT, `b` ROW<`c` STRING>> NOT NULL}) or,
 * when a field is a time attribute, as an object with a {@code fields} array; no type parser of the (hidden) planner
 * is available, so the string is split here at its top-level commas.
 */
final class PlanNames {
    /** {@code $UPPER$1}: a built-in operator's name with the plan's version suffix. */
    private static final Pattern INTERNAL = Pattern.compile("^\\$(.+)\\$\\d+$");
    private static final Pattern IDENTIFIER_PART = Pattern.compile("`((?:[^`]|``)*)`");

    private PlanNames() {}

    /** The field names of a row type, in order. */
    static List<String> fields(JsonNode rowType) {
        List<String> names = new ArrayList<>();
        if (rowType.isObject()) {
            rowType.path("fields").forEach(f -> names.add(f.path("name").asText()));
            return names;
        }
        String s = rowType.asText();
        if (!s.startsWith("ROW<")) {
            throw new IllegalArgumentException("not a row type: " + s);
        }
        int i = "ROW<".length();
        while (i < s.length() && s.charAt(i) != '>') {
            while (s.charAt(i) == ' ' || s.charAt(i) == ',') {
                i++;
            }
            StringBuilder name = new StringBuilder();
            i = quoted(s, i, '`', name);
            names.add(name.toString());
            i = endOfFieldType(s, i);
        }
        return names;
    }

    /** Reads the quoted text starting at {@code s[start]} (a doubled quote is one), returns the index after it. */
    private static int quoted(String s, int start, char quote, StringBuilder into) {
        int i = start + 1;
        while (true) {
            char c = s.charAt(i);
            if (c == quote && i + 1 < s.length() && s.charAt(i + 1) == quote) {
                into.append(quote);
                i += 2;
            } else if (c == quote) {
                return i + 1;
            } else {
                into.append(c);
                i++;
            }
        }
    }

    /** The index of the comma or closing bracket that ends the field type (and description) starting at i. */
    private static int endOfFieldType(String s, int i) {
        int depth = 0;
        while (true) {
            char c = s.charAt(i);
            if (c == '\'') {
                i = quoted(s, i, '\'', new StringBuilder());
                continue;
            }
            if (depth == 0 && (c == ',' || c == '>')) {
                return i;
            }
            if (c == '<' || c == '(') {
                depth++;
            } else if (c == '>' || c == ')') {
                depth--;
            }
            i++;
        }
    }

    /**
     * The name of the operator or function of a call or aggregate call: a built-in's SQL name ({@code CAST},
     * {@code IS NULL}, {@code SUM}), a temporary system function's registered name, a catalog function's object
     * name, an inline function's class.
     */
    static String operator(JsonNode call) {
        if (call.hasNonNull("internalName")) {
            String internal = call.get("internalName").asText();
            Matcher m = INTERNAL.matcher(internal);
            return m.matches() ? m.group(1) : internal;
        }
        if (call.hasNonNull("systemName")) {
            return call.get("systemName").asText();
        }
        if (call.hasNonNull("catalogName")) {
            return lastPart(call.get("catalogName").asText());
        }
        if (call.hasNonNull("class")) {
            String cls = call.get("class").asText();
            return cls.substring(cls.lastIndexOf('.') + 1);
        }
        return call.path("sqlKind").asText("CALL");
    }

    /** {@code `cat`.`db`.`name`} -> {@code name}. */
    private static String lastPart(String identifier) {
        Matcher m = IDENTIFIER_PART.matcher(identifier);
        String last = identifier;
        while (m.find()) {
            last = m.group(1).replace("``", "`");
        }
        return last;
    }
}
