# lf-train, the reference DDP trainer: needs MPI (MPI=1); with CUDA=1 it
# also carries the GPU model (model_cuda.cu, CUDA kernels + NCCL). The MPI and
# CUDA flags apply to the harness's own objects and link line only.
ifeq ($(MPI),1)
harness_SRCS := tools/harness/main.c tools/harness/train.c tools/harness/model_cpu.c \
                tools/harness/report.c tools/harness/calibrate.c
harness_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(harness_SRCS))
# -isystem: the strict warning set is for our code, not mpi.h.
harness_MPI_CFLAGS := $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile 2>/dev/null))
harness_MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
$(eval $(call program,lf-train,$(harness_SRCS)))
$(harness_OBJS): override CFLAGS += $(harness_MPI_CFLAGS)
# The model is a few hot loops; let them vectorize.
$(B)/obj/tools/harness/model_cpu.o: override CFLAGS += -O3
$(B)/bin/lf-train: LINK_LIBS += $(harness_MPI_LIBS)

ifeq ($(CUDA),1)
harness_CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
harness_CU_OBJ := $(B)/obj/tools/harness/model_cuda.o
$(harness_OBJS): override CFLAGS += -DLT_CUDA=1
$(harness_CU_OBJ): tools/harness/model_cuda.cu tools/harness/harness.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -std=c++17 -Xcompiler -fPIC,-Wall -Itools/harness -c -o $@ $<
$(B)/bin/lf-train: $(harness_CU_OBJ)
$(B)/bin/lf-train: LINK_LIBS += $(harness_CU_OBJ) -L$(harness_CUDA_HOME)/lib64 \
  -Wl,-rpath,$(harness_CUDA_HOME)/lib64 -lnccl -lcudart -lstdc++
else
$(harness_OBJS): override CFLAGS += -DLT_CUDA=0
endif
endif
