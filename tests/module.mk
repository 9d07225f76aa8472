# tests/module.mk - one Criterion binary for the whole suite, so that `make test`
# ends with one Synthesis line: unit tests (tests/unit/test_*.c), end-to-end tests
# that run real processes under LD_PRELOAD on the simulated GPU (tests/e2e/*.c)
# and their shared helpers (tests/lib/*.c: running a command, a small JSON reader).
#
# Tests find build outputs through $STEPPROF_BUILD (default "build"), and run from
# the repository root.

TEST_BIN := $(BUILD)/tests/stepprof-tests
TEST_SRCS += $(wildcard tests/unit/*.c) $(wildcard tests/e2e/*.c) $(wildcard tests/lib/*.c)
TEST_OBJS = $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_SRCS))

$(BUILD)/obj/tests/unit/%.o $(BUILD)/obj/tests/e2e/%.o $(BUILD)/obj/tests/lib/%.o: MODULE_CPPFLAGS = -Itests/lib -Ipreload -Ianalyzer

$(TEST_BIN): $(TEST_OBJS) $(TEST_LIBS) $(TEST_DEPS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(TEST_OBJS) $(TEST_LIBS) -lcriterion -lm -lpthread -ldl

.PHONY: test-bin
test-bin: $(TEST_BIN)

# The unit tests alone (tests/unit/*.c and their helpers), a binary of their own:
# `make test-unit` runs it in seconds, without the programs of the end-to-end tests.
UNIT_BIN := $(BUILD)/tests/stepprof-unit
UNIT_OBJS = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/unit/*.c) $(wildcard tests/lib/*.c))

$(UNIT_BIN): $(UNIT_OBJS) $(TEST_LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(UNIT_OBJS) $(TEST_LIBS) -lcriterion -lm -lpthread -ldl

.PHONY: test-unit
test-unit: $(UNIT_BIN)
	$(Q)CUDA_HOME=$(CUDA_HOME) STEPPROF_BUILD=$(BUILD) $(UNIT_BIN) $(TEST_ARGS)
