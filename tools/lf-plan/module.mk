# lf-plan: plan and score an epoch from a dataset's index, without a server.
$(eval $(call program,lf-plan,tools/lf-plan/main.c tools/lf-plan/score.c tools/common/plan_cli.c \
  tools/common/synth_rng.c tools/common/open_limit.c tools/common/parse_num.c))
