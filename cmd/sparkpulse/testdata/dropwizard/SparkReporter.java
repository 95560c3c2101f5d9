import com.codahale.metrics.Clock;
import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.Histogram;
import com.codahale.metrics.MetricFilter;
import com.codahale.metrics.MetricRegistry;
import com.codahale.metrics.Timer;
import com.codahale.metrics.graphite.Graphite;
import com.codahale.metrics.graphite.GraphiteReporter;
import com.codahale.metrics.graphite.GraphiteSender;
import com.codahale.metrics.graphite.GraphiteUDP;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Sends Spark-shaped metrics through Dropwizard's real GraphiteReporter, the
 * reporter Spark's GraphiteSink uses, configured as Spark configures it
 * (rates per second, durations in milliseconds).
 *
 * One MetricRegistry and one reporter per simulated Spark process (the
 * driver and each executor), each with its own clock, as on a cluster. Each
 * report opens its own TCP connection (or sends one datagram per line over
 * UDP), exactly as the reporter does. Every line sent is also printed to
 * stdout, so the caller knows what went over the wire.
 *
 * Values are deterministic functions of (executor, report) documented in
 * sparkreporter_test.go, which checks them in InfluxDB.
 *
 * Arguments: host port tcp|udp prefix(- for none) namespace executors reports startEpochSeconds periodSeconds
 *            [firstReport [resetExecutor:atReport]]
 *
 * firstReport: reports before it are computed but not sent, so a second run
 * continues the cumulative history of a first one. resetExecutor:atReport:
 * before that report, that executor's counters restart from zero, as after
 * a JVM restart.
 */
public final class SparkReporter {
    /** A clock the program sets before each report. */
    static final class ManualClock extends Clock {
        volatile long millis;
        @Override public long getTick() { return millis * 1_000_000L; }
        @Override public long getTime() { return millis; }
    }

    /** Forwards to the real sender and echoes each line to stdout. */
    static final class Tee implements GraphiteSender {
        final GraphiteSender inner;
        final PrintStream out;
        Tee(GraphiteSender inner, PrintStream out) { this.inner = inner; this.out = out; }
        @Override public void connect() throws IOException { inner.connect(); }
        @Override public void send(String name, String value, long ts) throws IOException {
            inner.send(name, value, ts);
            synchronized (out) { out.println(name + " " + value + " " + ts); }
        }
        @Override public void flush() throws IOException { inner.flush(); }
        @Override public boolean isConnected() { return inner.isConnected(); }
        @Override public int getFailures() { return inner.getFailures(); }
        @Override public void close() throws IOException { inner.close(); }
    }

    /** One Spark process: its registry, reporter and clock. */
    static final class Process {
        final String id; // "driver" or the executor id
        final int n;     // 0 for the driver, else the executor number
        final MetricRegistry reg = new MetricRegistry();
        final ManualClock clock = new ManualClock();
        final GraphiteReporter reporter;
        final Map<String, Counter> counters = new HashMap<>();
        Histogram compilation;
        Timer messageProcessing;
        volatile int report;

        Process(String id, int n, String ns, GraphiteSender sender, String prefix) {
            this.id = id;
            this.n = n;
            String base = ns + "." + id + ".";
            GraphiteReporter.Builder b = GraphiteReporter.forRegistry(reg)
                .convertRatesTo(TimeUnit.SECONDS)
                .convertDurationsTo(TimeUnit.MILLISECONDS)
                .filter(MetricFilter.ALL)
                .withClock(clock);
            if (prefix != null) {
                b = b.prefixedWith(prefix);
            }
            reporter = b.build(sender);

            for (String c : new String[] {"cpuTime", "runTime", "succeededTasks"}) {
                counters.put(c, reg.counter(base + "executor." + c));
            }
            reg.register(base + "executor.threadpool.activeTasks", (Gauge<Integer>) () -> (n + report) % 5);
            reg.register(base + "ExecutorMetrics.JVMHeapMemory", (Gauge<Long>) () -> n * 1_000_000L + report);
            reg.register(base + "JVMCPU.jvmCpuTime", (Gauge<Long>) () -> (n + 1) * 1_000_000_000L * (report + 1));
            reg.register(base + "jvm.heap.usage", (Gauge<Double>) () -> 0.3125 + report * 0.01);
            reg.register(base + "jvm.pools.G1-Eden-Space.used", (Gauge<Long>) () -> 1000L * (n + 1));
            // Ratio gauges with a zero or undefined denominator: Spark really sends these.
            reg.register(base + "jvm.pools.G1-Survivor-Space.usage", (Gauge<Double>) () -> Double.NaN);
            reg.register(base + "jvm.pools.Metaspace.usage", (Gauge<Double>) () -> Double.POSITIVE_INFINITY);
            compilation = reg.histogram(base + "CodeGenerator.compilationTime");
            if (n == 0) {
                reg.register(base + "DAGScheduler.job.allJobs", (Gauge<Integer>) () -> report + 1);
                reg.register(base + "spark.streaming.orders.agg.inputRate-total", (Gauge<Double>) () -> 1532.4);
                counters.put("succeededJobs", reg.counter(base + "appStatus.jobs.succeededJobs"));
                messageProcessing = reg.timer(base + "DAGScheduler.messageProcessingTime");
            }
        }

        /** Sets the counters back to zero, as a restarted JVM would have them. */
        void resetCounters() {
            for (Counter c : counters.values()) {
                c.dec(c.getCount());
            }
        }

        /** Advances the metrics to report r, then reports once if send. */
        void report(int r, long startMillis, long periodMillis, boolean send) {
            report = r;
            counters.get("cpuTime").inc(n * 1_000_000_000L + r * 1000L);
            counters.get("runTime").inc(n * 100L + r);
            counters.get("succeededTasks").inc(n);
            compilation.update(n * 10 + r);
            if (n == 0) {
                counters.get("succeededJobs").inc();
                messageProcessing.update(r + 1, TimeUnit.MILLISECONDS);
            }
            // Each host has its own clock: executor n runs n seconds ahead.
            clock.millis = startMillis + r * periodMillis + n * 1000L;
            if (send) {
                reporter.report();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 9 || args.length > 11) {
            System.err.println("usage: SparkReporter host port tcp|udp prefix|- namespace executors reports startEpochSeconds periodSeconds [firstReport [resetExecutor:atReport]]");
            System.exit(2);
        }
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        boolean udp = args[2].equalsIgnoreCase("udp");
        String prefix = args[3].equals("-") ? null : args[3];
        String ns = args[4];
        int executors = Integer.parseInt(args[5]);
        int reports = Integer.parseInt(args[6]);
        long start = Long.parseLong(args[7]) * 1000L;
        long period = Long.parseLong(args[8]) * 1000L;
        int firstReport = args.length > 9 ? Integer.parseInt(args[9]) : 0;
        int resetExecutor = -1, resetAt = -1;
        if (args.length > 10) {
            String[] p = args[10].split(":");
            resetExecutor = Integer.parseInt(p[0]);
            resetAt = Integer.parseInt(p[1]);
        }

        List<Process> procs = new ArrayList<>();
        for (int i = 0; i <= executors; i++) {
            InetSocketAddress addr = new InetSocketAddress(host, port);
            GraphiteSender sender = udp ? new GraphiteUDP(addr) : new Graphite(addr);
            procs.add(new Process(i == 0 ? "driver" : Integer.toString(i), i, ns, new Tee(sender, System.out), prefix));
        }
        for (int r = 0; r < reports; r++) {
            for (Process p : procs) {
                if (p.n == resetExecutor && r == resetAt) {
                    p.resetCounters();
                }
                p.report(r, start, period, r >= firstReport);
            }
        }
        System.out.flush();
    }
}
