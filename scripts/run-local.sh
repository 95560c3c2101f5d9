#!/usr/bin/env bash
# `make run`: a local InfluxDB 1.8.10 (data under .run/), sparkpulse with the
# built-in Spark mapping on port 2003, and `sparkpulse simulate` sending the
# traffic of four Spark applications with four executors each and serving
# their Spark REST API on port 18080, which sparkpulse polls for job, stage
# and SQL annotations; `sparkpulse watch` shows what arrives, on one screen.
#
# Ctrl-C stops them in order: the simulator, then sparkpulse (which delivers
# what it holds, or keeps it in its disk queue under .run/state), then the
# view, then InfluxDB. The exit status is 0 when everything stopped cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

influx_url="http://127.0.0.1:8086"
admin="127.0.0.1:2033"
ui="127.0.0.1:18080"
db="spark"
period="10s"
run_dir="$PWD/.run"
mkdir -p "$run_dir/influxdb"

# Job control gives every child its own process group: Ctrl-C reaches this
# script only, which stops the children one after the other.
set -m

influxd_pid="" sparkpulse_pid="" view_pid="" sim_pid="" sleep_pid=""
stopping=""
failed=""

# stop_one NAME PID: SIGINT, then wait for it to end. A second Ctrl-C
# meanwhile is passed on: sparkpulse then stops at once, saying what it
# abandons.
stop_one() {
  local name=$1 pid=$2 rc=0
  [ -n "$pid" ] || return 0
  kill -INT "$pid" 2>/dev/null || return 0
  trap 'echo "run: second Ctrl-C: $name stops at once"; kill -INT "$pid" 2>/dev/null || true' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    rc=0
    wait "$pid" || rc=$?
  done
  trap '' INT TERM
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 127 ]; then
    echo "run: $name exited with status $rc"
    failed=1
  fi
}

cleanup() {
  [ -z "$stopping" ] || return 0
  stopping=1
  trap '' INT TERM
  local began=$SECONDS
  [ -z "$sleep_pid" ] || kill -INT "$sleep_pid" 2>/dev/null || true
  echo
  echo "run: stopping: the simulator, then sparkpulse (delivering what it holds), the view, InfluxDB"
  stop_one simulator "$sim_pid"
  stop_one sparkpulse "$sparkpulse_pid"
  [ -z "$sparkpulse_pid" ] || grep -E 'kept in the disk queue|points lost|not all delivered' "$run_dir/sparkpulse.log" | tail -n 3 | sed 's/^/run: sparkpulse: /' || true
  stop_one view "$view_pid"
  stop_one influxd "$influxd_pid"
  echo "run: stopped in $((SECONDS - began)) s$([ -n "$failed" ] && echo ", not cleanly (logs in .run/)" || true)"
}

on_signal() {
  cleanup
  [ -z "$failed" ] && exit 0 || exit 1
}
trap on_signal INT TERM
trap 'rc=$?; cleanup; exit $rc' EXIT

if curl -sf "$influx_url/ping" >/dev/null 2>&1; then
  echo "run: an InfluxDB already answers at $influx_url; using it (it is left running at the end)"
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
  # As docker-compose.yml's: every application adds series and an
  # applicationid value (docs/retention.md).
  index-version = "tsi1"
  max-series-per-database = 0
  max-values-per-tag = 0
[http]
  bind-address = "127.0.0.1:8086"
  log-enabled = false
[monitor]
  store-enabled = false
[logging]
  level = "warn"
CONF
  "$influxd" run -config "$run_dir/influxdb.conf" >"$run_dir/influxd.log" 2>&1 &
  influxd_pid=$!
  for _ in $(seq 1 120); do
    curl -sf "$influx_url/ping" >/dev/null 2>&1 && break
    kill -0 "$influxd_pid" 2>/dev/null || { echo "run: influxd failed to start:"; cat "$run_dir/influxd.log"; influxd_pid=""; exit 1; }
    sleep 0.5
  done
  echo "run: InfluxDB 1.8.10 at $influx_url (data in .run/influxdb, log in .run/influxd.log)"
  # The metrics and facts kept two weeks, as docker-compose.yml's
  # influxdb-init.iql has them; a database an earlier run made is left as
  # it is. The history database sparkpulse creates keeps everything.
  curl -sf -XPOST "$influx_url/query" --data-urlencode "q=CREATE DATABASE \"$db\" WITH DURATION 14d SHARD DURATION 1d NAME \"two_weeks\"" >/dev/null 2>&1 || true
fi

# The settings, in a file that report and watch read as run does.
config="$run_dir/sparkpulse.toml"
cat >"$config" <<EOF
# Written by make run (scripts/run-local.sh), for its sparkpulse and for
#   bin/sparkpulse report --config .run/sparkpulse.toml --fleet
#   bin/sparkpulse report --config .run/sparkpulse.toml APP_ID
state-dir = "$run_dir/state"

[influxdb]
url = "$influx_url"
create-database = true

[admin]
bind-address = "$admin"

[annotate]
urls = ["http://$ui"]
history-database = "${db}_history"   # each ended application's usage, kept for good (docs/retention.md)

[[graphite]]
bind-address = ":2003"
protocol = "tcp"
database = "$db"

[[graphite]]
bind-address = ":2003"
protocol = "udp"
database = "$db"
EOF
flags=(--config "$config")
bin/sparkpulse run "${flags[@]}" 2>"$run_dir/sparkpulse.log" &
sparkpulse_pid=$!
for _ in $(seq 1 60); do
  curl -sf "http://$admin/readyz" >/dev/null 2>&1 && break
  kill -0 "$sparkpulse_pid" 2>/dev/null || { echo "run: sparkpulse failed to start:"; cat "$run_dir/sparkpulse.log"; sparkpulse_pid=""; exit 1; }
  sleep 0.5
done
echo "run: sparkpulse listening on :2003 (tcp+udp), metrics at http://$admin/metrics, log in .run/sparkpulse.log"

# A counter first seen within sparkpulse's first-sample grace after its
# start may have been counting before: it gets no delta, and the accounting
# would say so (verdict no_delta). The simulated applications start once
# their first reports (one period after the simulator starts) come after
# the grace.
grace=$(bin/sparkpulse check "${flags[@]}" 2>/dev/null | sed -n 's/.*first-sample-grace \([0-9]*\)s,.*/\1/p' || true)
wait_s=$(( ${grace:-20} - ${period%s} + 2 ))
if [ "$wait_s" -gt 0 ]; then
  echo "run: the simulated applications start in $wait_s s: sparkpulse gives no delta to a counter first seen"
  echo "     within ${grace:-20} s of its start (it may have been counting before), so their first reports come after that."
  sleep "$wait_s" &
  sleep_pid=$!
  wait "$sleep_pid" || true
  sleep_pid=""
fi

# --since 0s: this run's applications only; an earlier run's, left running
# when it stopped, are in .run/influxdb too.
bin/sparkpulse watch "${flags[@]}" --interval 2s --since 0s \
  --note "next: bin/sparkpulse report --config .run/sparkpulse.toml --fleet     (ended applications, advice)" \
  --note "      bin/sparkpulse report --config .run/sparkpulse.toml APP_ID    (one application, why)" \
  --note "      InfluxDB $influx_url, database $db · logs in .run/ · dashboards: docs/dashboards.md" \
  2>"$run_dir/watch.log" &
view_pid=$!
bin/sparkpulse simulate --addr 127.0.0.1:2003 --apps 4 --executors 4 --period "$period" --ui-addr "$ui" \
  --app-lifetime 5m --executor-lifetime 2m >"$run_dir/simulate.log" 2>&1 &
sim_pid=$!

# Until Ctrl-C, or until one of them ends on its own.
rc=0
wait -n || rc=$?
gone=""
for p in "simulator:$sim_pid" "sparkpulse:$sparkpulse_pid" "view:$view_pid" "influxd:$influxd_pid"; do
  if [ -n "${p#*:}" ] && ! kill -0 "${p#*:}" 2>/dev/null; then gone="$gone ${p%%:*}"; fi
done
echo "run:$gone ended on its own (status $rc); logs in .run/"
failed=1
exit 1
