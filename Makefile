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
#   make install PREFIX=/usr/local   (DESTDIR too; make uninstall removes it again)
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

# What `make install` puts under $(DESTDIR)$(PREFIX), and `make uninstall` removes:
# the command, the eBPF collector when built, the preload library stripped, its debug
# info apart under lib/debug/.build-id/ (where gdb, perf and valgrind look for it by
# the library's build id), the public header, the man pages and shell completions
# generated from the command's --help (analyzer/module.mk; the pages again, to name
# the installed documentation), the documentation.
# RATIONALE: the library runs inside the user's jobs, so a backtrace through it is
# worth its debug info (3.4 MB, kept out of the mapped file); the command's own
# crashes are reproduced from a build tree. Directories that may hold other
# programs' files (bin, lib, share/man/man1...) are left in place by uninstall.
STRIP ?= strip
OBJCOPY ?= objcopy
INSTALL ?= install
I := $(DESTDIR)$(PREFIX)
# the build id of the installed library (empty when none): names its debug file
installed_build_id = $(shell readelf -n $(I)/lib/libstepprof.so 2>/dev/null | sed -n 's/.*Build ID: *//p')

.PHONY: uninstall
install: build-all
	$(INSTALL) -d $(I)/bin $(I)/lib $(I)/include/stepprof $(I)/share/man/man1 \
		$(I)/share/bash-completion/completions $(I)/share/zsh/site-functions $(I)/share/doc/stepprof/docs
	$(INSTALL) -m 755 -s --strip-program=$(STRIP) $(BUILD)/bin/stepprof $(I)/bin/stepprof
	$(if $(wildcard $(BUILD)/bin/stepprof-bpf),$(INSTALL) -m 755 -s --strip-program=$(STRIP) $(BUILD)/bin/stepprof-bpf $(I)/bin/stepprof-bpf)
	$(STRIP) --strip-unneeded -o $(I)/lib/libstepprof.so.tmp $(BUILD)/lib/libstepprof.so
	chmod 755 $(I)/lib/libstepprof.so.tmp && mv $(I)/lib/libstepprof.so.tmp $(I)/lib/libstepprof.so
	$(Q)id=$$(readelf -n $(BUILD)/lib/libstepprof.so | sed -n 's/.*Build ID: *//p'); \
	if [ -n "$$id" ]; then \
		d=$(I)/lib/debug/.build-id/$$(echo $$id | cut -c1-2); f=$$d/$$(echo $$id | cut -c3-).debug; \
		echo "$(INSTALL) -d $$d && $(OBJCOPY) --only-keep-debug $(BUILD)/lib/libstepprof.so $$f"; \
		$(INSTALL) -d $$d && $(OBJCOPY) --only-keep-debug $(BUILD)/lib/libstepprof.so $$f && chmod 644 $$f; \
	fi
	$(INSTALL) -m 644 include/stepprof/stepprof.h $(I)/include/stepprof/stepprof.h
	$(Q)for v in '' $(CLI_VERBS); do \
		f=$(I)/share/man/man1/stepprof$${v:+-$$v}.1; echo "  GEN     $$f"; \
		scripts/cli-gen.sh man $(BUILD)/bin/stepprof "$$v" $(PREFIX)/share/doc/stepprof > $$f && chmod 644 $$f || exit 1; \
	done
	$(INSTALL) -m 644 $(CLI_BASH_COMPLETION) $(I)/share/bash-completion/completions/stepprof
	$(INSTALL) -m 644 $(CLI_ZSH_COMPLETION) $(I)/share/zsh/site-functions/_stepprof
	$(INSTALL) -m 644 README.md LICENSE $(I)/share/doc/stepprof/
	$(INSTALL) -m 644 $(wildcard docs/*.md) $(I)/share/doc/stepprof/docs/

uninstall:
	$(Q)id=$(installed_build_id); \
	if [ -n "$$id" ]; then \
		d=$(I)/lib/debug/.build-id/$$(echo $$id | cut -c1-2); \
		echo "rm -f $$d/$$(echo $$id | cut -c3-).debug"; rm -f $$d/$$(echo $$id | cut -c3-).debug; \
		rmdir $$d $(I)/lib/debug/.build-id $(I)/lib/debug 2>/dev/null; true; \
	fi
	rm -f $(I)/bin/stepprof $(I)/bin/stepprof-bpf $(I)/lib/libstepprof.so
	rm -f $(I)/include/stepprof/stepprof.h
	[ ! -d $(I)/include/stepprof ] || rmdir --ignore-fail-on-non-empty $(I)/include/stepprof
	rm -f $(patsubst $(BUILD)/%,$(I)/%,$(CLI_MAN_PAGES))
	rm -f $(I)/share/bash-completion/completions/stepprof $(I)/share/zsh/site-functions/_stepprof
	rm -rf $(I)/share/doc/stepprof

clean:
	rm -rf $(BUILD) build-san build-asan $(CLEAN_EXTRA)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
