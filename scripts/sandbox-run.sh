#!/usr/bin/env bash
# scripts/sandbox-run.sh: run a command through sandbox-run with its built-in default policy,
# after installing what is missing and building what is stale. The command runs inside
# bubblewrap (--backend bwrap) when bwrap can create its namespaces here; otherwise on the
# local backend, with a warning that nothing confines it. An explicit --backend wins.
#
#   scripts/sandbox-run.sh [sandbox-run options] [--] COMMAND [ARG...]
#   scripts/sandbox-run.sh --json -- sh -c 'echo hello from the sandbox'
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/setup.sh" --target sandbox-run
bin="$here/build/bin/sandbox-run"

# sandbox-run's options end at "--" or at the first argument that is neither an option nor
# an option's value (the command): look for --backend only up to there.
takes_value=" --root --workdir --timeout --kill-grace --memory --cpu --max-processes "
takes_value+="--max-tasks --max-output --env-allow --env --stdin-file --backend --net "
takes_value+="--writable --read-deny --write-deny --unix-socket --sandbox-user "
expect_value=0
for a in "$@"; do
  if (( expect_value )); then expect_value=0; continue; fi
  case "$a" in
    --) break ;;
    --backend|--backend=*) exec "$bin" "$@" ;;
    --*=*) ;;
    -*) [[ "$takes_value" == *" $a "* ]] && expect_value=1 ;;
    *) break ;;
  esac
done
# The report for this very command line: a root caller's sandbox user must be able to reach
# its root (--root, else the current directory) and --writable directories.
report="$("$bin" --enforcement --backend bwrap "$@" || true)"
if [[ "$report" == *'cannot be reached by the sandbox user'* ]]; then
  # A root caller whose root the sandbox user cannot reach: refused with the reason (125),
  # never downgraded to an unconfined run as root.
  exec "$bin" --backend bwrap "$@"
fi
if [[ "$report" == *'"filesystem_bounds":true'* ]]; then
  echo "sandbox-run.sh: backend bwrap (host read-only, private /tmp and pid namespace)" >&2
  exec "$bin" --backend bwrap "$@"
fi
reason="$(sed -n 's/.*"unavailable":"\(.*\)".*/\1/p' <<<"$report")"
echo "sandbox-run.sh: WARNING: bubblewrap is not usable here (${reason:-unknown reason});" \
     "running on the local backend, which confines nothing" >&2
exec "$bin" "$@"
