#!/usr/bin/env bash
# test/install/run.sh: the install tests. The README's consumer (its CMakeLists.txt and
# main.cpp, extracted from README.md, so the README cannot rot) is built against three
# installs and run, without $SANDBOX_SUPERVISOR: it must find the helper by itself.
#
#   static  `scripts/install.sh` (static archives, configured for /usr/local), staged with
#           DESTDIR into a scratch directory: nothing exists at the configured prefix
#   shared  the shared build of `scripts/install.sh --deb` (configured for /usr), staged the
#           same way; also the README's pkg-config line
#   deb     the .deb `scripts/install.sh --deb` writes, installed with apt-get (root only),
#           purged afterwards whatever happens
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
    apt-get purge -y -q sandbox > /dev/null 2>&1 || echo "install test: could not remove the sandbox package" >&2
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
  [ -n "${deb_file:-}" ] && return
  scripts/install.sh --deb --build-dir build-deb > "$work/deb-name"
  deb_file=$(tail -n 1 "$work/deb-name")
  [ -f "$deb_file" ] || fail "deb: no package written"
}

shared_case() {
  [ ! -e /usr/libexec/sandbox ] || fail "shared: /usr/libexec/sandbox exists (an installed sandbox package?); the test needs it absent"
  deb_build
  DESTDIR="$work/shared" cmake --install build-deb > /dev/null
  local prefix="$work/shared/usr" lib
  lib=$(find "$prefix" -name 'libsandbox.so.*' -type f | head -n 1)
  [ -n "$lib" ] || fail "shared: no libsandbox.so installed"
  readelf -d "$lib" | grep -q 'SONAME.*libsandbox\.so\.' || fail "shared: $lib has no SONAME"
  no_build_paths shared "$work/shared" build-deb
  cmake_consumer shared "$prefix"
  local libdir
  libdir=$(dirname "$lib")
  PKG_CONFIG_PATH="$libdir/pkgconfig" LD_LIBRARY_PATH="$libdir" pkg_consumer shared
}

deb_case() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "install test deb: SKIPPED (apt-get install needs root)" >&2
    return
  fi
  deb_build
  dpkg-deb -f "$deb_file" Depends | grep -q 'libboost-json1.81' || fail "deb: no dependency on Boost.JSON 1.81"
  deb_installed=1
  apt-get install -y -q "$src/$deb_file" > "$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "deb: apt-get install"; }
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
