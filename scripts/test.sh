#!/usr/bin/env bash
# scripts/test.sh: install what is missing, build what is stale, run every test suite.
#
#   scripts/test.sh              the normal build (RelWithDebInfo, -Werror)
#   scripts/test.sh --sanitize   the ASan + UBSan build (build-asan/)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  scripts/setup.sh --sanitize
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The install/consumer test and the benchmark smoke run belong to the normal build.
  ctest --test-dir build-asan --output-on-failure -E 'install_consumer|bench_smoke'
else
  scripts/setup.sh
  ctest --test-dir build --output-on-failure
fi
