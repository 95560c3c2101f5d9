package sparkpulse.yarn;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.FileReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.function.BooleanSupplier;

import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;

/**
 * A real YARN on loopback for the real-Spark suite: Hadoop's
 * ResourceManager, as MiniYARNCluster starts it (ports 0, the bound ones
 * written back to its configuration), and NodeManagers started and stopped
 * on command, each with settings of its own, registering over RPC as on a
 * real cluster.
 *
 * <pre>
 * java sparkpulse.yarn.YarnCluster WORK_DIR SETTINGS
 * </pre>
 *
 * SETTINGS is a properties file: {@code nodes=a,b} names the NodeManagers
 * started first, {@code node.<name>.<key>=<value>} is a setting of
 * NodeManager {@code <name>} only, and every other key a setting of the
 * ResourceManager and of every NodeManager. The Go test writes it: it is
 * the one place the cluster's settings are chosen.
 *
 * It writes WORK_DIR/conf/yarn-site.xml (what a client such as spark-submit
 * reads from HADOOP_CONF_DIR) and prints on stdout, one line each:
 * {@code NODE <name> <node id>} for each NodeManager the ResourceManager
 * has seen register, {@code READY <web address>} once the first ones have,
 * and {@code STOPPED <name> <node state>} once the ResourceManager has seen
 * a stopped one leave. It reads commands on stdin: {@code start <name>},
 * {@code stop <name>}; at the end of stdin it stops everything and exits.
 */
public final class YarnCluster {
  private static final long WAIT_MS = 120_000;

  private final File work;
  private final Properties settings;
  private final MiniYARNCluster cluster;
  private final Map<String, NodeManager> nodes = new LinkedHashMap<>();
  private final PrintStream out;

  private YarnCluster(File work, Properties settings, PrintStream out) {
    this.work = work;
    this.settings = settings;
    this.out = out;
    // One ResourceManager and no NodeManager of MiniYARNCluster's own:
    // those would share one configuration and register in-process.
    this.cluster = new MiniYARNCluster("sparkpulse", 1, 0, 1, 1);
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: YarnCluster WORK_DIR SETTINGS");
      System.exit(2);
    }
    Properties settings = new Properties();
    try (FileReader r = new FileReader(args[1], StandardCharsets.UTF_8)) {
      settings.load(r);
    }
    // Hadoop logs to stderr; stdout carries only the lines above.
    PrintStream out = new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
    System.setOut(System.err);
    YarnCluster c = new YarnCluster(new File(args[0]), settings, out);
    c.start();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      String[] f = line.trim().split("\\s+");
      if (f.length == 2 && f[0].equals("start")) {
        c.startNode(f[1]);
      } else if (f.length == 2 && f[0].equals("stop")) {
        c.stopNode(f[1]);
      } else if (!line.isBlank()) {
        throw new IllegalArgumentException("unknown command: " + line);
      }
    }
    c.stop();
    System.exit(0);
  }

  private YarnConfiguration base() {
    YarnConfiguration conf = new YarnConfiguration();
    for (String k : settings.stringPropertyNames()) {
      if (!k.startsWith("node.") && !k.equals("nodes")) {
        conf.set(k, settings.getProperty(k));
      }
    }
    return conf;
  }

  private void start() throws Exception {
    cluster.init(base());
    cluster.start();
    File conf = new File(work, "conf");
    conf.mkdirs();
    try (OutputStream o = new FileOutputStream(new File(conf, "yarn-site.xml"))) {
      cluster.getConfig().writeXml(o);
    }
    for (String name : settings.getProperty("nodes", "").split(",")) {
      if (!name.isBlank()) {
        startNode(name.trim());
      }
    }
    out.println("READY " + cluster.getConfig().get(YarnConfiguration.RM_WEBAPP_ADDRESS));
  }

  private ResourceManager rm() {
    return cluster.getResourceManager();
  }

  private void startNode(String name) throws Exception {
    if (nodes.containsKey(name)) {
      throw new IllegalStateException("NodeManager " + name + " was started already");
    }
    // The ResourceManager's configuration, with its bound addresses.
    YarnConfiguration conf = new YarnConfiguration(cluster.getConfig());
    File dir = new File(work, "nm-" + name);
    for (String sub : new String[] {"local", "log", "remote-log"}) {
      new File(dir, sub).mkdirs();
    }
    conf.set(YarnConfiguration.NM_LOCAL_DIRS, new File(dir, "local").getAbsolutePath());
    conf.set(YarnConfiguration.NM_LOG_DIRS, new File(dir, "log").getAbsolutePath());
    conf.set(YarnConfiguration.NM_REMOTE_APP_LOG_DIR, new File(dir, "remote-log").getAbsolutePath());
    conf.set(YarnConfiguration.NM_ADDRESS, "localhost:0");
    conf.set(YarnConfiguration.NM_LOCALIZER_ADDRESS, "localhost:0");
    conf.set(YarnConfiguration.NM_COLLECTOR_SERVICE_ADDRESS, "localhost:0");
    String prefix = "node." + name + ".";
    for (String k : settings.stringPropertyNames()) {
      if (k.startsWith(prefix)) {
        conf.set(k.substring(prefix.length()), settings.getProperty(k));
      }
    }
    NodeManager nm = new NodeManager();
    // Guice's servlet filter is one per JVM: a NodeManager's web server
    // would take over the ResourceManager's pages and REST API. Nothing
    // here reads the NodeManagers' own pages.
    nm.init(conf);
    nm.disableWebServer();
    nm.start();
    nodes.put(name, nm);
    NodeId id = nm.getNMContext().getNodeId();
    await("NodeManager " + name + " registered", () -> {
      RMNode n = rm().getRMContext().getRMNodes().get(id);
      return n != null && n.getState() == NodeState.RUNNING;
    });
    out.println("NODE " + name + " " + id);
  }

  private void stopNode(String name) throws Exception {
    NodeManager nm = nodes.get(name);
    if (nm == null) {
      throw new IllegalStateException("no NodeManager " + name);
    }
    NodeId id = nm.getNMContext().getNodeId();
    nm.stop();
    await("NodeManager " + name + " gone", () -> !rm().getRMContext().getRMNodes().containsKey(id));
    RMNode gone = rm().getRMContext().getInactiveRMNodes().get(id);
    out.println("STOPPED " + name + " " + (gone == null ? "UNKNOWN" : gone.getState()));
  }

  private void stop() {
    for (NodeManager nm : nodes.values()) {
      nm.stop();
    }
    cluster.stop();
  }

  private static void await(String what, BooleanSupplier done) throws InterruptedException {
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (!done.getAsBoolean()) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException(what + ": not within " + WAIT_MS + " ms");
      }
      Thread.sleep(100);
    }
  }
}
