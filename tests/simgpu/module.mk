# tests/simgpu/module.mk - the simulated GPU: a CPU-only CUDA driver and runtime.
#
#   build/simgpu/libcuda.so.1         driver (drv_*.c), every cu* name of the CUDA 13 headers
#   build/simgpu/libcudart.so.12      runtime (rt_*.c); reaches the driver only through
#                                     dlopen + cuGetProcAddress_v2, like NVIDIA's
#   build/simgpu/libcudart_static.a   the same runtime objects, for static linking
#   build/simgpu/libnccl.so.2         NCCL (nccl_*.c): nccl.h's collectives, point-to-point and
#                                     groups across processes; reaches the driver like the runtime
#   build/simgpu/libcuda.so, libcudart.so, libnccl.so   symlinks for -lcuda / -lcudart / -lnccl
#
# Both are compiled with __CUDA_API_VERSION_INTERNAL, as NVIDIA's own libraries are:
# cuda.h then declares every versioned and _ptds/_ptsz name under its real name.
# -Bsymbolic: addresses the driver hands out through cuGetProcAddress, and calls
# inside each library, bind to the library itself and never to an interposer.

SIMGPU_DIR := $(BUILD)/simgpu
SIMGPU_GEN := $(BUILD)/gen/simgpu
SIMGPU_DRV_SRCS := $(wildcard tests/simgpu/drv_*.c)
SIMGPU_RT_SRCS := $(wildcard tests/simgpu/rt_*.c)
SIMGPU_DRV_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(SIMGPU_DRV_SRCS))
SIMGPU_RT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(SIMGPU_RT_SRCS))
SIMGPU_NCCL_SRCS := $(wildcard tests/simgpu/nccl_*.c)
SIMGPU_NCCL_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(SIMGPU_NCCL_SRCS))
SIMGPU_CUDA_INC := $(CUDA_HOME)/include

$(SIMGPU_NCCL_OBJS): MODULE_CPPFLAGS = -Itests/simgpu

$(SIMGPU_DRV_OBJS) $(SIMGPU_RT_OBJS): MODULE_CPPFLAGS = -D__CUDA_API_VERSION_INTERNAL -Itests/simgpu -I$(SIMGPU_GEN)
$(SIMGPU_DRV_OBJS) $(SIMGPU_RT_OBJS): $(SIMGPU_GEN)/procmap.def $(SIMGPU_GEN)/entries.def

$(SIMGPU_GEN)/procmap.def: tests/simgpu/gen_procmap.sh
	@mkdir -p $(dir $@)
	$(Q)sh tests/simgpu/gen_procmap.sh $(SIMGPU_CUDA_INC) > $@.tmp && mv $@.tmp $@

$(SIMGPU_GEN)/entries.def: tests/simgpu/gen_entries.sh tests/simgpu/cudart_entry_points.txt
	@mkdir -p $(dir $@)
	$(Q)sh tests/simgpu/gen_entries.sh tests/simgpu/cudart_entry_points.txt > $@.tmp && mv $@.tmp $@

$(SIMGPU_DIR)/libcuda.so.1: $(SIMGPU_DRV_OBJS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $^ -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -Wl,-z,now -lpthread -ldl

$(SIMGPU_DIR)/libcudart.so.12: $(SIMGPU_RT_OBJS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $^ -Wl,-soname,libcudart.so.12 -Wl,-Bsymbolic -Wl,-z,now \
		-Wl,-rpath,'$$ORIGIN' -Wl,--enable-new-dtags -lpthread -ldl

$(SIMGPU_DIR)/libcudart_static.a: $(SIMGPU_RT_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# RUNPATH $$ORIGIN: its dlopen("libcuda.so.1") finds the simulated driver beside it.
$(SIMGPU_DIR)/libnccl.so.2: $(SIMGPU_NCCL_OBJS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $^ -Wl,-soname,libnccl.so.2 -Wl,-Bsymbolic -Wl,-z,now \
		-Wl,-rpath,'$$ORIGIN' -Wl,--enable-new-dtags -lpthread -ldl -lrt

$(SIMGPU_DIR)/libnccl.so: $(SIMGPU_DIR)/libnccl.so.2
	$(Q)ln -sf libnccl.so.2 $@

$(SIMGPU_DIR)/libcuda.so: $(SIMGPU_DIR)/libcuda.so.1
	$(Q)ln -sf libcuda.so.1 $@

$(SIMGPU_DIR)/libcudart.so: $(SIMGPU_DIR)/libcudart.so.12
	$(Q)ln -sf libcudart.so.12 $@

SIMGPU_TARGETS := $(SIMGPU_DIR)/libcuda.so.1 $(SIMGPU_DIR)/libcuda.so
ifneq ($(SIMGPU_RT_SRCS),)
SIMGPU_TARGETS += $(SIMGPU_DIR)/libcudart.so.12 $(SIMGPU_DIR)/libcudart.so $(SIMGPU_DIR)/libcudart_static.a
endif
ifneq ($(SIMGPU_NCCL_SRCS),)
SIMGPU_TARGETS += $(SIMGPU_DIR)/libnccl.so.2 $(SIMGPU_DIR)/libnccl.so
endif
ALL_TARGETS += $(SIMGPU_TARGETS)
# The tests dlopen the simulator at run time; building the test binary builds it too.
TEST_DEPS += $(SIMGPU_TARGETS)

.PHONY: simgpu
simgpu: $(SIMGPU_TARGETS)
