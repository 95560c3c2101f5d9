#!/usr/bin/env bash
# Checks the container artefacts without a Docker engine (none runs here):
# the compose files with Docker Compose's own parser, the Dockerfile with a
# Dockerfile linter, the binary built as the Dockerfile builds it, the
# files the compose stack mounts, and the Helm chart (below).
#
#   bash scripts/check-deploy.sh                   check everything
#   bash scripts/check-deploy.sh --refresh-chart   copy the dashboards and alert
#     rules into the chart (Helm reads only its own directory), then check
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
chart=deploy/helm/sparkpulse

if [ "${1:-}" = "--refresh-chart" ]; then
  rm -f "$chart"/dashboards/*.json
  cp grafana/dashboards/*.json "$chart"/dashboards/
  cp deploy/prometheus/alerts.yml "$chart"/files/alerts.yml
  echo "check-deploy: copied grafana/dashboards/*.json and deploy/prometheus/alerts.yml into $chart"
fi

# One version: VERSION. The image the compose stack builds is tagged with it
# (the Dockerfile reads it for the binary), and so is the chart's appVersion
# (deploy/kubecheck checks that).
version="$(cat VERSION)"

compose="$(go env GOPATH)/bin/docker-compose"
for f in docker-compose.yml docker-compose.demo.yml docker-compose.influxdb2.yml docker-compose.influxdb3.yml; do
  args=(-f docker-compose.yml)
  [ "$f" != docker-compose.yml ] && args+=(-f "$f")
  "$compose" "${args[@]}" config -q
  for image in $("$compose" "${args[@]}" config --images | grep '^sparkpulse'); do
    [ "$image" = "sparkpulse:$version" ] || {
      echo "check-deploy: ${args[*]}: image $image, but VERSION is $version: tag it sparkpulse:$version" >&2
      exit 1
    }
  done
  echo "check-deploy: ${args[*]}: valid (Docker Compose v2.29.7 parser), image sparkpulse:$version"
done

for p in deploy/compose/sparkpulse.toml grafana/provisioning/datasources grafana/provisioning/dashboards \
  grafana/dashboards/spark.json grafana/dashboards/health.json grafana/dashboards/fleet.json grafana/provisioning-influxdb2/datasources \
  grafana/provisioning-influxdb3/datasources; do
  [ -e "$p" ] || { echo "check-deploy: $p, mounted by the compose stack, is missing" >&2; exit 1; }
done

npx --yes dockerfile-utils@0.16.3 lint Dockerfile
echo "check-deploy: Dockerfile: no lint errors (dockerfile-utils)"

# The build stage's command, and the result must be static to run on
# distroless. The same binary checks the configs below.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version -X main.revision=check" -o "$out/sparkpulse" ./cmd/sparkpulse
if ldd "$out/sparkpulse" >/dev/null 2>&1; then
  echo "check-deploy: the image's binary is dynamically linked; distroless/static cannot run it" >&2
  exit 1
fi
reported="$("$out/sparkpulse" version | head -n 1)"
case "$reported" in
  "sparkpulse $version" | "sparkpulse $version "*) ;;
  *) echo "check-deploy: the binary reports \"$reported\", not sparkpulse $version" >&2; exit 1 ;;
esac
echo "check-deploy: static binary as the Dockerfile builds it, reporting version $version: OK"

# The compose stack's config, with the environment the image sets (its ENV).
image_env=($(grep -o 'SPARKPULSE_[A-Z_]*=[^ ]*' Dockerfile))
[ "${#image_env[@]}" -gt 0 ] || { echo "check-deploy: no SPARKPULSE_ variable in the Dockerfile's ENV" >&2; exit 1; }
env "${image_env[@]}" "$out/sparkpulse" check --config deploy/compose/sparkpulse.toml >/dev/null
echo "check-deploy: deploy/compose/sparkpulse.toml: valid, with ${image_env[*]}"

# The Helm chart, with the default values and each value set in its ci/
# folder, given an image repository (it has none of its own): helm lint,
# then deploy/kubecheck (its own Go module, so that the Kubernetes
# libraries stay out of sparkpulse's): every manifest decoded strictly into
# the k8s.io/api types, validated by the API server's create strategies,
# pod templates admitted under Pod Security "restricted", the Prometheus
# operator's resources decoded strictly and their rules parsed as
# Prometheus does, the sparkpulse.toml each renders run through `sparkpulse
# check` (this binary) with the pod's environment, and the chart's promises
# (GOMEMLIMIT, queues that fit the volume, PDB, checksums, Secrets, probes,
# one scrape per pod, the refusal without an image) checked on the typed
# objects.
helm="$(go env GOPATH)/bin/helm"
for values in "" "$chart"/ci/*-values.yaml; do
  args=(--set image.repository=registry.example/sparkpulse)
  [ -n "$values" ] && args+=(-f "$values")
  "$helm" lint --strict "$chart" "${args[@]}" >/dev/null
  echo "check-deploy: helm lint ${values:-(default values)}: OK"
done
(cd deploy/kubecheck && go vet ./... && SPARKPULSE_BIN="$out/sparkpulse" go test -count=1 ./...)
echo "check-deploy: helm chart: manifests admitted as by kube-apiserver 1.37 (strict decoding, validation, Pod Security restricted), configs valid for sparkpulse"
echo "check-deploy: all OK in $((SECONDS - start)) s"
