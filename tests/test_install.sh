#!/usr/bin/env bash
# tests/test_install.sh - what a user does: `make install PREFIX=DIR`, then a
# program written only against baton.h, built with pkg-config, run under the
# installed baton-run at 1..8 ranks. The program is test_coll: it includes
# nothing of the library but baton.h. Then the Python package, installed.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
prefix=$(mktemp -d /tmp/baton-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
passed=0 failed=0 skipped=0
check() { # check NAME CMD...
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAIL: $1"; failed=$((failed + 1)); fi
}
skip() { skipped=$((skipped + 1)); echo "SKIP: $*"; }

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
for n in 1 2 3 4 5 6 7 8; do
  check "installed test_coll at $n ranks" \
    sh -c "'$prefix/bin/baton-run' -n $n '$prefix/test_coll' > '$prefix/out.$n' 2>&1 || { tail -5 '$prefix/out.$n'; false; }"
done

# The Python package: installed beside the library, it loads the installed
# libbaton.so by itself (run from / so that nothing of the source tree is
# near), and its test passes under the installed baton-run.
# The same installed program started the other ways issue 3 names: over
# TCP, with torchrun's variables set by hand, under a real mpirun, and on
# the emulated cluster (4 hosts over TCP; 2 hosts x 2 ranks).
check "installed test_coll over TCP at 4 ranks" \
  sh -c "BATON_TRANSPORT=tcp '$prefix/bin/baton-run' -n 4 '$prefix/test_coll' --quick > '$prefix/out.tcp' 2>&1 ||
         { tail -5 '$prefix/out.tcp'; false; }"
torchrun_style() {
  local port=$((20000 + RANDOM % 20000)) pids=() r st=0
  for r in 0 1 2 3; do
    env -u BATON_RANK -u BATON_SIZE -u BATON_ADDR RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$prefix/test_coll" --quick >"$prefix/torch.$r" 2>&1 &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || st=1; done
  [ $st = 0 ] && grep -q ' passed, 0 failed' "$prefix/torch.0" || { tail -5 "$prefix/torch.0"; false; }
}
check "installed test_coll with torchrun's variables" torchrun_style
if command -v mpirun >/dev/null; then
  check "installed test_coll under mpirun -n 4" \
    sh -c "mpirun --allow-run-as-root --oversubscribe -n 4 -x BATON_ADDR=127.0.0.1:$((20000 + RANDOM % 20000)) \
           '$prefix/test_coll' --quick > '$prefix/out.mpi' 2>&1 || { tail -5 '$prefix/out.mpi'; false; }"
else
  skip "installed test_coll under mpirun: no mpirun (apt-get install -y openmpi-bin)"
fi
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null &&
   ip netns add baton-probe-$$ 2>/dev/null && ip netns del baton-probe-$$; then
  for layout in "4 1" "2 2"; do
    set -- $layout
    check "installed test_coll on $1 emulated hosts x $2 ranks" \
      sh -c "BATON_RUN='$prefix/bin/baton-run' scripts/cluster.sh with $1 --rate 0 -- \
             scripts/cluster.sh launch -n $(($1 * $2)) --ppn $2 -- '$prefix/test_coll' --quick \
             > '$prefix/out.cluster' 2>&1 || { tail -5 '$prefix/out.cluster'; false; }"
  done
else
  skip "installed test_coll on emulated hosts: needs root and iproute2 with network namespaces"
fi

site=$prefix/lib/python3/site-packages
check "installed python package" test -e "$site/baton/__init__.py" -a -e "$site/baton/_lib.py"
# The package imports NumPy; without it tests/run.sh skips the Python tests too.
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  check "installed package loads the installed libbaton.so" \
    sh -c "cd / && PYTHONPATH='$site' /usr/bin/python3 -c 'import baton; print(baton._lib.path)' |
           grep -qxF '$prefix/lib/libbaton.so'"
  check "installed package's test at 2 ranks" \
    sh -c "PYTHONPATH='$site' '$prefix/bin/baton-run' -n 2 /usr/bin/python3 tests/test_python.py > '$prefix/py.out' 2>&1 &&
           grep -q 'library $prefix/lib/libbaton.so' '$prefix/py.out' || { tail -5 '$prefix/py.out'; false; }"
else
  skip "the installed package's import and test: /usr/bin/python3 cannot import numpy (apt-get install -y python3-numpy)"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
