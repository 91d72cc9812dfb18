#!/usr/bin/env bash
# tests/test_cmake.sh - baton from CMake, as a C or C++ project uses it:
# `make install PREFIX=DIR`, then find_package(baton 0.1) with
# -DCMAKE_PREFIX_PATH=DIR and target_link_libraries(... baton::baton) for a
# C program and a C++ program written only against baton.h, and for the C
# one against baton::baton_static; each runs under the installed baton-run
# at 2 and 3 ranks and checks an allreduce. Then: a version the install
# cannot satisfy (9.0) is refused, and the installed tree moved elsewhere
# still configures, builds and runs (the config finds its prefix from its
# own place). Needs cmake and g++ (the README's set-up line).
set -u
cd "$(dirname "$0")/.."
. tests/shlib.sh
BUILD=${BUILD:-build}
command -v cmake >/dev/null || skip_all "cmake is not installed (apt-get install -y cmake)"
command -v g++ >/dev/null || skip_all "g++ is not installed (apt-get install -y g++)"

prefix=$tmp/prefix
if make -s install PREFIX="$prefix" BUILD="$BUILD" >"$tmp/install.log" 2>&1; then ok; else
  bad "make install"; sed 's/^/  | /' "$tmp/install.log" >&2
fi
for f in lib/cmake/baton/batonConfig.cmake lib/cmake/baton/batonConfigVersion.cmake; do
  if [ -f "$prefix/$f" ]; then ok; else bad "installed $f"; fi
done

mkdir -p "$tmp/src"
cat >"$tmp/src/prog.c" <<'C'
#include <stdio.h>
#include <baton.h>
int main(void) {
  baton_comm_t *comm;
  if (baton_comm_init(&comm) != BATON_OK) {
    fprintf(stderr, "init: %s\n", baton_last_init_error());
    return 1;
  }
  int r = baton_comm_rank(comm), n = baton_comm_size(comm), sum = -1;
  int rc = baton_allreduce(&r, &sum, 1, BATON_INT32, BATON_SUM, comm);
  int ok = rc == BATON_OK && sum == n * (n - 1) / 2;
  printf("rank %d: %s\n", r, ok ? "ok" : "WRONG");
  baton_comm_destroy(comm);
  return !ok;
}
C
cat >"$tmp/src/prog.cc" <<'CXX'
#include <baton.h>
#include <iostream>
#include <vector>
int main() {
  baton_comm_t *comm = nullptr;
  if (baton_comm_init(&comm) != BATON_OK) {
    std::cerr << "init: " << baton_last_init_error() << "\n";
    return 1;
  }
  int r = baton_comm_rank(comm), n = baton_comm_size(comm);
  std::vector<double> v(1000, r + 1.0);
  int rc = baton_allreduce(v.data(), v.data(), v.size(), BATON_FLOAT64, BATON_SUM, comm);
  bool ok = rc == BATON_OK && v.front() == n * (n + 1) / 2.0 && v.back() == v.front();
  std::cout << "rank " << r << ": " << (ok ? "ok" : "WRONG") << "\n";
  baton_comm_destroy(comm);
  return ok ? 0 : 1;
}
CXX
cat >"$tmp/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.13)
project(uses_baton C CXX)
find_package(baton ${WANT} REQUIRED)
add_executable(prog_c prog.c)
target_link_libraries(prog_c PRIVATE baton::baton)
add_executable(prog_cxx prog.cc)
target_link_libraries(prog_cxx PRIVATE baton::baton)
add_executable(prog_static prog.c)
target_link_libraries(prog_static PRIVATE baton::baton_static)
CM

# configure_build NAME PREFIX WANT DIR: configure and build, or say why not.
configure_build() {
  if cmake -S "$tmp/src" -B "$4" -DCMAKE_PREFIX_PATH="$2" -DWANT="$3" >"$4.log" 2>&1 &&
    cmake --build "$4" -j 2 >>"$4.log" 2>&1; then ok; else
    bad "$1"; tail -20 "$4.log" | sed 's/^/  | /' >&2; return 1
  fi
}
# run_all NAME PREFIX DIR: every program at 2 and 3 ranks, every rank ok.
run_all() {
  for p in prog_c prog_cxx prog_static; do
    for n in 2 3; do
      out=$(timeout 60 "$2/bin/baton-run" -n "$n" "$3/$p" 2>&1)
      if [ "$(printf '%s\n' "$out" | grep -c ': ok$')" = "$n" ]; then ok; else
        bad "$1: $p at $n ranks"; printf '%s\n' "$out" | sed 's/^/  | /' >&2
      fi
    done
  done
}

if configure_build "find_package(baton 0.1) and build" "$prefix" 0.1 "$tmp/b1"; then
  run_all "installed" "$prefix" "$tmp/b1"
  if ldd "$tmp/b1/prog_c" | grep -q "$prefix/lib/libbaton.so"; then ok; else
    bad "prog_c is not linked to the installed libbaton.so"; ldd "$tmp/b1/prog_c" >&2
  fi
fi
# A version this install does not satisfy: configuring fails, saying so.
if cmake -S "$tmp/src" -B "$tmp/b9" -DCMAKE_PREFIX_PATH="$prefix" -DWANT=9.0 >"$tmp/b9.log" 2>&1; then
  bad "find_package(baton 9.0) succeeded against 0.1"
else
  expect_line "find_package(baton 9.0) names the version" "$tmp/b9.log" "version"
fi
# Moved: the config finds its prefix from where it is now.
mv "$prefix" "$tmp/moved"
if configure_build "find_package(baton) after the install moved" "$tmp/moved" "" "$tmp/b2"; then
  run_all "moved" "$tmp/moved" "$tmp/b2"
fi
finish
