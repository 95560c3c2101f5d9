#!/usr/bin/env bash
# Checks the container artefacts without a Docker engine (none runs here):
# the compose files with Docker Compose's own parser, the Dockerfile with a
# Dockerfile linter, the binary built as the Dockerfile builds it, the
# files the compose stack mounts, and the Helm chart with helm itself.
set -euo pipefail
cd "$(dirname "$0")/.."

compose="$(go env GOPATH)/bin/docker-compose"
for f in docker-compose.yml docker-compose.demo.yml docker-compose.influxdb2.yml; do
  args=(-f docker-compose.yml)
  [ "$f" != docker-compose.yml ] && args+=(-f "$f")
  "$compose" "${args[@]}" config -q
  echo "check-deploy: ${args[*]}: valid (Docker Compose v2.29.7 parser)"
done

for p in deploy/compose/sparkpulse.toml grafana/provisioning/datasources grafana/provisioning/dashboards \
  grafana/dashboards/spark.json grafana/dashboards/health.json grafana/provisioning-influxdb2/datasources; do
  [ -e "$p" ] || { echo "check-deploy: $p, mounted by the compose stack, is missing" >&2; exit 1; }
done
go run ./cmd/sparkpulse check --config deploy/compose/sparkpulse.toml >/dev/null
echo "check-deploy: deploy/compose/sparkpulse.toml: valid"

# The Helm chart: lint, render with the default values and with InfluxDB
# 2.x, a token and annotation sources, and check the sparkpulse config it
# renders.
helm="$(go env GOPATH)/bin/helm"
chart=deploy/helm/sparkpulse
rendered="$(mktemp -d)"
"$helm" lint --strict "$chart" >/dev/null
for values in "" "$chart/ci/influxdb2-values.yaml"; do
  args=()
  [ -n "$values" ] && args=(-f "$values")
  "$helm" template check "$chart" "${args[@]}" >"$rendered/all.yaml"
  "$helm" template check "$chart" "${args[@]}" --show-only templates/configmap.yaml |
    sed -n '/sparkpulse.toml: |/,$p' | tail -n +2 | sed 's/^    //' >"$rendered/sparkpulse.toml"
  go run ./cmd/sparkpulse check --config "$rendered/sparkpulse.toml" >/dev/null
  echo "check-deploy: helm chart ${values:-(default values)}: lint, template and its sparkpulse config valid"
done
rm -rf "$rendered"

npx --yes dockerfile-utils@0.16.3 lint Dockerfile
echo "check-deploy: Dockerfile: no lint errors (dockerfile-utils)"

# The build stage's command, and the result must be static to run on distroless.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=check" -o "$out/sparkpulse" ./cmd/sparkpulse
if ldd "$out/sparkpulse" >/dev/null 2>&1; then
  echo "check-deploy: the image's binary is dynamically linked; distroless/static cannot run it" >&2
  exit 1
fi
"$out/sparkpulse" version
echo "check-deploy: static binary as the Dockerfile builds it: OK"
