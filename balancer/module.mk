# balancer/: the pure planning library (no I/O, no threads).
balancer_SRCS := balancer/cost.c balancer/order.c balancer/split.c \
                 balancer/plan.c balancer/layout.c balancer/state.c \
                 balancer/pieces.c balancer/segments.c
$(eval $(call static_lib,lf_plan,$(balancer_SRCS)))
