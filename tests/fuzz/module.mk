# tests/fuzz/module.mk - `make fuzz`: libFuzzer targets for everything stepprof
# parses (design rule: bad input gets a one-line error and a non-zero exit, never
# a crash). Not part of `make` or `make test`; CI runs it for 60 s a target (.ci/run).
#
#   make fuzz                      build build/fuzz/fuzz_{reader,analyze,export,summary}, seed, run each
#   make fuzz FUZZ_SECONDS=600     longer runs
#   make fuzz-build                only build (then run a target by hand, see docs/cli.md)
#
# The targets and the analyzer library are built with clang and
# -fsanitize=fuzzer,address,undefined into build/fuzz/obj (never mixed with the
# ordinary objects). The seed corpus is generated at run time with
# tests/lib/tracegen (gen_corpus.c) into build/fuzz/corpus/seeds; what each target
# finds accumulates in build/fuzz/corpus/<target>, crashes in build/fuzz/artifacts.

FUZZ_SECONDS ?= 60
FUZZ_CC ?= $(CLANG)
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_TARGETS := fuzz_reader fuzz_analyze fuzz_export fuzz_summary
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=gnu11 -O1 -g -fno-omit-frame-pointer $(WARN) $(FUZZ_SAN)
FUZZ_CPPFLAGS := -D_GNU_SOURCE -Iinclude -Ilibtrace -I$(BUILD)/gen -Ianalyzer -Itests/lib -isystem $(CUDA_HOME)/include
FUZZ_LIB_OBJS := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(ANALYZER_LIB_SRCS) $(LIBTRACE_SRCS))

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/%.o $(FUZZ_LIB_OBJS)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -lm

# The seed generator is an ordinary program (no fuzzer main).
$(FUZZ_DIR)/gen_corpus: tests/fuzz/gen_corpus.c tests/lib/tracegen.c tests/lib/tracegen.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS_COMMON) -Itests/lib $(CFLAGS_COMMON) -o $@ tests/fuzz/gen_corpus.c tests/lib/tracegen.c

.PHONY: fuzz fuzz-build
fuzz-build: $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS) gen_corpus)

fuzz: fuzz-build
	$(Q)tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
