# tests/workloads/cuda/real.mk - programs for NVIDIA's real CUDA runtime
# (tests/e2e/test_real_cudart.c), included by tests/workloads/cuda/module.mk.
#
#   build/tests/bin/real_cudart         real_cudart.c linked to $(CUDA_HOME)/lib64/libcudart.so.13
#   build/tests/bin/real_cudart_static  the same with $(CUDA_HOME)/lib64/libcudart_static.a
#   build/tests/bin/real_spy.so         preloaded before libstepprof.so: logs what the
#                                 runtime receives from cuGetProcAddress
#
# Built only where the toolkit has libcudart.so.13; the tests skip with a reason
# otherwise. RUNPATH $(CUDA_HOME)/lib64 finds the real runtime; the driver comes
# from LD_LIBRARY_PATH (the simulated one in the tests, the real one on a GPU).

REAL_CUDART_DIR := $(CUDA_HOME)/lib64

ifneq ($(wildcard $(REAL_CUDART_DIR)/libcudart.so.13),)
$(BUILD)/tests/bin/real_cudart: $(BUILD)/obj/tests/workloads/cuda/real_cudart.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< -L$(REAL_CUDART_DIR) -l:libcudart.so.13 -Wl,--enable-new-dtags \
		-Wl,-rpath,$(REAL_CUDART_DIR) -ldl -lpthread

$(BUILD)/tests/bin/real_cudart_static: $(BUILD)/obj/tests/workloads/cuda/real_cudart.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $< $(REAL_CUDART_DIR)/libcudart_static.a -ldl -lpthread -lrt

$(BUILD)/tests/bin/real_spy.so: $(BUILD)/obj/tests/workloads/cuda/real_spy.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $< -ldl

ALL_TARGETS += $(BUILD)/tests/bin/real_cudart $(BUILD)/tests/bin/real_cudart_static $(BUILD)/tests/bin/real_spy.so
endif
