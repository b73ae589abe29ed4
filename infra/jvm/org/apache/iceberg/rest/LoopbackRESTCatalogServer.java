package org.apache.iceberg.rest;

import java.lang.reflect.Method;
import java.util.Map;
import org.eclipse.jetty.compression.gzip.GzipCompression;
import org.eclipse.jetty.compression.server.CompressionHandler;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * Runs Iceberg's REST fixture (RESTCatalogServer) but binds Jetty to one host (default 127.0.0.1)
 * instead of all interfaces. Configuration is the fixture's own: CATALOG_* env vars (CATALOG_URI,
 * CATALOG_REST_PORT, ...). Extra: REST_HOST (bind address). Lives in the fixture's package because
 * the fixture's constructors and adapter are package-private.
 */
public class LoopbackRESTCatalogServer {
  public static void main(String[] args) throws Exception {
    long t0 = System.nanoTime();
    String host = System.getenv().getOrDefault("REST_HOST", "127.0.0.1");
    RESTCatalogServer fixture = new RESTCatalogServer(); // reads CATALOG_* env
    Method init = RESTCatalogServer.class.getDeclaredMethod("initializeBackendCatalog");
    init.setAccessible(true);
    Object ctx = init.invoke(fixture);
    RESTServerCatalogAdapter adapter =
        new RESTServerCatalogAdapter((RESTCatalogServer.CatalogContext) ctx);
    Map<String, String> conf = ((RESTCatalogServer.CatalogContext) ctx).configuration();
    int port = Integer.parseInt(conf.getOrDefault("rest.port", "8181"));

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    CompressionHandler compression = new CompressionHandler();
    compression.putCompression(new GzipCompression());
    context.insertHandler(compression);

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    System.out.printf("LOOPBACK_REST_READY http://%s:%d/ startup_ms=%d%n", host, port,
        (System.nanoTime() - t0) / 1_000_000);
    System.out.flush();
    server.join();
  }
}
