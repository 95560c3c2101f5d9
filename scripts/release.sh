#!/usr/bin/env bash
# Release builds of sparkpulse.
#
#   scripts/release.sh version   print the version a build of this tree reports
#   scripts/release.sh revision  print the commit it is built from
#   scripts/release.sh build     dist/: an archive per platform and SHA256SUMS
#   scripts/release.sh check     build, then verify what build made
#
# The version: on a commit tagged vX.Y.Z with no uncommitted change, X.Y.Z,
# which must equal the VERSION file; anywhere else VERSION's X.Y.Z followed
# by -dev+<short commit> (and .dirty with uncommitted changes), a semver
# pre-release of the version being prepared. Without git: X.Y.Z-dev.
#
# Each archive, sparkpulse-<version>-<os>-<arch>.tar.gz, holds a directory of
# the same name with the static binary sparkpulse (CGO_ENABLED=0, -trimpath),
# LICENSE, NOTICE, README.md, CHANGELOG.md and docs/ (the README's links). Archives are reproducible: the
# files carry the commit's time and no owner, and gzip stores no name or time.
set -euo pipefail
cd "$(dirname "$0")/.."

platforms=(linux/amd64 linux/arm64 darwin/arm64)
docs=(LICENSE NOTICE README.md CHANGELOG.md docs/*.md)
GO=${GO:-go}

die() { echo "release: $*" >&2; exit 1; }

file_version() {
  local v
  v=$(tr -d ' \t\r\n' <VERSION) || die "VERSION: cannot read it"
  [[ $v =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] || die "VERSION: \"$v\" is not MAJOR.MINOR.PATCH"
  echo "$v"
}

in_git() { git rev-parse --git-dir >/dev/null 2>&1; }
dirty() { [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; }

version() {
  local v tag
  v=$(file_version)
  if ! in_git; then
    echo "$v-dev"
    return
  fi
  tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null || true)
  if [ -n "$tag" ] && ! dirty; then
    [ "$tag" = "v$v" ] || die "HEAD is tagged $tag but VERSION says $v"
    echo "$v"
    return
  fi
  local meta
  meta=$(git rev-parse --short=12 HEAD)
  dirty && meta+=.dirty
  echo "$v-dev+$meta"
}

revision() {
  if in_git; then
    local r
    r=$(git rev-parse HEAD)
    dirty && r+=-dirty
    echo "$r"
  else
    echo unknown
  fi
}

build() {
  local v r mtime
  v=$(version)
  r=$(revision)
  mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
  for f in "${docs[@]}"; do [ -f "$f" ] || die "$f is missing"; done
  rm -rf dist
  mkdir -p dist
  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  for p in "${platforms[@]}"; do
    local os=${p%/*} arch=${p#*/}
    local name="sparkpulse-$v-$os-$arch"
    mkdir -p "$stage/$name"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath \
      -ldflags "-s -w -X main.version=$v -X main.revision=$r" \
      -o "$stage/$name/sparkpulse" ./cmd/sparkpulse
    cp --parents "${docs[@]}" "$stage/$name/"
    tar -C "$stage" --sort=name --mtime="@$mtime" --owner=0 --group=0 --numeric-owner \
      -cf - "$name" | gzip -9 -n >"dist/$name.tar.gz"
    echo "release: dist/$name.tar.gz ($(du -k "$stage/$name/sparkpulse" | cut -f1) KiB binary)"
  done
  (cd dist && sha256sum -- *.tar.gz >SHA256SUMS)
  echo "release: dist/SHA256SUMS"
}

# elf_machine and macho_cpu read a binary's header: ELF's e_machine at byte
# 18 (little-endian), Mach-O's cputype at byte 4.
magic() { od -An -tx1 -N4 "$1" | tr -d ' \n'; }
elf_machine() { od -An -tu2 -j18 -N2 --endian=little "$1" | tr -d ' \n'; }
macho_cpu() { od -An -tx4 -j4 -N4 --endian=little "$1" | tr -d ' \n'; }

check() {
  local v host_os host_arch
  v=$(version)
  build
  (cd dist && sha256sum --quiet -c SHA256SUMS) || die "dist/SHA256SUMS does not match the archives"
  echo "release-check: SHA256SUMS verified"

  case $v in
  *-dev*) ;;
  *) grep -q "^## \[$v\] - [0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}\$" CHANGELOG.md ||
    die "CHANGELOG.md: no dated entry \"## [$v] - YYYY-MM-DD\" for the release $v" ;;
  esac

  host_os=$("$GO" env GOHOSTOS)
  host_arch=$("$GO" env GOHOSTARCH)
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  for p in "${platforms[@]}"; do
    local os=${p%/*} arch=${p#*/}
    local name="sparkpulse-$v-$os-$arch"
    tar -C "$tmp" -xzf "dist/$name.tar.gz"
    local got want
    got=$(find "$tmp/$name" -mindepth 1 -type f -printf '%P\n' | sort | tr '\n' ' ')
    want=$(printf '%s\n' sparkpulse "${docs[@]}" | sort | tr '\n' ' ')
    [ "$got" = "$want" ] || die "$name.tar.gz holds $got; want $want"

    local bin="$tmp/$name/sparkpulse" info
    info=$("$GO" version -m "$bin") || die "$name: go version -m cannot read the binary"
    for kv in "GOOS=$os" "GOARCH=$arch" "CGO_ENABLED=0" "-trimpath=true"; do
      grep -q "build[[:space:]]*$kv\$" <<<"$info" || die "$name: go version -m lacks build $kv"
    done
    # -trimpath leaves -ldflags out of the build settings: look for the
    # version string itself (the host's binary also prints it, below).
    grep -qaF -- "$v" "$bin" || die "$name: the version $v is not in the binary"

    case $os/$arch in
    linux/*)
      [ "$(magic "$bin")" = 7f454c46 ] || die "$name: not an ELF binary"
      local m
      m=$(elf_machine "$bin")
      case $arch in amd64) [ "$m" = 62 ] ;; arm64) [ "$m" = 183 ] ;; *) false ;; esac ||
        die "$name: ELF machine $m is not $arch"
      ;;
    darwin/arm64)
      [ "$(magic "$bin")" = cffaedfe ] || die "$name: not a 64-bit Mach-O binary"
      [ "$(macho_cpu "$bin")" = 0100000c ] || die "$name: Mach-O CPU type $(macho_cpu "$bin") is not arm64"
      ;;
    esac

    if [ "$os/$arch" = "$host_os/$host_arch" ]; then
      local out
      out=$("$bin" version) || die "$name: sparkpulse version failed"
      [ "$out" = "sparkpulse $v" ] || die "$name: sparkpulse version printed \"$out\", want \"sparkpulse $v\""
      echo "release-check: $name runs here and prints \"$out\""
    fi
    echo "release-check: $name: $os/$arch, CGO_ENABLED=0, $(du -k "$bin" | cut -f1) KiB"
  done
}

case ${1:-} in
version) version ;;
revision) revision ;;
build) build ;;
check) check ;;
*) die "usage: $0 version|revision|build|check" ;;
esac
