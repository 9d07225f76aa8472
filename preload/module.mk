# preload/module.mk - libstepprof.so.
#
# preload/hook_*.c hold interposed symbols or constructors: they go into the
# shared library only. Every other preload/*.c is "core" (recorder, intern table,
# config, interval maps...): also archived into libsppreload-core.a so that the
# unit tests can link it without interposing on the test binary itself. The
# trace-file writer comes from libtrace/ (libsptrace.a).

PRELOAD_HOOK_SRCS := $(wildcard preload/hook_*.c)
PRELOAD_CORE_SRCS := $(filter-out $(PRELOAD_HOOK_SRCS),$(wildcard preload/*.c))
PRELOAD_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(PRELOAD_HOOK_SRCS) $(PRELOAD_CORE_SRCS))
PRELOAD_CORE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(PRELOAD_CORE_SRCS))
PRELOAD_LIBS ?= -ldl -lpthread -static-libgcc
PRELOAD_MAP := $(BUILD)/gen/libstepprof.map

$(BUILD)/obj/preload/%.o: MODULE_CFLAGS = -fvisibility=hidden -ftls-model=initial-exec
$(BUILD)/obj/preload/%.o: MODULE_CPPFLAGS = -Ipreload

$(PRELOAD_MAP): preload/libstepprof.map.in $(wildcard include/stepprof/*.def)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -E -P -x c -Iinclude $< -o $@

$(BUILD)/lib/libstepprof.so: $(PRELOAD_OBJS) $(LIBTRACE) $(PRELOAD_MAP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $(PRELOAD_OBJS) $(LIBTRACE) -Wl,--version-script=$(PRELOAD_MAP) -Wl,-z,now $(PRELOAD_LIBS)

$(BUILD)/lib/libsppreload-core.a: $(PRELOAD_CORE_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

ALL_TARGETS += $(BUILD)/lib/libstepprof.so $(BUILD)/lib/libsppreload-core.a
TEST_LIBS += $(BUILD)/lib/libsppreload-core.a
