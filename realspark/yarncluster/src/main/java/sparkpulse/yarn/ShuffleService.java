package sparkpulse.yarn;

import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.api.ApplicationInitializationContext;
import org.apache.hadoop.yarn.server.api.ApplicationTerminationContext;
import org.apache.hadoop.yarn.server.api.AuxiliaryService;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.server.TransportServer;
import org.apache.spark.network.shuffle.ExternalBlockHandler;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;

/**
 * Spark's external shuffle service as a NodeManager auxiliary service
 * ({@code yarn.nodemanager.aux-services=spark_shuffle}): Spark's own
 * ExternalBlockHandler, from the jars of the Spark release under test
 * (the aux service's class path), served on
 * {@code spark.shuffle.service.port}.
 *
 * Spark's YarnShuffleService (spark-network-yarn) does this on a real
 * cluster; its jar is not to be had from the registries these tests may
 * use, so this class stands in for its YARN side. Executors register with
 * the shuffle server of their host, by host and port: with every
 * NodeManager of this cluster on one host, there is one server per host
 * as on a real cluster, started by the first NodeManager's service and
 * shared, through the JVM's system properties (the one object each
 * NodeManager's own class loader shares), until the last one stops.
 * Applications are not authenticated ({@code spark.authenticate} off).
 */
public final class ShuffleService extends AuxiliaryService {
  private static final String SHARED = "sparkpulse.yarn.shuffle-server";

  private Object[] shared; // {AtomicInteger users, Consumer<String> removeApp, Runnable close}

  public ShuffleService() {
    super("spark_shuffle");
  }

  @Override
  protected void serviceInit(Configuration conf) throws Exception {
    Properties props = System.getProperties();
    synchronized (props) {
      shared = (Object[]) props.get(SHARED);
      if (shared == null) {
        Map<String, String> spark = new HashMap<>();
        for (Map.Entry<String, String> e : conf) {
          if (e.getKey().startsWith("spark.")) {
            spark.put(e.getKey(), e.getValue());
          }
        }
        int port = Integer.parseInt(spark.getOrDefault("spark.shuffle.service.port", "7337"));
        TransportConf tc = new TransportConf("shuffle", new MapConfigProvider(spark));
        ExternalBlockHandler handler = new ExternalBlockHandler(tc, null);
        TransportContext ctx = new TransportContext(tc, handler, true);
        TransportServer server = ctx.createServer("127.0.0.1", port, Collections.emptyList());
        Consumer<String> removeApp = app -> handler.applicationRemoved(app, false);
        Runnable close = () -> {
          server.close();
          handler.close();
          ctx.close();
        };
        shared = new Object[] {new AtomicInteger(), removeApp, close};
        props.put(SHARED, shared);
      }
      ((AtomicInteger) shared[0]).incrementAndGet();
    }
    super.serviceInit(conf);
  }

  @Override
  protected void serviceStop() throws Exception {
    Properties props = System.getProperties();
    synchronized (props) {
      if (shared != null && ((AtomicInteger) shared[0]).decrementAndGet() == 0) {
        ((Runnable) shared[2]).run();
        props.remove(SHARED);
      }
      shared = null;
    }
    super.serviceStop();
  }

  @Override
  public void initializeApplication(ApplicationInitializationContext context) {}

  @Override
  @SuppressWarnings("unchecked")
  public void stopApplication(ApplicationTerminationContext context) {
    Object[] s = shared;
    if (s != null) {
      ((Consumer<String>) s[1]).accept(context.getApplicationId().toString());
    }
  }

  @Override
  public ByteBuffer getMetaData() {
    return ByteBuffer.allocate(0);
  }
}
