# syntax=docker/dockerfile:1
# sparkpulse: a static binary on a distroless base, run as a non-root user.
#   docker build -t REGISTRY/sparkpulse:$(cat VERSION) \
#     --build-arg VERSION=$(scripts/release.sh version) --build-arg REVISION=$(git rev-parse HEAD) .
# Configured by environment alone (SPARKPULSE_<SECTION>_<KEY>, e.g.
# SPARKPULSE_INFLUXDB_URL), or by a file named in SPARKPULSE_CONFIG.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version is the VERSION build argument (scripts/release.sh version: X.Y.Z
# on a release tag, X.Y.Z-dev+<commit> elsewhere), else the VERSION file's
# X.Y.Z-dev, as scripts/release.sh names a build without git; the revision
# is the commit, if the builder gives it.
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION:-$(cat VERSION)-dev} -X main.revision=${REVISION}" \
      -o /out/sparkpulse ./cmd/sparkpulse \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sparkpulse /usr/local/bin/sparkpulse
# The state-dir (delta baselines, disk queue), owned by the nonroot user (65532).
COPY --from=build --chown=65532:65532 /out/state /var/lib/sparkpulse
USER 65532:65532
# In a container the admin endpoint (/metrics, /healthz, /readyz) listens on
# every interface; outside one its default is 127.0.0.1:2033.
ENV SPARKPULSE_ADMIN_BIND_ADDRESS=0.0.0.0:2033 \
    SPARKPULSE_STATE_DIR=/var/lib/sparkpulse
EXPOSE 2003/tcp 2003/udp 2033/tcp
# distroless has no shell: the binary asks its own admin endpoint's /healthz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/sparkpulse", "health"]
ENTRYPOINT ["/usr/local/bin/sparkpulse"]
# No --config: the built-in Spark mapping on 2003 (TCP and UDP), the rest
# from the environment, or the file SPARKPULSE_CONFIG names.
CMD ["run"]
