#!/usr/bin/env bash
# scripts/test.sh: install what is missing, build what is stale, run every test suite.
#
#   scripts/test.sh              the normal build (RelWithDebInfo, -Werror), the install tests
#                                (test/install/run.sh: static, shared and .deb installs of a
#                                Release build, the README's consumer against each), then the
#                                TSan job
#   scripts/test.sh --sanitize   the ASan + UBSan build (build-asan/)
#   scripts/test.sh --tsan       the TSan job alone: the two-thread test (test/threads/) built
#                                with ThreadSanitizer in build-tsan/ (the library, the local
#                                backend, the helper and that test only)
#
# The suites run side by side (ctest -j, one per core): each test process tells its own
# processes from any other's (test/integration/support.hpp), and the benchmarks' memory figures
# count only their own run's processes.
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs a step and says on stderr how long it took (the CI log's figures).
timed() {
  local began=$SECONDS
  "$@"
  echo "test.sh: $* took $((SECONDS - began)) s" >&2
}

tsan_job() {
  if [ ! -f build-tsan/build.ninja ]; then
    # Asio's fenced blocks use std::atomic_thread_fence, which TSan does not model (GCC says so
    # with -Wtsan, an error under -Werror); every handoff they sit beside is already ordered by
    # the scheduler's or the strand's mutex, which TSan does see. So they are compiled out here.
    cmake -S . -B build-tsan -G Ninja -DSANDBOX_WERROR=ON -DSANDBOX_TSAN=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANDBOX_BUILD_BENCH=OFF -DSANDBOX_BUILD_EXAMPLES=OFF \
      -DSANDBOX_INSTALL=OFF >&2
  fi
  cmake --build build-tsan -j "$(nproc)" --target sandbox_thread_tests sandbox-supervisor >&2
  # The suppressions file says what it hides and why (Asio's fenced reference counts).
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/test/threads/tsan.supp ${TSAN_OPTIONS:-}" \
    build-tsan/test/sandbox_thread_tests
}

if [ "${1:-}" = "--sanitize" ]; then
  timed scripts/setup.sh --sanitize
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The install/consumer test and the benchmark smoke run belong to the normal build.
  timed ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -E 'install_consumer|bench_smoke'
elif [ "${1:-}" = "--tsan" ]; then
  tsan_job
else
  timed scripts/setup.sh
  timed ctest --test-dir build --output-on-failure -j "$(nproc)"
  timed test/install/run.sh
  timed tsan_job
fi
