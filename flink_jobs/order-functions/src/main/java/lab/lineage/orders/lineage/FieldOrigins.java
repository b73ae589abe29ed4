package lab.lineage.orders.lineage;

import java.io.Serializable;
import java.util.Map;

/**
 * Implemented by a table function that decodes one raw argument into named fields, so that {@link PlanLineage} can
 * say which field of the decoded argument each output field is: the compiled plan only shows that the function's
 * outputs are computed from the argument's column as a whole. Serializable because the function instance that
 * implements it travels to the TaskManagers.
 */
public interface FieldOrigins extends Serializable {
    /**
     * Output field name (as the function's result type names it) -> name of the field of the decoded argument it is
     * copied from. An output field absent from the map is computed from the whole argument.
     */
    Map<String, String> fieldOrigins();
}
