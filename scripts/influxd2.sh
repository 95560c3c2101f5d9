#!/usr/bin/env bash
# Builds the InfluxDB 2.x server (influxd) that the tests against a real
# 2.x run, from influxdata/influxdb's Go module, or finds it built, and
# prints its path: $(go env GOPATH)/bin/influxd2-<version>, where
# influx/influxtest looks for it ($INFLUXD2 overrides that).
#
# `go install …/influxdb/v2/cmd/influxd@<version>` is refused because
# InfluxDB's go.mod has replace directives, so a small wrapper module with
# the same replaces and upstream's cmd/influxd/main.go builds it. Flux's
# parser (libflux) is Rust: influxdata's pkg-config program, which cgo runs
# as PKG_CONFIG, builds it with `cargo build --release` from crates.io.
# The first build takes about 5 minutes on 2 cores (Go modules, crates and
# compiling); then the binary is found at once.
set -euo pipefail

version=v2.7.12
bin="$(go env GOPATH)/bin/influxd2-$version"

if [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -q "^InfluxDB $version "; then
  echo "$bin"
  exit 0
fi

# cgo needs a C compiler; influxdata's pkg-config runs the real pkg-config.
need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "influxd2: installing ${need[*]} from Debian…" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian's Rust (1.63 in bookworm) is too old for libflux's crates: the
# machine's rustup stable is used.
if ! command -v cargo >/dev/null 2>&1; then
  echo "influxd2: cargo not found: influxd's Flux engine (libflux) needs Rust (stable)" >&2
  exit 1
fi

echo "influxd2: building influxd $version (about 5 minutes on 2 cores the first time)…" >&2
began=$(date +%s)
t0=$began
step() {
  echo "influxd2: $1: $(($(date +%s) - t0)) s" >&2
  t0=$(date +%s)
}

# The wrapper module lives in a fixed place, so that an interrupted build
# resumes with cargo's and Go's caches.
work="${XDG_CACHE_HOME:-$HOME/.cache}/sparkpulse/influxd2-$version"
mkdir -p "$work/bin" "$(dirname "$bin")"
src="$(go mod download -json "github.com/influxdata/influxdb/v2@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ ! -f "$src/go.mod" ]; then
  echo "influxd2: github.com/influxdata/influxdb/v2@$version was not downloaded" >&2
  exit 1
fi
{
  echo "module sparkpulse.local/influxd2"
  echo
  grep '^go ' "$src/go.mod"
  echo
  echo "require github.com/influxdata/influxdb/v2 $version"
  echo
  grep '^replace ' "$src/go.mod" || true
} >"$work/go.mod"
cp "$src/cmd/influxd/main.go" "$work/main.go"
chmod u+w "$work/main.go"
# The go.mod above requires InfluxDB alone: tidy takes every other version
# from InfluxDB's own go.mod (minimal version selection).
(cd "$work" && go mod tidy)
step "modules downloaded"

# influxdata's pkg-config, at the version InfluxDB pins (its GNUmakefile
# runs it through scripts/pkg-config.sh).
pkgconfig_version="$(sed -n 's/^[[:space:]]*github.com\/influxdata\/pkg-config \(v[^ ]*\).*/\1/p' "$src/go.mod")"
GOBIN="$work/bin" go install "github.com/influxdata/pkg-config@$pkgconfig_version"
step "pkg-config $pkgconfig_version built"

# Flux pins Rust 1.72 in rust-toolchain.toml: build with the installed
# stable rather than download that toolchain. Its crates deny warnings (feature "strict"), and
# stable warns of things the pinned Rust did not; RUSTFLAGS does not reach
# crates built for the host when cargo is given --target, as influxdata's
# pkg-config does, so a rustc wrapper caps lints for all of them.
cat >"$work/bin/rustc-cap-lints" <<'EOF'
#!/bin/sh
exec "$@" --cap-lints=warn
EOF
chmod +x "$work/bin/rustc-cap-lints"

# The tags are those of InfluxDB's GNUmakefile without "assets" (the UI,
# which it downloads); /api/v2 and /query need no UI.
(
  cd "$work"
  PKG_CONFIG="$work/bin/pkg-config" \
    RUSTUP_TOOLCHAIN="${RUSTUP_TOOLCHAIN:-stable}" \
    RUSTC_WRAPPER="$work/bin/rustc-cap-lints" \
    go build -tags sqlite_foreign_keys,sqlite_json \
    -ldflags "-X main.version=$version -X main.commit=go-module" \
    -o "$bin.tmp" .
)
mv "$bin.tmp" "$bin"
step "libflux and influxd built"
echo "influxd2: built $bin in $(($(date +%s) - began)) s" >&2
echo "$bin"
