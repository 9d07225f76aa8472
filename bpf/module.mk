# bpf/module.mk - the eBPF input collector build/bin/stepprof-bpf (libbpf CO-RE).
#
#   1. can this machine build it? (BTF of the running kernel, clang, bpftool, libbpf headers)
#   2. build/gen/bpf/vmlinux.h from the kernel's BTF, the BPF object, its skeleton
#   3. the loader, linked with the trace-file writer of libtrace/
#
# When something is missing the BPF part is skipped with one message and the rest
# of the project builds; `stepprof run` then captures input with the libc wrappers.

BPF_GEN := $(BUILD)/gen/bpf
BPF_VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

# ---- 1. requirements (evaluated once per make run)
BPF_MISSING := $(strip \
	$(if $(wildcard $(BPF_VMLINUX_BTF)),,no kernel BTF at $(BPF_VMLINUX_BTF)) \
	$(if $(shell command -v $(CLANG) 2>/dev/null),,no $(CLANG)) \
	$(if $(shell command -v $(BPFTOOL) 2>/dev/null || command -v /usr/sbin/$(BPFTOOL) 2>/dev/null),,no $(BPFTOOL)) \
	$(if $(shell echo '\#include <bpf/libbpf.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo ok),,no libbpf headers (libbpf-dev)))

ifeq ($(BPF_MISSING),)

BPFTOOL_BIN := $(firstword $(shell command -v $(BPFTOOL) 2>/dev/null || command -v /usr/sbin/$(BPFTOOL) 2>/dev/null))
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Wno-unused-function \
	-I$(BPF_GEN) -Ibpf -Iinclude -idirafter /usr/include/$(shell uname -m)-linux-gnu

# The trace-file writer is libtrace's (per-(pid, tid) streams); the collector interns
# its strings itself (one thread, no need for the lock-free table of the preload).
BPF_LOADER_SRCS := $(filter-out %.bpf.c,$(wildcard bpf/*.c))
BPF_LOADER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(BPF_LOADER_SRCS))

# ---- 2. kernel side
$(BPF_GEN)/vmlinux.h: $(BPF_VMLINUX_BTF)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$(BPFTOOL_BIN) btf dump file $< format c > $@.tmp && mv $@.tmp $@

$(BPF_GEN)/iotrace.bpf.o: bpf/iotrace.bpf.c bpf/iotrace.h include/stepprof/api_sys.def $(BPF_GEN)/vmlinux.h
	@$(if $(Q),echo "  BPF     $<")
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BPF_GEN)/iotrace.skel.h: $(BPF_GEN)/iotrace.bpf.o
	@$(if $(Q),echo "  SKEL    $@")
	$(Q)$(BPFTOOL_BIN) gen skeleton $< name iotrace_bpf > $@.tmp && mv $@.tmp $@

# ---- 3. loader
$(BPF_LOADER_OBJS): $(BPF_GEN)/iotrace.skel.h
$(BUILD)/obj/bpf/%.o: MODULE_CPPFLAGS = -Ibpf -I$(BPF_GEN)
$(BUILD)/bin/stepprof-bpf: $(BPF_LOADER_OBJS) $(LIBTRACE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(BPF_LOADER_OBJS) $(LIBTRACE) -lbpf -lelf -lz -lpthread

ALL_TARGETS += $(BUILD)/bin/stepprof-bpf

else
$(info stepprof: skipping the eBPF collector (build/bin/stepprof-bpf): $(BPF_MISSING); input is captured by the libc wrappers)
endif
