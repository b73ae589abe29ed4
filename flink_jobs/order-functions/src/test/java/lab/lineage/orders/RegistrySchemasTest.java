package lab.lineage.orders;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Against a real HTTP server that answers like the registry's Confluent-compatible API. */
class RegistrySchemasTest {
    HttpServer server;
    final List<String> asked = new ArrayList<>();
    final List<String> auth = new ArrayList<>();
    String base;

    @BeforeEach
    void start() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/apis/ccompat/v7/schemas/ids/", exchange -> {
            String id = exchange.getRequestURI().getPath().replaceAll(".*/", "");
            asked.add(id);
            auth.add(String.valueOf(exchange.getRequestHeaders().getFirst("Authorization")));
            int status = id.equals("7") ? 200 : id.equals("500") ? 500 : 404;
            String body = status == 200
                    ? "{\"schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"O\\\",\\\"fields\\\":[]}\"}"
                    : "{\"error_code\":40403,\"message\":\"Schema not found\"}";
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(status, bytes.length);
            exchange.getResponseBody().write(bytes);
            exchange.close();
        });
        server.start();
        base = "http://127.0.0.1:" + server.getAddress().getPort() + "/apis/ccompat/v7/";
    }

    @AfterEach
    void stop() {
        server.stop(0);
    }

    @Test
    void aKnownIdIsFetchedOnceAndAnUnknownIdIsEmpty() throws IOException {
        RegistrySchemas schemas = new RegistrySchemas(base, "", Duration.ofSeconds(5));
        assertEquals("O", schemas.get(7).orElseThrow().getName());
        assertEquals("O", schemas.get(7).orElseThrow().getName());
        assertTrue(schemas.get(99).isEmpty());
        assertTrue(schemas.get(99).isEmpty());
        assertEquals(List.of("7", "99"), asked, "answers are cached");
        assertEquals("null", auth.get(0), "no credentials, no header");
    }

    @Test
    void basicAuthIsSentAndRegistryTroubleThrowsWithTheUrl() {
        RegistrySchemas schemas = new RegistrySchemas(base, "lab:s3cret", Duration.ofSeconds(5));
        IOException e = assertThrows(IOException.class, () -> schemas.get(500));
        assertTrue(e.getMessage().contains("answered 500") && e.getMessage().contains("/schemas/ids/500"),
                e.getMessage());
        assertEquals("Basic bGFiOnMzY3JldA==", auth.get(0));
    }

    @Test
    void aDeadRegistryThrows() {
        server.stop(0);
        RegistrySchemas schemas = new RegistrySchemas(base, "", Duration.ofSeconds(2));
        assertThrows(IOException.class, () -> schemas.get(7));
    }
}
