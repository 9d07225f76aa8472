# libtrace/module.mk - the trace format's writer and reader, built once.
#
# libtrace/*.c go into build/lib/libsptrace.a, linked by libstepprof.so (the
# writer), the eBPF collector (the writer), the `stepprof` command (the reader)
# and the tests. Compiled as the preload needs them (position independent,
# hidden symbols, initial-exec TLS): whatever links them takes them as they are.

LIBTRACE_SRCS := $(wildcard libtrace/*.c)
LIBTRACE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIBTRACE_SRCS))
LIBTRACE := $(BUILD)/lib/libsptrace.a

$(BUILD)/obj/libtrace/%.o: MODULE_CFLAGS = -fvisibility=hidden -ftls-model=initial-exec

$(LIBTRACE): $(LIBTRACE_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(LIBTRACE)
