# tests/workloads/cuda/module.mk - workloads that run on the simulated GPU.
#
#   build/tests/bin/trainer         the synthetic training loop (trainer.c + trainer_truth.c),
#                             linked to build/simgpu/libcudart.so.12
#   build/tests/bin/trainer-static  the same, linked with build/simgpu/libcudart_static.a
#                             (trainer.c compiled again with -DTRAINER_STATIC)
# Both link build/simgpu/libnccl.so.2 (--ranks: the all-reduce, called through the PLT).
#
# Both carry RUNPATH $ORIGIN/../../simgpu: they run from anywhere without
# LD_LIBRARY_PATH, and the static runtime's dlopen("libcuda.so.1") finds the
# simulated driver through the executable's RUNPATH; LD_LIBRARY_PATH still wins,
# which is how a real GPU's libraries are put first. -rdynamic exports
# trainer_kernel so that dladdr can name the kernel.
#
# The trainer is only part of `make` once the simulated GPU has its module.mk
# (until then there is nothing to link it against).

TRAINER_OBJS := $(BUILD)/obj/tests/workloads/cuda/trainer.o $(BUILD)/obj/tests/workloads/cuda/trainer_truth.o
TRAINER_STATIC_OBJS := $(BUILD)/obj/tests/workloads/cuda/trainer-static.o \
	$(BUILD)/obj/tests/workloads/cuda/trainer_truth.o
TRAINER_LDFLAGS := -rdynamic -Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN/../../simgpu'

$(BUILD)/obj/tests/workloads/cuda/%.o: MODULE_CPPFLAGS = -Itests/workloads/cuda -Itests/simgpu

$(BUILD)/obj/tests/workloads/cuda/trainer-static.o: tests/workloads/cuda/trainer.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CPPFLAGS_COMMON) -Itests/workloads/cuda -Itests/simgpu -DTRAINER_STATIC $(CFLAGS_COMMON) $(DEPFLAGS) -c $< -o $@

$(BUILD)/tests/bin/trainer: $(TRAINER_OBJS) $(BUILD)/simgpu/libcudart.so.12 $(BUILD)/simgpu/libnccl.so.2
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(TRAINER_OBJS) -L$(BUILD)/simgpu -l:libcudart.so.12 -l:libnccl.so.2 $(TRAINER_LDFLAGS) \
		-ldl -lpthread -lm

$(BUILD)/tests/bin/trainer-static: $(TRAINER_STATIC_OBJS) $(BUILD)/simgpu/libcudart_static.a $(BUILD)/simgpu/libnccl.so.2
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(TRAINER_STATIC_OBJS) $(BUILD)/simgpu/libcudart_static.a -L$(BUILD)/simgpu -l:libnccl.so.2 \
		$(TRAINER_LDFLAGS) -ldl -lpthread -lrt -lm

ifneq ($(wildcard tests/simgpu/module.mk),)
ALL_TARGETS += $(BUILD)/tests/bin/trainer $(BUILD)/tests/bin/trainer-static
endif


-include tests/workloads/cuda/doors.mk
-include tests/workloads/cuda/real.mk

# jobfds: a job that reuses the low descriptor numbers, with CUDA calls from a
# frame without unwind info (jobfds_noinfo.c).
JOBFDS_OBJS := $(BUILD)/obj/tests/workloads/cuda/jobfds.o $(BUILD)/obj/tests/workloads/cuda/jobfds_noinfo.o
$(BUILD)/obj/tests/workloads/cuda/jobfds_noinfo.o: MODULE_CFLAGS = -fno-asynchronous-unwind-tables -fno-unwind-tables

$(BUILD)/tests/bin/jobfds: $(JOBFDS_OBJS) $(BUILD)/simgpu/libcudart.so.12
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(JOBFDS_OBJS) -L$(BUILD)/simgpu -l:libcudart.so.12 $(TRAINER_LDFLAGS) -ldl -lpthread

ifneq ($(wildcard tests/simgpu/module.mk),)
ALL_TARGETS += $(BUILD)/tests/bin/jobfds
endif
