transforms_SRCS := transforms/layout.c
$(eval $(call static_lib,lf_tf,$(transforms_SRCS)))
