// Package realspark is the real-Spark suite: it runs the pinned PySpark
// releases (testdata/pyspark-versions.txt, installed by scripts/deps.sh
// under .deps/pyspark/<version>) in local-cluster mode, with real executor
// JVMs, a real History Server, the real sparkpulse binary and a real
// influxd, and checks what lands in InfluxDB against what Spark itself
// answers.
//
// The package has tests only. Everything it starts listens on 127.0.0.1:
// Spark is told so through SPARK_LOCAL_IP, SPARK_LOCAL_HOSTNAME and
// spark.driver.host/bindAddress, and a test fails if Spark logs that it
// uses another address. Outside CI a missing install skips with the
// command that installs it; in CI (CI set) it fails.
//
// `go test ./realspark -run TestRealSpark -update` records each version's
// run under testdata/spark-real/<version>/ at the repository root: the
// Graphite lines Spark sent, the live REST API's answers and the set of
// metric names, which fast tests elsewhere read.
package realspark
