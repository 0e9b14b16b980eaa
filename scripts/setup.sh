#!/usr/bin/env bash
# scripts/setup.sh: install what is missing (Debian 12 packages only) and build what is stale.
#
#   scripts/setup.sh [--deps-only] [--sanitize] [--build-dir DIR] [--target NAME]
#
# Packages (all from Debian 12; Boost 1.81 component packages, not libboost-all-dev = 1.74):
#   g++ cmake ninja-build             compiler and build
#   libboost1.81-dev                  Boost.Asio and Boost.System headers (1.81)
#   libboost-json1.81-dev             JSON output, enforcement reports (later: config files)
#   libboost-url1.81-dev              proxy URL validation
#   libboost-program-options1.81-dev  sandbox-run's command line
#   libboost-test1.81-dev             the test suites
#   libc-ares-dev                     the egress proxy's DNS lookups (asynchronous, on the caller's loop)
#   libidn2-dev                       IDNA (UTS-46) for host names in network rules and requests
#   libunistring-dev                  libidn2's Unicode tables, for the static sandbox-run
#   libssl-dev                        OpenSSL 3.0: TLS inspection's CA and leaves (net/tls)
#   libyaml-dev                       YAML config documents (libyaml's event parser: positions,
#                                     duplicate keys refused; docs/config.md)
#   curl git python3 python3-pip      real clients in the network tests (inside the sandbox)
#   python3-websocket                 a real WebSocket client for sandboxd's attach tests
#   procps                            `ps`, used only by the benchmark's baseline
#   bubblewrap                        the bwrap backend's sandbox (run time and its tests)
#   pkgconf dpkg-dev file             the install tests: pkg-config, and cpack's Debian package
#                                     (dpkg-shlibdeps finds its run-time dependencies)
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=0
sanitize=0
build_dir=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps-only) deps_only=1 ;;
    --sanitize) sanitize=1 ;;
    --build-dir) build_dir="$2"; shift ;;
    --target) targets+=(--target "$2"); shift ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

packages=(g++ cmake ninja-build libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
          libboost-program-options1.81-dev libboost-test1.81-dev libc-ares-dev libidn2-dev libunistring-dev libssl-dev libyaml-dev procps bubblewrap
          curl git python3 python3-pip python3-websocket pkgconf dpkg-dev file)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q >&2
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
[ "$deps_only" -eq 1 ] && exit 0

if [ "$sanitize" -eq 1 ]; then
  build_dir=${build_dir:-build-asan}
  flags=(-DCMAKE_BUILD_TYPE=Debug -DSANDBOX_SANITIZE=ON -DSANDBOX_BUILD_BENCH=OFF)
else
  build_dir=${build_dir:-build}
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DSANDBOX_WERROR=ON "${flags[@]}" >&2
fi
# Ninja rebuilds only what is stale (and re-runs CMake when a CMakeLists changed).
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" >&2
