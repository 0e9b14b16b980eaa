#!/usr/bin/env bash
# scripts/sandbox-run.sh: run a command through sandbox-run with its built-in default policy,
# after installing what is missing and building what is stale.
#
#   scripts/sandbox-run.sh [sandbox-run options] [--] COMMAND [ARG...]
#   scripts/sandbox-run.sh --json -- sh -c 'echo hello from the sandbox'
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/setup.sh" --target sandbox-run
exec "$here/build/tools/sandbox-run/sandbox-run" "$@"
