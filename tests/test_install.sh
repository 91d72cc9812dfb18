#!/usr/bin/env bash
# tests/test_install.sh - what a user does: `make install PREFIX=DIR`, then a
# program written only against baton.h, built with pkg-config, run under the
# installed baton-run at 1..8 ranks. The program is test_coll: it includes
# nothing of the library but baton.h.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
prefix=$(mktemp -d /tmp/baton-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
passed=0 failed=0
check() { # check NAME CMD...
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}

check "make install" make -s install PREFIX="$prefix" BUILD="$BUILD"
for f in include/baton.h lib/libbaton.so lib/libbaton.a lib/pkgconfig/baton.pc bin/baton-run bin/baton-bench bin/baton-viz bin/baton-model; do
  check "installed $f" test -e "$prefix/$f"
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# Only the installed header: the test's own helpers are header-only files in tests/.
check "build against the installed library" \
  cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Itests tests/test_coll.c -o "$prefix/test_coll" \
  $(pkg-config --cflags --libs baton) -lm
check "linked to the installed libbaton.so" \
  sh -c "ldd '$prefix/test_coll' | grep -q '$prefix/lib/libbaton.so'"
for n in 1 2 3 4 5 8; do
  check "installed test_coll at $n ranks" \
    sh -c "'$prefix/bin/baton-run' -n $n '$prefix/test_coll' > '$prefix/out.$n' 2>&1 || { tail -5 '$prefix/out.$n'; false; }"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
