# baton - build, install and test.
#   make                      library, tools and tests into build/, and the PyTorch backend
#   make torch                the PyTorch backend alone (python/csrc/ -> build/python/baton/)
#   make test                 the whole test suite (see tests/run.sh)
#   make test-quick           a subset: under a minute on 2 cores
#   make test T=PATTERN       the suite's entries named PATTERN... or matching a glob
#   make format               clang-format every tracked C file in place
#   make check-format         fail, naming them, where files differ from clang-format
#   make check-aarch64        the library's sources compile for aarch64 (clang, syntax only)
#   make install PREFIX=DIR   headers, libraries, pkg-config file and tools
#   make SAN=1                the same with ASan+UBSan, into build-asan/
#   make TSAN=1               the same with ThreadSanitizer, into build-tsan/
#   make fuzz                 the libFuzzer targets of tests/fuzz/ (clang), into build-fuzz/
#   make fuzz-run FUZZ_SECONDS=600   run each of them that long (the suite runs 20 s each)

PREFIX ?= /usr/local
CC ?= cc
SAN ?= 0
TSAN ?= 0

ifeq ($(TSAN),1)
  BUILD ?= build-tsan
  SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
  OPT = -O1 -g
else ifeq ($(SAN),1)
  BUILD ?= build-asan
  SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
  OPT = -O1 -g
else
  BUILD ?= build
  SANFLAGS =
  OPT = -O3 -g
endif

WARN = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -fPIC -pthread -Iinclude -Isrc $(SANFLAGS) $(CFLAGS)
LDFLAGS_ALL = -pthread $(SANFLAGS) $(LDFLAGS)
# OpenSSL's libcrypto (Debian: libssl-dev) for the HMAC of src/auth.c.
LIBS = -lcrypto

LIB_SRC = $(wildcard src/*.c src/coll/*.c src/transport/*.c)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOLS = $(patsubst tools/%.c,$(BUILD)/bin/%,$(wildcard tools/*.c))
TESTS = $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*.c))
EXAMPLES = $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

all: $(BUILD)/lib/libbaton.so $(BUILD)/lib/libbaton.a $(TOOLS) $(TESTS) $(EXAMPLES)

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/lib/libbaton.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libbaton.so: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libbaton.so $(LDFLAGS_ALL) -o $@ $^ -lrt $(LIBS)

# Tools, tests and examples link the static library so that they run from the
# build tree without LD_LIBRARY_PATH.
# baton-bench compiles in each collective of issue 4 that baton.h declares.
BENCH_HAVE = $(shell for c in broadcast reduce alltoall gather scatter allgatherv reduce_scatterv send alltoallv; do \
  grep -qw "int baton_$$c" include/baton.h && printf ' -DBENCH_HAVE_%s' $$c; done)

$(BUILD)/bin/%: tools/%.c $(wildcard tools/*.h) tests/ref.h $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(BENCH_HAVE) $< -o $@ $(BUILD)/lib/libbaton.a $(LDFLAGS_ALL) -lrt -lm $(LIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(BUILD)/lib/libbaton.a $(LDFLAGS_ALL) -lrt -lm $(LIBS)

$(BUILD)/examples/%: examples/%.c $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(BUILD)/lib/libbaton.a $(LDFLAGS_ALL) -lrt -lm $(LIBS)

# T=PATTERN: only the entries of tests/run.sh whose name begins with
# PATTERN, or, with *, ? or [, matches it as a glob ('test_coll -n 3*').
RUN_ONLY = $(if $(T),--only '$(subst ','\'',$(T))')

test: all
	bash tests/run.sh $(RUN_ONLY)

test-quick: all
	bash tests/run.sh --quick $(RUN_ONLY)

# The tree follows .clang-format (clang-format-14); CI runs check-format.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cc' 2>/dev/null || \
  find . -path './build*' -prune -o \( -name '*.[ch]' -o -name '*.cc' \) -print)

format:
	clang-format -i $(FORMAT_FILES)

check-format:
	@bad=$$(for f in $(FORMAT_FILES); do clang-format "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then \
	  echo "not formatted as .clang-format says (make format fixes them):"; printf '  %s\n' $$bad; exit 1; \
	fi

# The library's sources compile for aarch64: clang's cross target, syntax
# only, with the C library's headers for aarch64 from Debian's
# libc6-dev-arm64-cross. OpenSSL's configuration header is per architecture
# and Debian's arm64 one needs multiarch; the host's (LP64 too) stands in.
AARCH64_CFLAGS = --target=aarch64-linux-gnu -std=c11 -D_GNU_SOURCE -Iinclude -Isrc \
  -Werror=implicit-function-declaration -isystem /usr/aarch64-linux-gnu/include \
  -idirafter /usr/include/$(shell gcc -print-multiarch 2>/dev/null)

AARCH64_SRC = $(wildcard src/*.c src/*/*.c)

check-aarch64:
	@if [ "$$(uname -m)" != aarch64 ] && [ ! -e /usr/aarch64-linux-gnu/include/stdio.h ]; then \
	  echo "check-aarch64 needs aarch64's C headers: apt-get install -y libc6-dev-arm64-cross"; exit 1; \
	fi
	@bad=; for f in $(AARCH64_SRC); do \
	  clang $(AARCH64_CFLAGS) -fsyntax-only "$$f" || bad="$$bad $$f"; \
	done; \
	if [ -n "$$bad" ]; then echo "do not compile for aarch64:$$bad"; exit 1; fi

# The main job: a 4-rank allreduce through the launcher.
demo: all
	$(BUILD)/bin/baton-run -n 4 $(BUILD)/examples/allreduce_demo 64

# baton next to Open MPI, MPICH and Gloo (docs/performance.md): installs the
# peers with apt when missing, builds them, runs bench/compare.sh.
compare: all
	$(MAKE) -f bench/Makefile.peers BUILD=$(BUILD)
	bench/compare.sh

# The version, from baton.h, for the CMake package files.
VERSION_MAJOR = $(shell sed -n 's/^\#define BATON_VERSION_MAJOR \([0-9]*\)/\1/p' include/baton.h)
VERSION_MINOR = $(shell sed -n 's/^\#define BATON_VERSION_MINOR \([0-9]*\)/\1/p' include/baton.h)
VERSION_PATCH = $(shell sed -n 's/^\#define BATON_VERSION_PATCH \([0-9]*\)/\1/p' include/baton.h)
VERSION = $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/baton.h include/baton_mpi.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/lib/libbaton.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(BUILD)/lib/libbaton.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/bin/baton-run $(BUILD)/bin/baton-bench $(BUILD)/bin/baton-soak $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(BUILD)/bin/baton-viz $(BUILD)/bin/baton-model $(BUILD)/bin/baton-tune $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' baton.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/baton.pc
	install -d $(DESTDIR)$(PREFIX)/lib/cmake/baton
	for f in batonConfig batonConfigVersion; do \
	  sed -e 's|@VERSION@|$(VERSION)|; s|@MAJOR@|$(VERSION_MAJOR)|; s|@MINOR@|$(VERSION_MINOR)|' \
	    cmake/$$f.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/baton/$$f.cmake; \
	done

# The Python package, where `PYTHONPATH=$(PREFIX)/lib/python3/site-packages`
# finds it; it loads $(PREFIX)/lib/libbaton.so by its own path.
PYPKG = $(DESTDIR)$(PREFIX)/lib/python3/site-packages/baton
install: install-python
install-python:
	install -d $(PYPKG)
	install -m 644 python/baton/*.py $(PYPKG)/

# ---------------------------------------------------------------- PyTorch
# python/csrc/: the extension that makes baton a torch.distributed backend
# (`import baton.torch` loads it and registers backend "baton"). `make`
# builds it when PyTorch's C++ headers are installed and $(TORCH_PYTHON)
# imports torch (Debian: python3-torch libtorch-dev pybind11-dev), and
# otherwise says in one line why it skips it. python/csrc/flags.py asks that
# torch for its include directories and ABI once, into $(TORCH_MK) (delete
# it after changing torch). The extension links libbaton.a and keeps its
# symbols to itself, so it needs no libbaton.so at run time and sits beside
# the Python package's files, in the build tree and installed alike. Not
# with SAN=1 or TSAN=1: Python itself does not load the sanitizers' runtime.
TORCH_PYTHON ?= /usr/bin/python3
TORCH_HEADER ?= /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp
TORCH_EXT = $(BUILD)/python/baton/_baton_torch.so
TORCH_MK = $(BUILD)/python/torch.mk
TORCH_OBJ = $(patsubst python/csrc/%.cpp,$(BUILD)/python/csrc/%.o,$(wildcard python/csrc/*.cpp))
TORCH_CXXFLAGS_ALL = -std=c++17 -O2 -g -fPIC -fvisibility=hidden -pthread -Wall -Wextra -Werror \
  -Iinclude $(TORCH_CXXFLAGS) $(CXXFLAGS)

ifeq ($(SAN)$(TSAN),00)
all: torch
endif

torch: $(BUILD)/lib/libbaton.a
	@if [ ! -f $(TORCH_HEADER) ]; then \
	  echo "baton.torch skipped: no $(TORCH_HEADER) (Debian: apt-get install python3-torch libtorch-dev pybind11-dev)"; \
	elif [ ! -f $(TORCH_MK) ] && ! why=$$(mkdir -p $(dir $(TORCH_MK)) && $(TORCH_PYTHON) python/csrc/flags.py $(TORCH_MK) 2>&1); then \
	  echo "baton.torch skipped: $$why"; \
	else \
	  $(MAKE) --no-print-directory TORCH_BUILD=1 torch-ext; \
	fi

ifeq ($(TORCH_BUILD),1)
include $(TORCH_MK)

torch-ext: $(TORCH_EXT)
	@:

$(BUILD)/python/csrc/%.o: python/csrc/%.cpp $(wildcard python/csrc/*.hpp) include/baton.h $(TORCH_MK)
	@mkdir -p $(dir $@)
	$(CXX) $(TORCH_CXXFLAGS_ALL) -c $< -o $@

$(TORCH_EXT): $(TORCH_OBJ) $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CXX) -shared -o $@ $(TORCH_OBJ) $(BUILD)/lib/libbaton.a -Wl,--exclude-libs,ALL \
	  $(LDFLAGS_ALL) $(TORCH_LDFLAGS) -lrt $(LIBS)
endif

install: install-torch
install-torch: all
	@if [ -f $(TORCH_EXT) ]; then \
	  echo "install -m 755 $(TORCH_EXT) $(PYPKG)/"; \
	  install -d $(PYPKG) && install -m 755 $(TORCH_EXT) $(PYPKG)/; \
	fi

# ---------------------------------------------------------------- fuzzing
# The library again, built by clang with coverage for libFuzzer and with
# ASan+UBSan; one program per tests/fuzz/fuzz_*.c. A target may include the
# source file it fuzzes; the archive then supplies only the rest.
FUZZ_CC ?= clang
FUZZ_BUILD = build-fuzz
FUZZ_SECONDS ?= 20
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g $(WARN) -pthread -Iinclude -Isrc $(FUZZ_SAN)
FUZZ_LIB_OBJ = $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZERS = $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard tests/fuzz/fuzz_*.c))

$(FUZZ_BUILD)/%.o: %.c $(wildcard include/*.h src/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/libbaton.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_BUILD)/libbaton.a $(wildcard src/*.c src/*.h)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< -o $@ $(FUZZ_BUILD)/libbaton.a -lrt -lm $(LIBS)

fuzz: $(FUZZERS)

fuzz-run: fuzz
	bash tests/fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf build build-asan build-tsan build-fuzz

.PHONY: all test test-quick format check-format check-aarch64 demo compare install install-python \
  clean fuzz fuzz-run torch torch-ext install-torch
