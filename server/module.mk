# lf-server (the per-node service) and lf-stat (its live metrics). lf-stat's
# line lives here because the top Makefile's MODULES list has no tools/lf-stat.
server_SRCS := server/main.c server/plan.c server/pipeline.c server/control.c server/util.c \
               server/planner.c server/cache.c server/read.c server/decode.c server/assemble.c \
               server/catchup.c server/stat.c server/endpoint.c server/observe.c server/startup.c \
               server/job.c server/trace.c server/eval.c
$(eval $(call program,lf-server,$(server_SRCS)))
$(eval $(call program,lf-stat,tools/lf-stat/main.c))
