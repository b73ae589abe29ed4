package lab.lineage.orders;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.apache.avro.Schema;

/**
 * Writer schemas by id from the registry's Confluent-compatible API ({@code GET /schemas/ids/{id}}), cached for the
 * life of the task. An unknown id is an answer (the record is dead-lettered); any other registry trouble throws, so
 * the job fails and retries from its checkpoint instead of dead-lettering good records.
 */
public final class RegistrySchemas implements SchemaSource {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String baseUrl;
    private final String authorization;
    private final HttpClient http;
    private final Duration timeout;
    private final Map<Integer, Optional<Schema>> cache = new HashMap<>();

    /** {@code userInfo}: "user:password" of a registry behind basic auth, or empty. */
    public RegistrySchemas(String baseUrl, String userInfo, Duration timeout) {
        this.baseUrl = baseUrl.endsWith("/") ? baseUrl.substring(0, baseUrl.length() - 1) : baseUrl;
        this.authorization = userInfo == null || userInfo.isEmpty()
                ? null
                : "Basic " + Base64.getEncoder().encodeToString(userInfo.getBytes(StandardCharsets.UTF_8));
        this.timeout = timeout;
        this.http = HttpClient.newBuilder().connectTimeout(timeout).build();
    }

    @Override
    public Optional<Schema> get(int schemaId) throws IOException {
        Optional<Schema> cached = cache.get(schemaId);
        if (cached != null) {
            return cached;
        }
        Optional<Schema> fetched = fetch(schemaId);
        cache.put(schemaId, fetched);
        return fetched;
    }

    private Optional<Schema> fetch(int schemaId) throws IOException {
        String url = baseUrl + "/schemas/ids/" + Integer.toUnsignedString(schemaId);
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).timeout(timeout).GET();
        if (authorization != null) {
            request.header("Authorization", authorization);
        }
        HttpResponse<String> response;
        try {
            response = http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while asking the schema registry " + url, e);
        }
        if (response.statusCode() == 404) {
            return Optional.empty();
        }
        if (response.statusCode() != 200) {
            throw new IOException("schema registry answered " + response.statusCode() + " for " + url + ": "
                    + abbreviate(response.body()) + " (check the registry URL and credentials of the job)");
        }
        JsonNode body = JSON.readTree(response.body());
        JsonNode schema = body == null ? null : body.get("schema");
        if (schema == null || !schema.isTextual()) {
            throw new IOException("schema registry answer for " + url + " holds no schema: " + abbreviate(
                    response.body()));
        }
        return Optional.of(new Schema.Parser().setValidateDefaults(false).parse(schema.asText()));
    }

    private static String abbreviate(String text) {
        return text.length() > 300 ? text.substring(0, 300) + "..." : text;
    }
}
