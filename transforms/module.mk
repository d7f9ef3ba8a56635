transforms_SRCS := transforms/layout.c transforms/jpeg.c transforms/phuff.c transforms/plan.c \
                   transforms/tokens.c transforms/frames.c
$(eval $(call static_lib,lf_tf,$(transforms_SRCS)))
# The resize and token copy loops are written to be vectorized; -O2 (GCC 12)
# leaves them scalar.
$(B)/obj/transforms/jpeg.o $(B)/obj/transforms/tokens.o: override CFLAGS += -O3
