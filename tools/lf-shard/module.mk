# lf-shard: make, inspect and check datasets (see tools/README.md).
lf_shard_tool_SRCS := $(addprefix tools/lf-shard/,main.c cli.c synth.c synth_gen.c \
	synth_image.c create.c create_tokens.c input.c json_line.c create_files.c npy.c \
	inspect.c verify.c cat.c digest.c token_files.c split.c)
$(eval $(call program,lf-shard,$(lf_shard_tool_SRCS)))
# input.c reads gzip-compressed inputs.
$(B)/bin/lf-shard: LDLIBS_EXT += -lz
# The JSON line parser is in no library: its fuzz target links it itself.
json_line_fuzz := $(B)/fuzz/json_line-replay $(B)/fuzz/json_line-libfuzzer
$(json_line_fuzz): $(B)/obj/tools/lf-shard/json_line.o
$(json_line_fuzz): LINK_LIBS += $(B)/obj/tools/lf-shard/json_line.o
