transforms_SRCS := transforms/layout.c transforms/jpeg.c transforms/plan.c \
                   transforms/tokens.c transforms/frames.c
$(eval $(call static_lib,lf_tf,$(transforms_SRCS)))
