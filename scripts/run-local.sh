#!/usr/bin/env bash
# `make run`: a local InfluxDB 1.8.10 (data under .run/), sparkpulse with the
# built-in Spark mapping on port 2003, and `sparkpulse simulate` sending the
# traffic of two Spark applications with four executors each and serving
# their Spark REST API on port 18080, which sparkpulse polls for job, stage
# and SQL annotations. Every 10 s it prints what has arrived in InfluxDB.
# Ctrl-C stops all three.
set -euo pipefail
cd "$(dirname "$0")/.."

influx_url="http://127.0.0.1:8086"
run_dir="$PWD/.run"
mkdir -p "$run_dir/influxdb"
pids=()
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

if curl -sf "$influx_url/ping" >/dev/null 2>&1; then
  echo "run: an InfluxDB already answers at $influx_url; using it"
else
  influxd=$(command -v influxd || echo "$(go env GOPATH)/bin/influxd")
  cat >"$run_dir/influxdb.conf" <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:8088"
[meta]
  dir = "$run_dir/influxdb/meta"
[data]
  dir = "$run_dir/influxdb/data"
  wal-dir = "$run_dir/influxdb/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:8086"
  log-enabled = false
[monitor]
  store-enabled = false
[logging]
  level = "warn"
CONF
  "$influxd" run -config "$run_dir/influxdb.conf" >"$run_dir/influxd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 120); do
    curl -sf "$influx_url/ping" >/dev/null 2>&1 && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "run: influxd failed to start:"; cat "$run_dir/influxd.log"; exit 1; }
    sleep 0.5
  done
  echo "run: InfluxDB 1.8.10 at $influx_url (data in .run/influxdb, log in .run/influxd.log)"
fi

bin/sparkpulse run --influxdb-url "$influx_url" --database spark --create-database --state-dir "$run_dir/state" \
  --annotate-url http://127.0.0.1:18080 2>"$run_dir/sparkpulse.log" &
pids+=($!)
for _ in $(seq 1 60); do
  curl -sf http://127.0.0.1:9108/healthz >/dev/null 2>&1 && break
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "run: sparkpulse failed to start:"; cat "$run_dir/sparkpulse.log"; exit 1; }
  sleep 0.5
done
echo "run: sparkpulse listening on :2003 (tcp+udp), metrics at http://127.0.0.1:9108/metrics, log in .run/sparkpulse.log"

bin/sparkpulse simulate --addr 127.0.0.1:2003 --apps 4 --executors 4 --period 10s --ui-addr 127.0.0.1:18080 \
  --app-lifetime 5m --executor-lifetime 2m >"$run_dir/simulate.log" 2>&1 &
pids+=($!)
echo "run: simulating 4 Spark apps × 4 executors, a report every 10 s, their REST API on :18080;"
echo "     each app ends after 5 minutes and a new one starts, executors are replaced every 2 minutes. Ctrl-C to stop."

query() {
  curl -sG "$influx_url/query" --data-urlencode db=spark --data-urlencode "q=$1"
}
show() {
  python3 -c '
import json, sys
res = json.load(sys.stdin)["results"][0]
for s in res.get("series", []):
    tags = " ".join(f"{k}={v}" for k, v in sorted(s.get("tags", {}).items()))
    for row in s["values"]:
        print("   ", s["name"], tags, " ".join(str(v) for v in row[1:]))
' 2>/dev/null || cat
}
while sleep 10; do
  echo "--- $(date +%T): measurements in database spark: $(query 'SHOW MEASUREMENTS' | grep -o '"values":\[.*\]' | grep -o '\["' | wc -l)"
  echo "    latest executor.cpuTime.count (ns of task CPU) per app and executor:"
  query 'SELECT last("value") FROM "cpuTime.count" GROUP BY "applicationid", "process"' | show
  echo "    task CPU seconds per app over the last minute, summed from the ingest-time deltas:"
  query 'SELECT sum("delta") / 1000000000 FROM "cpuTime.count" WHERE time > now() - 1m GROUP BY "applicationid"' | show
  echo "    latest job annotations (from the Spark REST API):"
  query 'SELECT last("title"), last("text") FROM "spark_job" GROUP BY "applicationid"' | show
  echo "    applications that ended (a minute after their end): core-hours held, CPU used, reconciliation, advice:"
  query 'SELECT "executor_core_seconds" / 3600, "cpu_utilisation", "recommended" FROM "spark_app_usage" WHERE "fact" = '"'"'end'"'"' GROUP BY "applicationid"' | show
  query 'SELECT "verdict", "short_executors" FROM "spark_reconcile" GROUP BY "applicationid"' | show
done
