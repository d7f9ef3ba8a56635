# common/: what the programs share (command-line parsing, the open-file
# limit, synthetic data's random streams, the --version line), below server/
# and tools/. An internal library: the programs link it, make install leaves
# it out.
common_SRCS := common/plan_cli.c common/cost_file.c common/parse_num.c common/image_cli.c \
               common/open_limit.c common/synth_rng.c common/index_only.c common/version.c \
               common/timeline.c common/batch_names.c common/mix_cli.c
$(eval $(call static_lib,lf_common,$(common_SRCS)))
