# analyzer/module.mk - the `stepprof` command.
#
# analyzer/main.c and analyzer/cmd_*.c are the CLI (one file per verb); every
# other analyzer/*.c is the analysis library, archived into libspanalyzer.a for
# the command and the unit tests; the trace reader comes from libtrace/.

ANALYZER_CLI_SRCS := analyzer/main.c $(wildcard analyzer/cmd_*.c)
ANALYZER_LIB_SRCS := $(filter-out $(ANALYZER_CLI_SRCS),$(wildcard analyzer/*.c))
ANALYZER_CLI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(ANALYZER_CLI_SRCS))
ANALYZER_LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(ANALYZER_LIB_SRCS))
ANALYZER_LDLIBS ?= -lm

$(BUILD)/obj/analyzer/%.o: MODULE_CPPFLAGS = -Ianalyzer

$(BUILD)/lib/libspanalyzer.a: $(ANALYZER_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/stepprof: $(ANALYZER_CLI_OBJS) $(BUILD)/lib/libspanalyzer.a $(LIBTRACE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(ANALYZER_CLI_OBJS) $(BUILD)/lib/libspanalyzer.a $(LIBTRACE) $(ANALYZER_LDLIBS)

ALL_TARGETS += $(BUILD)/lib/libspanalyzer.a $(BUILD)/bin/stepprof
TEST_LIBS += $(BUILD)/lib/libspanalyzer.a $(LIBTRACE)
