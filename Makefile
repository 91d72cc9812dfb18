# baton - build, install and test.
#   make                      library, tools and tests into build/
#   make test                 the whole test suite (see tests/run.sh)
#   make install PREFIX=DIR   headers, libraries, pkg-config file and tools
#   make SAN=1                the same with ASan+UBSan, into build-asan/

PREFIX ?= /usr/local
CC ?= cc
SAN ?= 0

ifeq ($(SAN),1)
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
$(BUILD)/bin/%: tools/%.c $(wildcard tools/*.h) $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(BUILD)/lib/libbaton.a $(LDFLAGS_ALL) -lrt -lm $(LIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(BUILD)/lib/libbaton.a $(LDFLAGS_ALL) -lrt -lm $(LIBS)

$(BUILD)/examples/%: examples/%.c $(BUILD)/lib/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(BUILD)/lib/libbaton.a $(LDFLAGS_ALL) -lrt -lm $(LIBS)

test: all
	bash tests/run.sh

# The main job: a 4-rank allreduce through the launcher.
demo: all
	$(BUILD)/bin/baton-run -n 4 $(BUILD)/examples/allreduce_demo 64

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/baton.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/lib/libbaton.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(BUILD)/lib/libbaton.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/bin/baton-run $(BUILD)/bin/baton-bench $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' baton.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/baton.pc

clean:
	rm -rf build build-asan

.PHONY: all test demo install clean
