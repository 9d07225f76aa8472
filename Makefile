# stepprof - top-level Makefile.
#
# Every output lives under build/. Each part of the tree has its own module.mk,
# included below, that appends to ALL_TARGETS and defines its own rules; this file
# holds the shared flags, the generic compile rule and the user-facing targets.
#
#   make            build everything (libstepprof.so, stepprof, simulated GPU, workloads)
#   make test       install missing packages (as root), build, run the whole test suite
#   make demo       profile the bundled input-bound workload and print the report
#   make bench      measure the performance budgets of docs/architecture.md as ratios
#   make sanitize   the test suite under UBSan and AddressSanitizer (~12 min; CI runs it)
#   make install PREFIX=/usr/local
#   make V=1        show full commands;  make WERROR=1  warnings are errors (CI)

CC ?= cc
CLANG ?= clang
BPFTOOL ?= bpftool
CUDA_HOME ?= /usr/local/cuda
PREFIX ?= /usr/local
BUILD := build

ifeq ($(V),1)
Q :=
else
Q := @
endif

WARN := -Wall -Wextra -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
OPT ?= -O2 -g
CFLAGS_COMMON := -std=gnu11 $(OPT) -fPIC -fno-strict-aliasing $(WARN)
CPPFLAGS_COMMON := -D_GNU_SOURCE -Iinclude -Ilibtrace -I$(BUILD)/gen -isystem $(CUDA_HOME)/include
DEPFLAGS = -MMD -MP

ALL_TARGETS :=
TEST_SRCS :=
TEST_LIBS :=
TEST_DEPS :=
CLEAN_EXTRA :=

.PHONY: all test demo bench sanitize install clean deps check-cuda
all: build-all

include libtrace/module.mk
include preload/module.mk
include analyzer/module.mk
-include bpf/module.mk
-include tests/simgpu/module.mk
-include tests/workloads/module.mk
-include tests/fuzz/module.mk
include tests/module.mk

build-all: $(ALL_TARGETS)
.PHONY: build-all
# Keep objects that only feed a pattern rule (workloads): no rebuild on every make.
.SECONDARY:

# Generic compile rule: build/obj/<path>.o from <path>.c; per-module flags come
# from target-specific variables (MODULE_CFLAGS / MODULE_CPPFLAGS).
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS_COMMON) $(MODULE_CPPFLAGS) $(CFLAGS_COMMON) $(MODULE_CFLAGS) $(DEPFLAGS) -c $< -o $@

deps:
	$(Q)scripts/install-deps.sh

check-cuda:
	$(Q)test -f $(CUDA_HOME)/include/cuda.h || { echo "stepprof: no CUDA headers in $(CUDA_HOME)/include; install the CUDA toolkit headers or set CUDA_HOME (make deps says how)"; exit 1; }

# The README's test command. The last lines are Criterion's summary.
# One job: the end-to-end tests measure time shares and must not compete for the
# two cores of a CI machine; every test has a time limit.
TEST_ARGS ?= --jobs 1 --timeout 600
test: deps
	$(Q)$(MAKE) --no-print-directory WERROR=$(WERROR) build-all $(TEST_BIN)
	$(Q)CUDA_HOME=$(CUDA_HOME) STEPPROF_BUILD=$(BUILD) $(TEST_BIN) $(TEST_ARGS)

demo: deps
	$(Q)$(MAKE) --no-print-directory build-all
	$(Q)scripts/demo.sh

bench: build-all
	$(Q)scripts/bench.sh

# The suite under UBSan and ASan (build-san/, build-asan/; scripts/sanitize.sh).
sanitize: build-all
	$(Q)scripts/sanitize.sh

install: build-all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/stepprof
	install -m 755 $(BUILD)/bin/stepprof $(DESTDIR)$(PREFIX)/bin/stepprof
	install -m 755 $(BUILD)/lib/libstepprof.so $(DESTDIR)$(PREFIX)/lib/libstepprof.so
	install -m 644 include/stepprof/stepprof.h $(DESTDIR)$(PREFIX)/include/stepprof/stepprof.h
	$(if $(wildcard $(BUILD)/bin/stepprof-bpf),install -m 755 $(BUILD)/bin/stepprof-bpf $(DESTDIR)$(PREFIX)/bin/stepprof-bpf)

clean:
	rm -rf $(BUILD) build-san build-asan $(CLEAN_EXTRA)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
