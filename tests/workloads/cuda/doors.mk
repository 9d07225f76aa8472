# tests/workloads/cuda/doors.mk - the CUDA hooks' own test programs (owned with
# preload/hook_cuda.c), included by tests/workloads/cuda/module.mk.
#
#   build/tests/bin/door_plt      door_cuda.c linked to build/simgpu/libcudart.so.12
#   build/tests/bin/door_static   the same with build/simgpu/libcudart_static.a
#   build/tests/bin/door_dlsym    no CUDA linked: dlopen + dlsym by handle
#   build/tests/bin/door_ptds     door_plt built with CUDA_API_PER_THREAD_DEFAULT_STREAM
#   build/tests/bin/cuda_probe_nocuda   a program that never touches CUDA (fork, errno, /proc/self/maps)
#   build/tests/bin/cuda_edges    cuda_edges.c: one scenario per edge case (runtime and driver linked)
#   build/tests/bin/cuda_edges_ptds   the same built with CUDA_API_PER_THREAD_DEFAULT_STREAM
#   build/tests/bin/nccl_plt, nccl_dlsym   nccl_door.c: two NCCL ranks (below)
#
# RUNPATH $ORIGIN/../../simgpu as for the trainer; -rdynamic so dladdr names the kernels.

DOOR_LDFLAGS := -rdynamic -Wl,--enable-new-dtags -Wl,-rpath,'$$ORIGIN/../../simgpu'

$(BUILD)/obj/tests/workloads/cuda/door_dlsym.o: tests/workloads/cuda/door_cuda.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CPPFLAGS_COMMON) -DDOOR_DLSYM $(CFLAGS_COMMON) $(DEPFLAGS) -c $< -o $@

$(BUILD)/obj/tests/workloads/cuda/door_static.o: tests/workloads/cuda/door_cuda.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CPPFLAGS_COMMON) -DDOOR_STATIC $(CFLAGS_COMMON) $(DEPFLAGS) -c $< -o $@

$(BUILD)/obj/tests/workloads/cuda/door_ptds.o: tests/workloads/cuda/door_cuda.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CPPFLAGS_COMMON) -DCUDA_API_PER_THREAD_DEFAULT_STREAM $(CFLAGS_COMMON) $(DEPFLAGS) -c $< -o $@

$(BUILD)/tests/bin/door_ptds: $(BUILD)/obj/tests/workloads/cuda/door_ptds.o $(BUILD)/simgpu/libcudart.so.12
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -L$(BUILD)/simgpu -l:libcudart.so.12 $(DOOR_LDFLAGS) -ldl -lpthread

$(BUILD)/tests/bin/door_plt: $(BUILD)/obj/tests/workloads/cuda/door_cuda.o $(BUILD)/simgpu/libcudart.so.12
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -L$(BUILD)/simgpu -l:libcudart.so.12 $(DOOR_LDFLAGS) -ldl -lpthread

$(BUILD)/tests/bin/door_static: $(BUILD)/obj/tests/workloads/cuda/door_static.o $(BUILD)/simgpu/libcudart_static.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< $(BUILD)/simgpu/libcudart_static.a $(DOOR_LDFLAGS) -ldl -lpthread -lrt

$(BUILD)/tests/bin/door_dlsym: $(BUILD)/obj/tests/workloads/cuda/door_dlsym.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< $(DOOR_LDFLAGS) -ldl -lpthread

$(BUILD)/obj/tests/workloads/cuda/cuda_edges_ptds.o: tests/workloads/cuda/cuda_edges.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CPPFLAGS_COMMON) -DCUDA_API_PER_THREAD_DEFAULT_STREAM $(CFLAGS_COMMON) $(DEPFLAGS) -c $< -o $@

$(BUILD)/tests/bin/cuda_edges $(BUILD)/tests/bin/cuda_edges_ptds: $(BUILD)/tests/bin/%: $(BUILD)/obj/tests/workloads/cuda/%.o \
		$(BUILD)/simgpu/libcudart.so.12 $(BUILD)/simgpu/libcuda.so.1
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -L$(BUILD)/simgpu -l:libcudart.so.12 -l:libcuda.so.1 $(DOOR_LDFLAGS) -ldl -lpthread

$(BUILD)/tests/bin/cuda_probe_nocuda: $(BUILD)/obj/tests/workloads/cuda/cuda_probe_nocuda.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -ldl -lpthread

ALL_TARGETS += $(BUILD)/tests/bin/cuda_probe_nocuda
ifneq ($(wildcard tests/simgpu/module.mk),)
ALL_TARGETS += $(BUILD)/tests/bin/door_plt $(BUILD)/tests/bin/door_static $(BUILD)/tests/bin/door_dlsym $(BUILD)/tests/bin/door_ptds
ALL_TARGETS += $(BUILD)/tests/bin/cuda_edges $(BUILD)/tests/bin/cuda_edges_ptds
endif

# The NCCL hooks' programs (tests/e2e/test_nccl_capture.c), once the simulated
# NCCL (tests/simgpu/nccl*, build/simgpu/libnccl.so.2) exists:
#   build/tests/bin/nccl_plt      nccl_door.c linked to libnccl.so.2 and libcudart.so.12
#   build/tests/bin/nccl_dlsym    the same dlopening libnccl.so.2 (-DNCCL_DLSYM)

$(BUILD)/obj/tests/workloads/cuda/nccl_dlsym.o: tests/workloads/cuda/nccl_door.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CPPFLAGS_COMMON) -DNCCL_DLSYM $(CFLAGS_COMMON) $(DEPFLAGS) -c $< -o $@

$(BUILD)/tests/bin/nccl_plt: $(BUILD)/obj/tests/workloads/cuda/nccl_door.o $(BUILD)/simgpu/libnccl.so.2 \
		$(BUILD)/simgpu/libcudart.so.12
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -L$(BUILD)/simgpu -l:libnccl.so.2 -l:libcudart.so.12 $(DOOR_LDFLAGS) -ldl -lpthread

$(BUILD)/tests/bin/nccl_dlsym: $(BUILD)/obj/tests/workloads/cuda/nccl_dlsym.o $(BUILD)/simgpu/libnccl.so.2 \
		$(BUILD)/simgpu/libcudart.so.12
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -L$(BUILD)/simgpu -l:libcudart.so.12 $(DOOR_LDFLAGS) -ldl -lpthread

ifneq ($(wildcard tests/simgpu/nccl*),)
ALL_TARGETS += $(BUILD)/tests/bin/nccl_plt $(BUILD)/tests/bin/nccl_dlsym
endif
