#!/usr/bin/env bash
# scripts/install.sh: build the library, the helper and sandbox-run in Release (no tests,
# benchmarks or examples) and install them; or build a Debian package of them.
#
#   scripts/install.sh [--prefix DIR] [--shared] [--build-dir DIR]
#   scripts/install.sh --deb [--build-dir DIR]
#
#   --prefix DIR     where to install (default /usr/local); DESTDIR=... stages the install
#                    elsewhere (the installed files find each other wherever they end up)
#   --shared         shared libraries (libsandbox.so.0.1, ...) instead of static archives
#   --build-dir DIR  the build tree (default build-release, or build-deb with --deb)
#   --deb            two .deb packages for /usr, written to the build tree (not installed) and
#                    their paths printed: `sandbox` (the shared libraries, the helper,
#                    sandbox-run, sandboxd) and `sandbox-dev` (headers, the CMake and pkg-config
#                    files; it depends on `sandbox` of the same version)
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
shared=OFF
deb=0
build_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift ;;
    --shared) shared=ON ;;
    --build-dir) build_dir="$2"; shift ;;
    --deb) deb=1 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$deb" -eq 1 ]; then
  prefix=/usr
  shared=ON
  build_dir=${build_dir:-build-deb}
fi
build_dir=${build_dir:-build-release}

scripts/setup.sh --deps-only
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DBUILD_SHARED_LIBS="$shared" -DSANDBOX_BUILD_TESTS=OFF -DSANDBOX_BUILD_BENCH=OFF \
  -DSANDBOX_BUILD_EXAMPLES=OFF >&2
cmake --build "$build_dir" -j "$(nproc)" >&2
if [ "$deb" -eq 1 ]; then
  (cd "$build_dir" && cpack -G DEB >&2)
  printf '%s\n' "$build_dir"/sandbox_*.deb "$build_dir"/sandbox-dev_*.deb # runtime, then dev
else
  cmake --install "$build_dir" >&2
fi
