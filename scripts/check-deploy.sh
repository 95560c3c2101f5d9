#!/usr/bin/env bash
# Checks the container artefacts without a Docker engine (none runs here):
# the compose files with Docker Compose's own parser, the Dockerfile with a
# Dockerfile linter, the binary built as the Dockerfile builds it, the
# files the compose stack mounts, and the Helm chart (below).
set -euo pipefail
cd "$(dirname "$0")/.."

compose="$(go env GOPATH)/bin/docker-compose"
for f in docker-compose.yml docker-compose.demo.yml docker-compose.influxdb2.yml docker-compose.influxdb3.yml; do
  args=(-f docker-compose.yml)
  [ "$f" != docker-compose.yml ] && args+=(-f "$f")
  "$compose" "${args[@]}" config -q
  echo "check-deploy: ${args[*]}: valid (Docker Compose v2.29.7 parser)"
done

for p in deploy/compose/sparkpulse.toml grafana/provisioning/datasources grafana/provisioning/dashboards \
  grafana/dashboards/spark.json grafana/dashboards/health.json grafana/dashboards/fleet.json grafana/provisioning-influxdb2/datasources \
  grafana/provisioning-influxdb3/datasources; do
  [ -e "$p" ] || { echo "check-deploy: $p, mounted by the compose stack, is missing" >&2; exit 1; }
done
go run ./cmd/sparkpulse check --config deploy/compose/sparkpulse.toml >/dev/null
echo "check-deploy: deploy/compose/sparkpulse.toml: valid"

# The Helm chart, with the default values and each value set in its ci/
# folder: helm lint, the sparkpulse config it renders through `sparkpulse
# check`, then deploy/kubecheck (its own Go module, so that the Kubernetes
# libraries stay out of sparkpulse's): every manifest decoded strictly into
# the k8s.io/api types, validated by the API server's create strategies,
# pod templates admitted under Pod Security "restricted", and the chart's
# promises (GOMEMLIMIT, queues that fit the volume, PDB, checksums,
# Secrets, probes) checked on the typed objects.
helm="$(go env GOPATH)/bin/helm"
chart=deploy/helm/sparkpulse
rendered="$(mktemp -d)"
for values in "" "$chart"/ci/*-values.yaml; do
  args=()
  [ -n "$values" ] && args=(-f "$values")
  "$helm" lint --strict "$chart" "${args[@]}" >/dev/null
  "$helm" template check "$chart" "${args[@]}" --show-only templates/configmap.yaml |
    sed -n '/sparkpulse.toml: |/,$p' | tail -n +2 | sed 's/^    //' >"$rendered/sparkpulse.toml"
  go run ./cmd/sparkpulse check --config "$rendered/sparkpulse.toml" >/dev/null
  echo "check-deploy: helm chart ${values:-(default values)}: lint and its sparkpulse config valid"
done
rm -rf "$rendered"
(cd deploy/kubecheck && go vet ./... && go test -count=1 ./...)
echo "check-deploy: helm chart: manifests admitted as by kube-apiserver 1.37 (strict decoding, validation, Pod Security restricted)"

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
