# analyzer/module.mk - the `stepprof` command.
#
# analyzer/main.c and analyzer/cmd_*.c are the CLI (one file per verb); every
# other analyzer/*.c is the analysis library, archived into libspanalyzer.a for
# the command and the unit tests; the trace reader comes from libtrace/.

ANALYZER_CLI_SRCS := analyzer/main.c $(wildcard analyzer/cmd_*.c)
ANALYZER_LIB_SRCS := $(filter-out $(ANALYZER_CLI_SRCS),$(wildcard analyzer/*.c))
ANALYZER_CLI_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(ANALYZER_CLI_SRCS))
ANALYZER_LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(ANALYZER_LIB_SRCS))
ANALYZER_LDLIBS ?= -lm -lz

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

# The man pages and shell completions, generated from the built command's --help
# texts (scripts/cli-gen.sh; stepprof(1) also the STEPPROF_* variables of
# preload/config.def), so they never drift from it; `make install` installs
# them (the pages written again there, naming the installed documentation; these
# name the source tree's).
CLI_VERBS := $(shell sed -n 's/^SP_COMMAND.\([a-z_]*\),.*/\1/p' analyzer/commands.def)
CLI_MAN_PAGES := $(BUILD)/share/man/man1/stepprof.1 $(patsubst %,$(BUILD)/share/man/man1/stepprof-%.1,$(CLI_VERBS))
CLI_BASH_COMPLETION := $(BUILD)/share/bash-completion/completions/stepprof
CLI_ZSH_COMPLETION := $(BUILD)/share/zsh/site-functions/_stepprof

$(BUILD)/share/man/man1/stepprof.1: $(BUILD)/bin/stepprof scripts/cli-gen.sh scripts/config-table.sh preload/config.def
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)scripts/cli-gen.sh man $< '' $(CURDIR) > $@.tmp && mv $@.tmp $@

$(BUILD)/share/man/man1/stepprof-%.1: $(BUILD)/bin/stepprof scripts/cli-gen.sh
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)scripts/cli-gen.sh man $< $* $(CURDIR) > $@.tmp && mv $@.tmp $@

$(CLI_BASH_COMPLETION): $(BUILD)/bin/stepprof scripts/cli-gen.sh
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)scripts/cli-gen.sh bash $< > $@.tmp && mv $@.tmp $@

$(CLI_ZSH_COMPLETION): $(BUILD)/bin/stepprof scripts/cli-gen.sh
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)scripts/cli-gen.sh zsh $< > $@.tmp && mv $@.tmp $@

ALL_TARGETS += $(CLI_MAN_PAGES) $(CLI_BASH_COMPLETION) $(CLI_ZSH_COMPLETION)
