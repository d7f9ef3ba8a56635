# liblevelfeed: the client library (static and shared) and the example rank
# loop. The shared library carries the layout decoder from transforms/ and
# exports only levelfeed.h's functions (levelfeed.map).
client_SRCS := client/client.c client/gpu.c client/host.c client/lf_wire.c client/lf_ring.c \
               client/lf_ipc.c client/cudrv.c
client_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(client_SRCS))
# The static library carries the layout decoder too, as the shared one does,
# so `pkg-config --static levelfeed` links without liblf_tf.a.
$(eval $(call static_lib,levelfeed,$(client_SRCS) transforms/layout.c))

# The real file carries the soname (liblevelfeed.so.1); liblevelfeed.so is
# the link-time name pointing at it.
$(B)/lib/liblevelfeed.so.1: $(client_OBJS) $(B)/lib/liblf_tf.a client/levelfeed.map
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,liblevelfeed.so.1 \
	  -Wl,--version-script=client/levelfeed.map -Wl,--no-undefined \
	  -o $@ $(client_OBJS) $(B)/lib/liblf_tf.a -lzmq

$(B)/lib/liblevelfeed.so: $(B)/lib/liblevelfeed.so.1
	ln -sf liblevelfeed.so.1 $@

$(B)/lib/pkgconfig/levelfeed.pc: client/levelfeed.pc.in
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|g' $< > $@

PROGRAMS += $(B)/lib/liblevelfeed.so.1 $(B)/lib/liblevelfeed.so $(B)/lib/pkgconfig/levelfeed.pc

$(eval $(call program,lf-rank-loop,examples/rank_loop.c))

# The test of client/cudrv.h's declarations against the driver's own header,
# where the CUDA toolkit is there.
ifeq ($(CUDA),1)
$(B)/obj/tests/unit/client_cudrv.o: override CFLAGS += \
  -isystem $(patsubst %/bin/nvcc,%,$(NVCC))/include -DLF_HAVE_CUDA_H=1
endif

# A stand-in libcuda.so.1 (host memory as device memory) so the GPU path's
# logic is tested where there is no GPU: tests/e2e/client_gpu_fake.sh.
$(B)/fakecuda/libcuda.so.1: tests/fakecuda/libcuda.c $(CONFIG_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ $<
PROGRAMS += $(B)/fakecuda/libcuda.so.1
