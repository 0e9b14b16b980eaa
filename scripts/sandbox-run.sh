#!/usr/bin/env bash
# scripts/sandbox-run.sh: run a command through sandbox-run with its built-in default policy,
# after installing what is missing and building what is stale. sandbox-run itself chooses
# the backend (--backend auto, its default): bubblewrap when bwrap can create its namespaces
# here; otherwise the local backend, with a one-line warning that says why and that nothing
# confines the command; a command line bubblewrap refuses (a root caller's root the sandbox
# user cannot reach, say) is refused (125), never run unconfined. An explicit --backend wins.
#
#   scripts/sandbox-run.sh [sandbox-run options] [--] COMMAND [ARG...]
#   scripts/sandbox-run.sh --json -- sh -c 'echo hello from the sandbox'
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/setup.sh" --target sandbox-run
exec "$here/build/bin/sandbox-run" "$@"
