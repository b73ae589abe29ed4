package lab.lineage.orders;

import java.io.IOException;
import java.util.Optional;
import org.apache.avro.Schema;

/** Writer schemas by id: the registry in a job, a map in the unit tests. */
public interface SchemaSource {
    /** The schema, or empty when the registry does not know the id; throws when the registry cannot answer. */
    Optional<Schema> get(int schemaId) throws IOException;
}
