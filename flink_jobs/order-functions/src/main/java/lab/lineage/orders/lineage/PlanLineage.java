package lab.lineage.orders.lineage;

import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Column-level lineage of a Flink Table API / SQL job, read from its compiled plan: for every INSERT, each written
 * column's source columns and how it is computed from them, and the columns that decide which rows are written.
 *
 * <p>The compiled plan ({@code StatementSet.compilePlan()}) is the public, versioned form of the optimized job; the
 * planner's own classes (Calcite's metadata queries among them) sit behind flink-table-planner-loader's classloader
 * and are not an API, so the plan's JSON is read instead. The result is JSON (see {@link LineageJson}) so that the
 * PyFlink driver, which calls this over py4j, can pass it on as it is.
 */
public final class PlanLineage {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private PlanLineage() {}

    /**
     * The lineage of a compiled plan, from the plan alone. A table the plan names by identifier only (a temporary
     * table) then has no options, and a sink of that kind names its columns as the query does.
     *
     * @param compiledPlanJson {@code CompiledPlan.asJsonString()}
     * @param functions table functions by registered name that say which field of their decoded argument each
     *     output field is (may be null)
     */
    public static String fromCompiledPlan(String compiledPlanJson, Map<String, FieldOrigins> functions) {
        return fromCompiledPlan(compiledPlanJson, functions, identifier -> null);
    }

    /**
     * The lineage of the statement set's plan, the tables the plan names by identifier only resolved by
     * {@code tEnv} (their columns and options). Compiling does not execute or change the set.
     */
    public static String ofStatementSet(TableEnvironment tEnv, StatementSet set, Map<String, FieldOrigins> functions) {
        return fromCompiledPlan(set.compilePlan().asJsonString(), functions,
                identifier -> TableFacts.of(tEnv, identifier));
    }

    static String fromCompiledPlan(String compiledPlanJson, Map<String, FieldOrigins> functions,
            Function<String, TableFacts> catalog) {
        PlanWalker walker;
        try {
            walker = new PlanWalker(MAPPER.readTree(compiledPlanJson), functions == null ? Map.of() : functions,
                    catalog);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not a compiled plan: " + e.getOriginalMessage(), e);
        }
        List<PlanWalker.Sink> sinks = walker.sinks();
        List<String> sources = walker.sources();
        return new LineageJson(table -> walker.facts(table).options()).write(sinks, sources);
    }
}
