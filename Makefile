# kvdemo — a small C program that teaches the transformer KV cache.
#
#   make run      build kvdemo and run lesson 2 (the first thing to try)
#   make          build ./kvdemo
#   make test     build and run every test with the fast kernels, then the
#                 kernels' tests with the portable ones (installs cmocka when
#                 it can); SANITIZE=1 then adds make asan;
#                 TEST='*cache*' runs only the tests whose name matches;
#                 V=1 shows the whole compiler commands
#   make asan     the tests under AddressSanitizer + UBSan (make test SANITIZE=1's third pass)
#   make coverage the tests built with gcov, then line and branch coverage per file
#   make bench    cache against no cache up to 1024 tokens, and training (kvdemo bench: a lesson's minute)
#   make data     download tinyshakespeare (for training) and check its sha256
#   make fuzz     build the fuzz targets with clang and run each FUZZ_SECONDS (60)
#   make debug    an unoptimised build with symbols, for gdb
#   make install  install kvdemo, its data, docs (en, zh), man page and bash completion
#                 (PREFIX=/usr/local, DESTDIR for staging); make uninstall
#   make clean    remove what the build made

CC      ?= cc
# ARCH picks the instruction set of the fast kernels; `make ARCH=` builds the
# portable C path that any C11 compiler takes.
ARCH    ?= -march=native
# -O3 rather than -O2: GCC's -O2 vectorizes only loops that need no run-time
# checks, which left the training's elementwise loops scalar. The numbers do
# not change: no -ffast-math, and -ffp-contract=off (in WARN, so that it is
# always there) keeps any compiler from making a * b + c one fused
# multiply-add, so every operation rounds as the C says: a row that the fast
# kernels compute among many and the same row alone get the same bits.
OPT     ?= -O3
CFLAGS  ?= $(OPT) $(ARCH)
WARN     = -std=c11 -ffp-contract=off -Wall -Wextra -Werror -Wshadow -Wvla
# src/ is in folders by layer, lowest first (docs/architecture.md);
# tests/layers.sh, run by make check, fails when a file includes a header of
# a layer above its own.
LAYERS   = util core cache model present cmd
CPPFLAGS = -D_POSIX_C_SOURCE=200809L $(addprefix -Isrc/,$(LAYERS)) -Ilessons
# src/util/allocfault.c stands between kvdemo and the C library's allocators
# (KVDEMO_TEST_FAIL_ALLOC, for the tests of running out of memory): the
# linker's --wrap sends each call of malloc and the others to it.
LDWRAP   = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,--wrap=strdup,--wrap=open_memstream
LDLIBS   = -lm -lpthread $(LDWRAP)
BUILD   ?= build
BIN     ?= kvdemo

# One short line a file while building ("cc src/model/gpt.c"); V=1 shows the
# whole compiler commands.
V       ?= 0
ifeq ($(V),1)
  Q   =
  SAY = @:
else
  Q   = @
  SAY = @echo
endif

SRC      = $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c)) $(wildcard lessons/*.c)
OBJ      = $(SRC:%.c=$(BUILD)/%.o)
LIBOBJ   = $(filter-out $(BUILD)/src/cmd/main.o,$(OBJ))
TESTS    = $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))
# The slowest programs start first (TEST_TIMES=1 sh tests/run-all.sh ...
# measures them), so that the cores stay busy to the end of a pass instead
# of one long program running alone after the others.
SLOW     = test_spec test_cli test_errors test_html test_oom test_lesson63 test_lessons test_lesson61
TESTS   := $(foreach t,$(SLOW),$(filter %/$(t),$(TESTS))) $(filter-out $(addprefix %/,$(SLOW)),$(TESTS))
# PASS=portable keeps the programs whose results can depend on the kernels,
# PASS=asan leaves out the browser's; the lists are in tests/passes.mk.
include tests/passes.mk
PASS    ?= fast
ifeq ($(PASS),portable)
  TESTS := $(filter $(addprefix %/,$(KERNEL_TESTS)),$(TESTS))
else ifeq ($(PASS),asan)
  TESTS := $(filter-out $(addprefix %/,$(BROWSER_TESTS)),$(TESTS))
endif
TESTLIB  = $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(wildcard tests/test_*.c),$(wildcard tests/*.c))) \
           $(BUILD)/tests/fuzz/targets.o

.PHONY: all run test check asan coverage debug bench data install uninstall clean fuzz fuzz-build
# The shared test objects are kept between builds.
.SECONDARY: $(TESTLIB)

all: $(BIN)

$(BIN): $(OBJ)
	$(SAY) "cc -o $@"
	$(Q)$(CC) $(CFLAGS) -o $@ $(OBJ) $(LDLIBS)

# The compiler and its flags are kept in $(BUILD)/flags: when they change
# (`make ARCH=` after `make`), everything is rebuilt.
FLAGS_NOW = $(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) $(LDLIBS)
$(BUILD)/flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' > $@
FORCE:

$(BUILD)/%.o: %.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(SAY) "cc $<"
	$(Q)$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

-include $(OBJ:.o=.d) $(TESTLIB:.o=.d)

# The README's first command: build (quietly: only what fails is shown),
# then lesson 2 of the article.
run:
	@[ -x $(BIN) ] || echo "kvdemo: building ./$(BIN) first (about a minute) ..." >&2
	@$(MAKE) --no-print-directory -s $(BIN) >/dev/null
	@./$(BIN) lesson 2

# The README's second command. cmocka is the one thing the tests need.
# The suite runs in two passes: built for this machine (the fast kernels);
# with ARCH= into build-portable/ (the plain C path any compiler takes), so
# that neither path can rot unseen: there only the programs whose results can
# depend on the kernels (tests/passes.mk's KERNEL_TESTS). SANITIZE=1 adds a
# third, make asan: about 6 minutes more on two cores, which would take CI
# past its 10-minute budget, so that .ci/run's make test leaves it out.
# Each pass ends with the seconds it took.
# The builds of the test passes use every core (JOBS=1: one at a time).
JOBS ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
# A failing pass does not stop the next ones: make test fails at the end,
# naming the passes that failed. `timed NAME` after a pass's command prints
# "make test: the NAME pass took N s" (and "failed" when it did).
TIMED = t0=$$(date +%s); failed=; timed() { s=$$?; [ $$s -eq 0 ] && r= || { r=", failed"; failed="$$failed $$1"; }; \
        echo "make test: the $$1 pass took $$(($$(date +%s) - t0)) s$$r"; t0=$$(date +%s); };

test: tests/need-cmocka
	@$(TIMED) \
	$(MAKE) -j$(JOBS) --no-print-directory check PASS=fast; timed fast; \
	$(MAKE) -j$(JOBS) --no-print-directory check PASS=portable BUILD=build-portable BIN=build-portable/kvdemo ARCH=; \
	  timed portable; \
	if [ "$(SANITIZE)" = 1 ]; then $(MAKE) --no-print-directory asan; timed sanitizer; fi; \
	[ -z "$$failed" ] || { echo "make test: failed:$$failed" >&2; exit 1; }

# TEST='pattern' (shell wildcards) picks tests by function name in every program.
export TEST

tests/need-cmocka:
	@sh tests/need-cmocka.sh
.PHONY: tests/need-cmocka

# Build and run every tests/test_*.c; each is its own cmocka program.
# tests/globals.sh fails on a mutable process-wide variable it does not name.
# tests/long-functions.sh fails on a function over 80 lines but a model's
# forward or backward pass (it names them).
# KVDEMO_MAKE: the variables this build was made with, for the tests that
# run make themselves (test_make) without rebuilding it all.
check: $(BIN) $(TESTS)
	@sh tests/layers.sh $(LAYERS)
	@sh tests/long-functions.sh
	@sh tests/passes.sh "$(KERNEL_TESTS)" "$(ONCE_TESTS)" "$(BROWSER_TESTS)"
	@sh tests/globals.sh $(BUILD)
	@KVDEMO_BIN=./$(BIN) KVDEMO_MAKE="BUILD=$(BUILD) BIN=$(BIN) CC='$(CC)' CFLAGS='$(CFLAGS)'" \
	  sh tests/run-all.sh $(TESTS)

$(BUILD)/tests/test_%: tests/test_%.c $(LIBOBJ) $(TESTLIB) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(SAY) "cc $< -o $@"
	$(Q)$(CC) $(WARN) $(CPPFLAGS) -Itests $(CFLAGS) -MMD -MP -o $@ $< $(LIBOBJ) $(TESTLIB) -lcmocka $(LDLIBS)

# The tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer
# in their own build folder (and their own ./kvdemo for the CLI tests).
asan: tests/need-cmocka
	@KVDEMO_SANITIZED=1 $(MAKE) -j$(JOBS) --no-print-directory check PASS=asan BUILD=build-asan BIN=build-asan/kvdemo \
	  OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"

# Line and branch coverage of src/ and lessons/ by the whole suite: the tests
# built with --coverage into build-cov/ (the counts of an earlier run are
# cleared first), then tests/coverage.sh reads gcov's counts. -O0, so that
# every line and branch of the C is one gcov can see; KVDEMO_COVERAGE lets a
# child process that ends with _exit write its counts too (lesson 6.3).
coverage: tests/need-cmocka
	@find build-cov -name '*.gcda' -delete 2>/dev/null || true
	@$(MAKE) --no-print-directory BUILD=build-cov BIN=build-cov/kvdemo OPT="-O0 --coverage -DKVDEMO_COVERAGE"
	@$(MAKE) --no-print-directory check BUILD=build-cov BIN=build-cov/kvdemo OPT="-O0 --coverage -DKVDEMO_COVERAGE" || \
	  echo "make coverage: some tests failed; the coverage below is of the run as it went"
	@sh tests/coverage.sh build-cov

# The parsers fed random inputs by libFuzzer (clang only; tests/fuzz/): each
# target runs FUZZ_SECONDS from its seed corpus, with AddressSanitizer and
# UBSan, and stops at the first crash, leaving the input in build-fuzz/. The
# portable kernels (ARCH=) build far faster and the parsers are the same.
# New inputs it finds stay in build-fuzz/corpus (copy the useful ones into
# tests/fuzz/corpus, where make test replays them).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS  = gpt_model llama_model checkpoint toydata text options \
                gpt_model_summed llama_model_summed checkpoint_summed toy_lessons memory prompt \
                llama2c_model bpe
# options with files (links, a folder, a device): the checks before the work
FUZZ_TARGETS += options_files
FUZZ_SAN      = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

fuzz:
	@$(MAKE) --no-print-directory fuzz-build CC=clang BUILD=build-fuzz ARCH= OPT="$(FUZZ_SAN) -fsanitize=fuzzer-no-link"
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "fuzz $$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -close_fd_mask=3 -timeout=20 -rss_limit_mb=4096 \
	    -artifact_prefix=build-fuzz/$$t- build-fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

fuzz-build: $(patsubst %,$(BUILD)/fuzz_%,$(FUZZ_TARGETS))

$(BUILD)/fuzz_%: tests/fuzz/driver.c $(BUILD)/tests/fuzz/targets.o $(LIBOBJ)
	$(CC) $(WARN) $(CPPFLAGS) -Itests/fuzz $(CFLAGS) -fsanitize=fuzzer -DFUZZ_TARGET=fuzz_$* -o $@ $< $(BUILD)/tests/fuzz/targets.o $(LIBOBJ) $(LDLIBS)

debug:
	@$(MAKE) --no-print-directory BUILD=build-debug BIN=build-debug/kvdemo OPT="-O0 -g"

# The fuller picture (two minutes or so): lengths past the context of 256,
# where the chapter's reset recomputes the window, and the training speed.
bench: $(BIN)
	./$(BIN) bench --train --steps 16,32,64,128,250,512,1024

data:
	@sh tests/get-data.sh

# Installed layout: PREFIX/bin/kvdemo finds its data in PREFIX/share/kvdemo
# (src/util/paths.c looks beside the binary, then in ../share/kvdemo), and the
# pages its help names in PREFIX/share/kvdemo/docs (English) and docs/zh,
# with README.md beside them, where the pages' links to it lead.
PREFIX  ?= /usr/local
BINDIR   = $(DESTDIR)$(PREFIX)/bin
DATADIR  = $(DESTDIR)$(PREFIX)/share/kvdemo
MANDIR   = $(DESTDIR)$(PREFIX)/share/man/man1
COMPDIR  = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
SHIPPED  = data/tianqi.txt data/tinyshakespeare-gpt.bin data/tinyshakespeare-draft.bin \
           data/tinyshakespeare-llama-mha.bin data/tinyshakespeare-llama-gqa4.bin \
           data/tinyshakespeare-llama-gqa2.bin data/tinyshakespeare-llama-mqa.bin \
           data/tinyshakespeare-llama-draft.bin \
           data/tinyshakespeare-val-2049.txt
SHIPPED += data/tinyshakespeare-llama-window64.bin
DOCS     = $(wildcard docs/*.md) $(wildcard docs/zh/*.md)

install: $(BIN)
	install -d $(BINDIR) $(DATADIR)/data $(DATADIR)/docs/zh $(MANDIR) $(COMPDIR)
	install -m 755 $(BIN) $(BINDIR)/kvdemo
	install -m 644 $(SHIPPED) $(DATADIR)/data/
	install -m 644 README.md $(DATADIR)/README.md
	install -m 644 $(filter-out docs/zh/%,$(DOCS)) $(DATADIR)/docs/
	install -m 644 $(filter docs/zh/%,$(DOCS)) $(DATADIR)/docs/zh/
	install -m 644 docs/kvdemo.1 $(MANDIR)/kvdemo.1
	install -m 644 docs/kvdemo.bash-completion $(COMPDIR)/kvdemo

uninstall:
	rm -f $(BINDIR)/kvdemo $(MANDIR)/kvdemo.1 $(COMPDIR)/kvdemo
	rm -f $(addprefix $(DATADIR)/,$(SHIPPED) $(DOCS) README.md)
	-rmdir $(DATADIR)/data $(DATADIR)/docs/zh $(DATADIR)/docs $(DATADIR) 2>/dev/null

clean:
	rm -rf build build-asan build-debug build-portable build-fuzz build-cov kvdemo
