# lf-launch: this node's lf-server around the user's trainer (one command
# per node under srun, mpirun or alone).
$(eval $(call program,lf-launch,tools/lf-launch/main.c tools/lf-launch/proc.c \
  tools/lf-launch/rundir.c tools/lf-launch/probe.c))
