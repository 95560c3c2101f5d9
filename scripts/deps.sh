#!/usr/bin/env bash
# Installs what the tests and the local run need and a fresh machine lacks:
# the real InfluxDB 1.8.10 server (built from source with the Go toolchain),
# and, with --java, Debian's Dropwizard Metrics and SLF4J jars for the test
# that drives Spark's real GraphiteReporter.
set -euo pipefail

influxd_bin="$(go env GOPATH)/bin/influxd"
if [ ! -x "$influxd_bin" ] && ! command -v influxd >/dev/null 2>&1; then
  echo "deps: building influxd 1.8.10 (about 90 s the first time)…" >&2
  go install github.com/influxdata/influxdb/cmd/influxd@v1.8.10
fi

if [ "${1:-}" = "--java" ]; then
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
