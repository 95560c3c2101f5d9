# syntax=docker/dockerfile:1
# sparkpulse: a static binary on a distroless base, run as a non-root user.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sparkpulse ./cmd/sparkpulse \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sparkpulse /usr/local/bin/sparkpulse
# The state-dir (delta baselines, disk queue), owned by the nonroot user (65532).
COPY --from=build --chown=65532:65532 /out/state /var/lib/sparkpulse
USER 65532:65532
EXPOSE 2003/tcp 2003/udp 9108/tcp
ENTRYPOINT ["/usr/local/bin/sparkpulse"]
CMD ["run", "--config", "/etc/sparkpulse/sparkpulse.toml"]
