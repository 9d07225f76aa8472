# tests/workloads/module.mk - small programs the end-to-end tests and benchmarks run.
#
# Each tests/workloads/<name>.c that needs no CUDA builds build/tests/bin/<name>
# (linked with pthread and dl only; they reach stepprof_* through dlsym or weak
# symbols so they also run without the preload). Programs that use the simulated
# GPU live in tests/workloads/cuda/, with their own module.mk.

WORKLOAD_SRCS := $(wildcard tests/workloads/*.c)
WORKLOAD_BINS := $(patsubst tests/workloads/%.c,$(BUILD)/tests/bin/%,$(WORKLOAD_SRCS))

$(BUILD)/tests/bin/%: $(BUILD)/obj/tests/workloads/%.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -lpthread -ldl -lm

# A shared library a workload opens itself (tests/workloads/so/, not a program).
$(BUILD)/tests/lib/libdllocal.so: $(BUILD)/obj/tests/workloads/so/dllocal.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $< -ldl

ALL_TARGETS += $(WORKLOAD_BINS) $(BUILD)/tests/lib/libdllocal.so
-include tests/workloads/cuda/module.mk

# promserve: the Prometheus exposition and HTTP server of `stepprof watch`
# (analyzer/watch_prom.c, watch_httpd.c) on a sample snapshot, for
# tests/e2e/test_watch_prom.c; linked with the analyzer's library.
$(BUILD)/obj/tests/workloads/promserve.o: MODULE_CPPFLAGS = -Ianalyzer
$(BUILD)/tests/bin/promserve: $(BUILD)/obj/tests/workloads/promserve.o $(BUILD)/lib/libspanalyzer.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< $(BUILD)/lib/libspanalyzer.a -lm
