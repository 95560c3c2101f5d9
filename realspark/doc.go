// Package realspark is the real-Spark suite: it runs the pinned PySpark
// releases (testdata/pyspark-versions.txt, installed by scripts/deps.sh
// under .deps/pyspark/<version>) with real executor JVMs, a real History
// Server, the real sparkpulse binary and a real influxd, and checks what
// lands in InfluxDB against what Spark itself answers, where Spark's
// users run it:
//
//   - TestRealSpark: local-cluster mode, two workloads (realspark_test.go);
//   - TestYARN: a real YARN — Hadoop's ResourceManager and NodeManagers
//     (realspark/yarncluster, built by scripts/deps.sh under .deps/yarn),
//     memory enforced, the capacity scheduler's preemption, Spark's
//     shuffle service — in client and cluster mode, read through the
//     ResourceManager's proxy (yarn_test.go);
//   - TestStandalone: Spark's standalone master and two workers, one
//     killed (standalone_test.go).
//
// The package has tests only. Everything it starts listens on 127.0.0.1:
// Spark is told so through SPARK_LOCAL_IP, SPARK_LOCAL_HOSTNAME and
// spark.driver.host/bindAddress (and YARN's containers through
// spark.executorEnv and spark.yarn.appMasterEnv), YARN through its
// bind-host settings, and a test fails if Spark logs that it uses another
// address. Outside CI a missing install skips with the command that
// installs it; in CI (CI set) it fails.
//
// `go test ./realspark -update` records each version's runs under
// testdata/spark-real/<version>/ at the repository root: the Graphite
// lines Spark sent, the live REST API's answers and the set of metric
// names, and on YARN and standalone each application's answers, what
// YARN said of it and the cause of each executor's removal, which fast
// tests elsewhere read.
package realspark
