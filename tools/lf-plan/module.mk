# lf-plan: plan and score an epoch from a dataset's index, without a server.
$(eval $(call program,lf-plan,tools/lf-plan/main.c tools/lf-plan/score.c))
