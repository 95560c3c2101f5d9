#!/usr/bin/env bash
# Installs what the local run and the tests need and a fresh machine lacks:
# the real InfluxDB 1.8.10 server (built from source with the Go toolchain),
# and, with --test, InfluxDB 2.7.12 (scripts/influxd2.sh), Docker Compose v2 and Helm (built from source, to validate
# the compose files and the chart without a cluster) and Debian's Dropwizard Metrics and
# SLF4J jars for the test that drives Spark's real GraphiteReporter, and the
# pinned PySpark releases (realspark/testdata/pyspark-versions.txt) for the
# real-Spark suite, each in .deps/pyspark/<version>, and the suite's YARN
# (Hadoop's MiniYARNCluster and NodeManagers, built with Maven).
set -euo pipefail

influxd_bin="$(go env GOPATH)/bin/influxd"
if [ ! -x "$influxd_bin" ] && ! command -v influxd >/dev/null 2>&1; then
  echo "deps: building influxd 1.8.10 (about 90 s the first time)…" >&2
  go install github.com/influxdata/influxdb/cmd/influxd@v1.8.10
fi

# Docker Compose v2, built from source: its own parser validates the
# compose files (scripts/check-deploy.sh) without a Docker engine.
compose_bin="$(go env GOPATH)/bin/docker-compose"
if [ "${1:-}" = "--test" ] && [ ! -x "$compose_bin" ]; then
  echo "deps: building docker compose v2.29.7 (about 3 minutes the first time)…" >&2
  tmp="$(mktemp -d)"
  GOBIN="$tmp" go install github.com/docker/compose/v2/cmd@v2.29.7
  mv "$tmp/cmd" "$compose_bin"
  rm -rf "$tmp"
fi

# Helm, built from source: helm lint and helm template check the chart
# (scripts/check-deploy.sh).
helm_bin="$(go env GOPATH)/bin/helm"
if [ "${1:-}" = "--test" ] && [ ! -x "$helm_bin" ]; then
  echo "deps: building helm v3.22.0 (about 80 s the first time)…" >&2
  go install helm.sh/helm/v3/cmd/helm@v3.22.0
fi

if [ "${1:-}" = "--test" ]; then
  if [ ! -f /usr/share/java/metrics-graphite.jar ] || [ ! -f /usr/share/java/slf4j-api.jar ] || ! command -v javac >/dev/null 2>&1; then
    echo "deps: installing Java and the Dropwizard Metrics jars from Debian…" >&2
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    pkgs="libdropwizard-metrics-java libslf4j-java"
    command -v javac >/dev/null 2>&1 || pkgs="$pkgs default-jdk-headless"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null
  fi
fi

# InfluxDB 2.7.12's influxd, built from its Go module with Flux's Rust
# parser from crates.io (about 5 minutes the first time): the tests against
# a real InfluxDB 2.x (influx/influxdb2_test.go,
# cmd/sparkpulse/influxdb2_test.go).
if [ "${1:-}" = "--test" ]; then
  "$(dirname "$0")/influxd2.sh" >/dev/null
fi

# The real YARN of the real-Spark suite (realspark/yarncluster): Hadoop's
# ResourceManager and NodeManagers, pinned in its pom.xml and built with
# Maven into .deps/yarn, with Maven's repository in .deps/m2 (about a
# minute the first time, 110 MB). Rebuilt when its sources change.
if [ "${1:-}" = "--test" ]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  src="$root/realspark/yarncluster"
  sum="$(cat "$src/pom.xml" $(find "$src/src" -type f | sort) | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$root/.deps/yarn/built-from" 2>/dev/null)" != "$sum" ]; then
    if ! command -v mvn >/dev/null 2>&1; then
      echo "deps: installing Maven from Debian…" >&2
      sudo=""
      [ "$(id -u)" -ne 0 ] && sudo="sudo"
      $sudo apt-get update -qq
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
    fi
    echo "deps: building the YARN harness (Hadoop 3.4.1) into .deps/yarn…" >&2
    rm -rf "$root/.deps/yarn"
    mvn -q -B -f "$src/pom.xml" -Dmaven.repo.local="$root/.deps/m2" package
    echo "$sum" > "$root/.deps/yarn/built-from"
  fi
fi

# Real Spark: every pinned PySpark release in its own folder, which the
# repository ignores. pip builds each wheel from PyPI's sdist (about 30 s
# each, from pip's cache after the first time). Spark runs on the
# machine's JDK 17.
if [ "${1:-}" = "--test" ]; then
  if ! command -v java >/dev/null 2>&1; then
    echo "deps: installing a JDK 17 from Debian…" >&2
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
  fi
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for v in $(cat "$root/realspark/testdata/pyspark-versions.txt"); do
    dir="$root/.deps/pyspark/$v"
    if [ ! -x "$dir/pyspark/bin/spark-class" ]; then
      echo "deps: installing PySpark $v into .deps/pyspark/$v…" >&2
      rm -rf "$dir"
      PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --target "$dir" "pyspark==$v"
    fi
  done
fi
