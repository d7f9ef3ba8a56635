# lf-shard: make, inspect and check datasets (see tools/README.md).
lf_shard_tool_SRCS := $(addprefix tools/lf-shard/,main.c cli.c synth.c synth_gen.c \
	synth_image.c create.c create_tokens.c create_files.c npy.c inspect.c verify.c cat.c)
$(eval $(call program,lf-shard,$(lf_shard_tool_SRCS)))
