// Serves Apache Iceberg's REST catalog protocol on the loopback address
// only: the servlet and adapter of Iceberg's own test fixture (iceberg-core
// tests, which its rest-fixture image runs) over a JDBC catalog in a SQLite
// file. Its file IO (ResolvingFileIO) writes the tables' metadata to local
// folders (HadoopFileIO) and to s3:// locations (S3FileIO, on the S3
// server that the system properties cdclake.s3.endpoint, cdclake.s3.access-key
// and cdclake.s3.secret-key name). The fixture's own main
// (RESTCatalogServer) listens on every interface.
//
// usage: RestCatalog HOST PORT CATALOG_DB WAREHOUSE_DIR
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;

public final class RestCatalog {
  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: RestCatalog HOST PORT CATALOG_DB WAREHOUSE_DIR");
      System.exit(2);
    }
    Map<String, String> props = new HashMap<>();
    props.put("catalog-impl", JdbcCatalog.class.getName());
    props.put("uri", "jdbc:sqlite:" + args[2]);
    props.put("jdbc.schema-version", "V1");
    // Concurrent commits wait for SQLite's lock rather than fail at once.
    props.put("jdbc.busy_timeout", "10000");
    props.put("warehouse", args[3]);
    props.put("io-impl", "org.apache.iceberg.io.ResolvingFileIO");
    String endpoint = System.getProperty("cdclake.s3.endpoint");
    if (endpoint != null) {
      props.put("s3.endpoint", endpoint);
      props.put("s3.path-style-access", "true");
      props.put("s3.access-key-id", System.getProperty("cdclake.s3.access-key"));
      props.put("s3.secret-access-key", System.getProperty("cdclake.s3.secret-key"));
      props.put("client.region", "us-east-1");
    }
    Catalog catalog = CatalogUtil.buildIcebergCatalog("rest_backend", props, new Configuration());
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Server server = new Server(new InetSocketAddress(args[0], Integer.parseInt(args[1])));
    server.setHandler(context);
    server.start();
    server.join();
  }
}
