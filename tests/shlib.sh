# tests/shlib.sh - the counting helpers of the shell tests; source it.
# shellcheck shell=bash
# Each check adds to $pass or $fail, each part that cannot run here to
# $skipped (`skip REASON`); `finish` prints `N passed, M failed, K skipped`
# (the line tests/run.sh looks for) and returns the status. A test that
# cannot run at all calls `skip_all REASON`. $tmp is a fresh directory,
# removed on exit.
pass=0
fail=0
skipped=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); }
# skip REASON: a part that cannot run here; tests/run.sh counts it.
skip() { skipped=$((skipped + 1)); echo "SKIP: $*"; }
# skip_all REASON: the whole test cannot run here. 77 is tests/run.sh's
# (and automake's) status for a skip.
skip_all() { echo "SKIP: $*"; exit 77; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# expect NAME GOT WANT
expect() { if [ "$2" = "$3" ]; then ok; else bad "$1: got [$2], want [$3]"; fi; }
# expect_line NAME FILE REGEX: some line of FILE matches REGEX.
expect_line() {
  if grep -Eq -- "$3" "$2"; then ok; else bad "$1: no line matches /$3/ in:"; sed 's/^/  | /' "$2" >&2; fi
}
# expect_failure NAME STATUS: a command failed, and not by `timeout`.
expect_failure() {
  if [ "$2" -ne 0 ] && [ "$2" -ne 124 ] && [ "$2" -ne 137 ]; then ok; else bad "$1: status $2, want a failure"; fi
}
# Why scripts/cluster.sh cannot run here, printed; fails when it can.
cluster_skip_reason() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root (network namespaces need CAP_SYS_ADMIN)"
  elif ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "iproute2 (ip, tc) is not installed"
  elif ! unshare --net true 2>/dev/null; then
    echo "this machine does not allow new network namespaces"
  else
    return 1
  fi
}
finish() {
  echo "$pass passed, $fail failed, $skipped skipped"
  [ "$fail" -eq 0 ]
}
