"""levelfeed.torch: where a DDP rank's step goes, measured with one line.

    ddp = torch.nn.parallel.DistributedDataParallel(model)
    levelfeed.torch.instrument(ddp, loader)
    for batch in loader:
        ...                                # forward, backward, optimizer step

Every step is then reported to the node's lf-server as the loader's
report_step would: the data wait the client measured in lf_next, the sync
wait (how long this rank waited for the others in DDP's all-reduce after its
own backward was done) and the compute (the rest of the step). lf-stat shows
them per rank, names the rank the others wait for, and the server sums them
up at the end of the run.

How the sync wait is measured: DDP hands each gradient bucket to its
communication hook as backward produces it, and waits for the futures the
hook returns before backward returns. instrument's hook runs the usual
all-reduce (torch's allreduce_hook, or the hook given) and notes when each
bucket was handed over and when its reduction completed. Buckets handed
over early reduce while backward still computes; the wait that stretches
the step is from the last bucket handed over (this rank's backward done)
to the last reduction completed (every rank's done): that is the sync wait.
A step's compute is its time from the loader yielding its batch to the
trainer asking for the next one, less that wait. Measured with gloo on the
CPU; with NCCL the reductions complete on the GPU stream, so the figures
are the host's view of them.
"""
import time

from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from . import loader as _loader

__all__ = ["instrument"]


class StepClock(_loader.StepClock):
    """The loader's step clock, told by the hook when buckets are handed
    over and reduced too (on the process group's threads, hence the lock):
    the step's sync wait is from the last handed over to the last reduced."""

    def __init__(self, loader):
        super().__init__(loader)
        self._handed = self._reduced = None

    def _begin(self):
        self._handed = self._reduced = None

    def _sync(self):
        if self._handed is None or self._reduced is None:
            return 0.0
        return max(0.0, self._reduced - self._handed)

    def handed_over(self):
        with self._lock:
            self._handed = time.perf_counter()

    def reduced(self):
        with self._lock:
            self._reduced = time.perf_counter()


def _timed(hook):
    """hook, with the clock told when each bucket goes in and comes back."""
    def timed_hook(state, bucket):
        clock, inner = state
        clock.handed_over()

        def reduced(fut):
            clock.reduced()
            return fut.value()
        return hook(inner, bucket).then(reduced)
    return timed_hook


def instrument(ddp_model, loader, hook=None, state=None):
    """Registers a communication hook on ddp_model (a DistributedDataParallel)
    that times the all-reduce, and has loader (a levelfeed.Loader) report each
    step's compute and sync wait with its data wait. hook and state: a
    communication hook of your own to run inside (default: torch's
    allreduce_hook over the default group). DDP takes one hook, registered
    before the first backward. Returns the clock."""
    clock = StepClock(loader)
    ddp_model.register_comm_hook((clock, state), _timed(hook or default_hooks.allreduce_hook))
    loader._clock = clock
    return clock
