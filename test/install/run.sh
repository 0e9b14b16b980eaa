#!/usr/bin/env bash
# test/install/run.sh: the install tests. The README's consumer (its CMakeLists.txt and
# main.cpp, extracted from README.md, so the README cannot rot) is built against three
# installs and run, without $SANDBOX_SUPERVISOR: it must find the helper by itself.
#
#   static  `scripts/install.sh` (static archives, configured for /usr/local), staged with
#           DESTDIR into a scratch directory: nothing exists at the configured prefix
#   shared  the shared build of `scripts/install.sh --deb` (configured for /usr), staged the
#           same way; also the README's pkg-config line
#   deb     the two .deb packages `scripts/install.sh --deb` writes: the runtime package
#           alone must hold no header, build file or -dev dependency and run a command through
#           sandbox-run; with the dev package beside it the consumer builds (apt-get, root
#           only; both purged afterwards whatever happens)
# No installed file may carry the path of the build tree it came from.
#
#   test/install/run.sh [static] [shared] [deb]       (default: all three)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(static shared deb)
work=$(mktemp -d /tmp/sbx-install-XXXXXX)
deb_installed=0
cleanup() {
  if [ "$deb_installed" -eq 1 ]; then
    dpkg --purge sandbox-dev sandbox > /dev/null 2>&1 || # (either may be absent)
      echo "install test: could not remove the sandbox packages" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "install test FAILED: $*" >&2; exit 1; }

# The fenced block after the line "<!-- consumer: NAME -->" in README.md.
extract() {
  awk -v name="$1" '
    $0 == "<!-- consumer: " name " -->" { want = 1; next }
    want && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' README.md
}
mkdir "$work/consumer"
extract CMakeLists.txt > "$work/consumer/CMakeLists.txt"
extract main.cpp > "$work/consumer/main.cpp"
pkg_line=$(extract pkg-config)
[ -s "$work/consumer/CMakeLists.txt" ] && [ -s "$work/consumer/main.cpp" ] && [ -n "$pkg_line" ] ||
  fail "README.md lacks a consumer block"
want=$'hello from the sandbox\nexit code 0'

# run_consumer LABEL PROGRAM: runs it from the scratch dir, without $SANDBOX_SUPERVISOR.
run_consumer() {
  local got
  got=$(cd "$work" && env -u SANDBOX_SUPERVISOR "$2" 2>&1) || fail "$1: the consumer failed: $got"
  [ "$got" = "$want" ] || fail "$1: the consumer printed: $got"
  echo "install test $1: ok" >&2
}

# cmake_consumer LABEL PREFIX...: configures and builds the README's CMake project.
cmake_consumer() {
  local label=$1; shift
  local prefix_args=()
  [ $# -gt 0 ] && prefix_args=(-DCMAKE_PREFIX_PATH="$1")
  cmake -S "$work/consumer" -B "$work/build-$label" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "${prefix_args[@]}" > "$work/$label.log" 2>&1 || { cat "$work/$label.log" >&2; fail "$label: configure"; }
  cmake --build "$work/build-$label" >> "$work/$label.log" 2>&1 ||
    { cat "$work/$label.log" >&2; fail "$label: build"; }
  run_consumer "$label" "$work/build-$label/hello"
}

# pkg_consumer LABEL: builds the README's pkg-config line in a directory of its own.
pkg_consumer() {
  mkdir -p "$work/pc-$1"
  cp "$work/consumer/main.cpp" "$work/pc-$1/"
  (cd "$work/pc-$1" && eval "$pkg_line") || fail "$1: the pkg-config line failed"
  run_consumer "$1 (pkg-config)" "$work/pc-$1/hello"
}

no_build_paths() { # no_build_paths LABEL DIR BUILD_DIR
  if grep -rlF "$src/$3" "$2" > "$work/paths" 2>/dev/null; then
    fail "$1: installed files carry the build tree's path: $(cat "$work/paths")"
  fi
}

static_case() {
  [ ! -e /usr/local/libexec/sandbox ] || fail "static: /usr/local/libexec/sandbox exists; the test needs it absent"
  DESTDIR="$work/static" scripts/install.sh --build-dir build-install-static > /dev/null
  local prefix="$work/static/usr/local"
  [ -f "$prefix/lib/libsandbox.a" ] || fail "static: no libsandbox.a installed"
  no_build_paths static "$work/static" build-install-static
  cmake_consumer static "$prefix"
}

deb_build() {
  [ -n "${deb_runtime:-}" ] && return
  scripts/install.sh --deb --build-dir build-deb > "$work/deb-names"
  deb_runtime=$(sed -n 1p "$work/deb-names")
  deb_dev=$(sed -n 2p "$work/deb-names")
  [ -f "$deb_runtime" ] && [ -f "$deb_dev" ] || fail "deb: the two packages were not written: $(cat "$work/deb-names")"
}

shared_case() {
  [ ! -e /usr/libexec/sandbox ] || fail "shared: /usr/libexec/sandbox exists (an installed sandbox package?); the test needs it absent"
  deb_build
  DESTDIR="$work/shared" cmake --install build-deb > /dev/null
  local prefix="$work/shared/usr" lib
  lib=$(find "$prefix" -name 'libsandbox.so.*' -type f | head -n 1)
  [ -n "$lib" ] || fail "shared: no libsandbox.so installed"
  grep -q 'SONAME.*libsandbox\.so\.' <<< "$(readelf -d "$lib")" || fail "shared: $lib has no SONAME"
  no_build_paths shared "$work/shared" build-deb
  cmake_consumer shared "$prefix"
  local libdir
  libdir=$(dirname "$lib")
  PKG_CONFIG_PATH="$libdir/pkgconfig" LD_LIBRARY_PATH="$libdir" pkg_consumer shared
}

# deb_runtime_only: the runtime package alone holds what a server runs and nothing to build
# with, and runs a command.
deb_runtime_only() {
  local listing depends
  listing=$(dpkg-deb -c "$deb_runtime" | awk '{print $6}')
  ! grep -Eq '^\./usr/include/|\.a$|/cmake/|/pkgconfig/|\.so$' <<< "$listing" ||
    fail "deb: the runtime package holds files to build with: $(grep -E '^\./usr/include/|\.a$|/cmake/|/pkgconfig/|\.so$' <<< "$listing" | head -n 3)"
  grep -q '^\./usr/libexec/sandbox/sandbox-supervisor$' <<< "$listing" || fail "deb: no helper in the runtime package"
  grep -q '^\./usr/bin/sandbox-run$' <<< "$listing" || fail "deb: no sandbox-run in the runtime package"
  depends=$(dpkg-deb -f "$deb_runtime" Depends)
  ! grep -q -- '-dev' <<< "$depends" || fail "deb: the runtime package depends on -dev packages: $depends"
  deb_installed=1
  apt-get install -y -q "$src/$deb_runtime" > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "deb: apt-get install (runtime)"; }
  [ ! -e /usr/include/sandbox ] || fail "deb: headers present with the runtime package alone"
  local got
  # (the default backend's sandbox user must reach the work directory, which becomes its root)
  mkdir -m 755 "$work/run" && chmod 755 "$work"
  got=$(cd "$work/run" && env -u SANDBOX_SUPERVISOR /usr/bin/sandbox-run -- /bin/echo runtime-only 2>&1) ||
    fail "deb: sandbox-run of the runtime package failed: $got"
  grep -q '^runtime-only$' <<< "$got" || fail "deb: sandbox-run printed: $got"
  echo "install test deb (runtime alone): ok" >&2
}

deb_case() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "install test deb: SKIPPED (apt-get install needs root)" >&2
    return
  fi
  deb_build
  local depends # (not piped into grep -q: under pipefail its early exit fails the pipe)
  depends=$(dpkg-deb -f "$deb_dev" Depends)
  grep -q 'libboost-json1.81-dev' <<< "$depends" || fail "deb: the dev package does not depend on Boost.JSON 1.81: $depends"
  grep -q 'sandbox (= 0' <<< "$depends" || fail "deb: the dev package does not depend on its runtime package: $depends"
  deb_runtime_only
  apt-get install -y -q "$src/$deb_dev" > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "deb: apt-get install (dev)"; }
  cmake_consumer deb
  pkg_consumer deb
}

for c in "${cases[@]}"; do
  case "$c" in
    static) static_case ;;
    shared) shared_case ;;
    deb) deb_case ;;
    *) fail "unknown case $c" ;;
  esac
done
