#!/usr/bin/env bash
# bench/baseline.sh - an older baton, built next to this one, to measure
# against with the --baseline option of bench/compare-shm.sh and
# bench/compare.sh.
#
#   bench/baseline.sh COMMIT [DIR]
#
# Makes DIR (default /tmp/baton-baseline-COMMIT) a git worktree of this
# repository at COMMIT, detached, and builds there with `make -k -j2`
# only what the comparison runs: build/bin/baton-run and
# build/bin/baton-bench (and the library they link). -k because a test
# program or tool that fails to compile at COMMIT is no reason to stop.
# A DIR that is already a worktree at COMMIT is reused and only rebuilt
# (make does nothing when it is up to date); one at another commit, or
# a directory that is not a worktree, is refused rather than changed.
# Prints DIR on stdout, the build's output goes to stderr:
#
#   bench/compare-shm.sh --baseline "$(bench/baseline.sh f1cff54)" --reps 3
set -euo pipefail

die() { echo "baseline.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: bench/baseline.sh COMMIT [DIR]"
case "$1" in -h|--help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;; esac

cd "$(dirname "$0")/.."
SHA=$(git rev-parse --verify --quiet "$1^{commit}") || die "$1: not a commit of this repository"
SHORT=$(git rev-parse --short "$SHA")
DIR=${2:-/tmp/baton-baseline-$1}

if [ -e "$DIR" ]; then
  TOP=$(git -C "$DIR" rev-parse --show-toplevel 2>/dev/null) &&
    [ "$(cd "$TOP" && pwd -P)" = "$(cd "$DIR" && pwd -P)" ] ||
    die "$DIR exists and is not the root of a git checkout: give another DIR"
  HAVE=$(git -C "$DIR" rev-parse HEAD)
  [ "$HAVE" = "$SHA" ] ||
    die "$DIR is a checkout of $(git -C "$DIR" rev-parse --short HEAD), not of $SHORT: give another DIR"
  echo "baseline.sh: reusing $DIR ($SHORT)" >&2
else
  git worktree add --detach "$DIR" "$SHA" >&2 || die "git worktree add $DIR $SHORT failed"
fi

# What the comparison runs, and nothing else; the tools link the static
# library, so they run from the build tree as they are.
make -C "$DIR" -k -j2 build/bin/baton-run build/bin/baton-bench >&2 || true
for f in build/bin/baton-run build/bin/baton-bench; do
  [ -x "$DIR/$f" ] || die "$DIR/$f was not built (see make's output above)"
done
(cd "$DIR" && pwd)
