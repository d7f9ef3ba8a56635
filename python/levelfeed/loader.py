"""levelfeed.Loader: the batches of one training rank, as dicts of tensors
that are views of the client's shared-memory ring (no copy).

Lifetime: a batch's tensors are views of a ring slot that this rank holds
for as long as anything refers to them (the Batch or any of its tensors):
the slot goes back to the server when the last reference goes (or at once
on batch.close() or loader.close(), after which the views are stale). The
slot is this rank's own meanwhile, and writable: in-place edits are fine.
The ring has a bounded number of slots (lf-server --slots): a trainer that
keeps more batches than that gets a LevelfeedError saying so at the next
batch. Loader(copy=True) hands out owned copies instead, kept as long as
one likes, the slot given back at once.

Iteration goes as with a DataLoader: a `for` over the loader yields one
epoch's batches, the next `for` the next epoch's, and a `for` after the
last epoch raises a LevelfeedError saying the plan is over. len(loader) is
the batch count of the epoch that the current `for` (or else the next
one) yields: every rank gets the same number, as the server planned it.

Device tensors: with device="cuda[:N]" the client copies each batch into a
ring of device slots before it is asked for (lf_client_use_device: the host
ring is registered as pinned memory, one DMA per batch on the client's own
stream), and the tensors are views of those device slots
(__cuda_array_interface__), the copy already complete. The same lifetime
rule holds: a slot is refilled after the next batch is taken, behind the
work queued so far on torch's current stream for that device. Evaluation
passes (eval_batches) come as device tensors too, in 2 device slots of
their own.

Trace and chart: Loader(trace="run.json", chart="run.svg") on every rank
has the node's lf-server write the run as lf-train draws it, a Chrome trace
(Perfetto: a track per rank with each step's data wait, compute and sync
wait, and the server's read, decode, assemble and ring wait tracks) and an
SVG chart, once the last epoch is iterated (or at close()); the loader then
reports each step itself (as report_step would: its compute is the time
from the batch yielded to the next one asked for) unless
levelfeed.torch.instrument or the trainer's own report_step does.
"""
import collections
import ctypes
import errno
import gc
import os
import sys
import threading
import time
import weakref

import numpy as np

from . import _capi
from ._capi import LevelfeedError, check, lib

try:
    import torch
except ImportError:     # numpy arrays only
    torch = None

# levelfeed.h dtype codes -> numpy dtype. bf16 (10) has no numpy type: its
# bits travel as uint16 and become torch.bfloat16 by a view.
_NP = {1: np.uint8, 2: np.int8, 3: np.uint16, 4: np.int16, 5: np.uint32,
       6: np.int32, 7: np.uint64, 8: np.int64, 9: np.float16, 10: np.uint16,
       11: np.float32, 12: np.float64}
_BF16 = 10

_STATE_KEY = "levelfeed"
_STATE_VERSION = 2
# The dict versions load_state_dict takes. Its "state" is lf_state_save's
# bytes (client/host.c): version 2 carries the position,
# the plan id, the plan id without the mixture's weights and the weights, so
# that a state saved at an epoch boundary resumes under other --weight
# values; a version 1 dict holds the 40 bytes of before, which resume only
# under the unchanged plan.
_STATE_VERSIONS = (1, 2)


def _cuda_index(device):
    """None for host tensors, else the CUDA device index ("cuda": torch's
    current device)."""
    if device is None or str(device) == "cpu":
        return None
    if torch is None:
        raise ValueError("levelfeed: device=%r needs torch" % (device,))
    name = str(device)
    if name == "cuda":
        index = None
    elif name.startswith("cuda:") and name[5:].isdigit():
        index = int(name[5:])
    else:
        raise ValueError("levelfeed: device=%r: want None, 'cpu', 'cuda' or 'cuda:N'" % (device,))
    # Checked before connecting: a failure after lf_client_open would end
    # this rank's session on the server, and a host Loader could not follow.
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise LevelfeedError(-errno.ENODEV, "levelfeed: device=%r: torch sees no CUDA device"
                             % (device,))
    if index is None:
        return torch.cuda.current_device()
    if index >= count:
        raise LevelfeedError(-errno.ENODEV, "levelfeed: device=%r: torch sees %d CUDA "
                             "device(s)" % (device, count))
    return index


def _dtype_and_shape(t):
    """The tensor's numpy dtype and shape, checked against its byte size."""
    if t.dtype not in _NP:
        raise LevelfeedError(_capi.E_PROTOCOL, "tensor %r: unknown dtype %d" % (t.name, t.dtype))
    dt = np.dtype(_NP[t.dtype])
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    if int(np.prod(shape, dtype=np.uint64)) * dt.itemsize != t.size:
        raise LevelfeedError(_capi.E_PROTOCOL, "tensor %r: shape %s does not fill its %d bytes"
                             % (t.name, shape, t.size))
    return dt, shape


def _host_array(t, owner):
    """A numpy view of the tensor's bytes in the ring. The view's base holds
    owner (the batch's _Slot, which holds the Loader), so the slot stays
    this rank's and the ring mapped while a view lives."""
    dt, shape = _dtype_and_shape(t)
    if t.size == 0:
        return np.empty(shape, dt)
    raw = (ctypes.c_char * t.size).from_address(t.host)
    raw.owner = owner
    return np.frombuffer(raw, dtype=dt).reshape(shape)


def _host_view(t, as_torch, owner):
    """The tensor as numpy or torch. torch 1.13 lacks u16/u32/u64:
    u64 (sample ids) is viewed as int64 (same bits; exact below 2**63), u16
    and u32 are widened to int32/int64, which copies — the layouts give
    tokens as i32 or i64, so the token tensor itself is never copied."""
    a = _host_array(t, owner)
    if not as_torch:
        return a
    if t.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if a.dtype == np.uint64:
        return torch.from_numpy(a.view(np.int64))
    if a.dtype == np.uint16:
        return torch.from_numpy(a.astype(np.int32))
    if a.dtype == np.uint32:
        return torch.from_numpy(a.astype(np.int64))
    return torch.from_numpy(a)


class _DeviceArray:
    """A device tensor's bytes described for torch.as_tensor (CUDA array
    interface v2: pointer, shape, element type; the copy is complete). The
    tensor torch makes of it holds it, and so owner (the Loader)."""

    def __init__(self, t, typestr, shape, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (t.device, False), "version": 2}


def _device_view(t, device, owner):
    """The device tensor as torch, a view of its device slot. Types torch
    1.13 lacks go as in _host_view: u64 is viewed as int64 and bf16 as
    bfloat16 (same bits), u16/u32 are widened on the device (a copy)."""
    dt, shape = _dtype_and_shape(t)
    same_bits = {np.dtype(np.uint16): "<i2", np.dtype(np.uint32): "<i4",
                 np.dtype(np.uint64): "<i8"}
    typestr = "<i2" if t.dtype == _BF16 else same_bits.get(dt, dt.str)
    if t.size == 0:
        a = torch.from_numpy(np.empty(shape, np.dtype(typestr))).to(device)
    else:
        a = torch.as_tensor(_DeviceArray(t, typestr, shape, owner), device=device)
    if t.dtype == _BF16:
        return a.view(torch.bfloat16)
    if dt == np.uint16:
        return a.to(torch.int32) & 0xFFFF
    if dt == np.uint32:
        return a.to(torch.int64) & 0xFFFFFFFF
    return a


class _Slot:
    """A ring slot this process holds: the owner every view of the batch's
    tensors keeps alive, so the slot goes back to the server (close) when
    the last of them goes, or before on an explicit close."""

    def __init__(self, loader, b):
        self.loader, self.b = loader, b

    def close(self):
        if self.b is not None:
            b, self.b = self.b, None
            self.loader._give_back(b)

    def __del__(self):
        try:
            self.close()
        except Exception:   # noqa: BLE001  the server gone, or the interpreter ending:
            pass            # nothing to give back to, and no one to tell


def _is_int64(v):
    """A tensor or array of int64 elements."""
    return str(v.dtype) in ("int64", "torch.int64")


def _rebuild_batch(tensors, attrs):
    out = Batch(tensors)
    out.__dict__.update(attrs)
    return out


class Batch(dict):
    """One batch: a dict of tensors by name ("tokens", "lengths",
    "sample_ids", ...) with the batch's place in the plan as attributes;
    step_tokens is the step's token count over every rank, for a loss
    normalised by the global number of tokens. Its ring slot is held while
    the batch or any of its tensors is referred to; close() (or `with
    batch:`) gives it back at once."""
    epoch = step = seq = nsamples = step_tokens = 0
    wait_s = 0.0
    _slot = None

    def close(self):
        """Gives the batch's ring slot back now: its tensors go stale."""
        if self._slot is not None:
            self._slot.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce__(self):
        # The tensors pickle as their values; the slot stays behind.
        attrs = {k: v for k, v in self.__dict__.items() if k != "_slot"}
        return _rebuild_batch, (dict(self), attrs)

    def micro_batches(self):
        """The batch as the plan's micro-batches (lf-server --micro-batches):
        a list of dicts of views, tokens [rows, width] (each padded to its
        own longest), lengths and sample_ids [rows] (and sample_offsets,
        where the server cut longer samples into pieces, and source, where
        it serves a mixture), to run one after
        another with gradients accumulated. The dataset's fine-tuning
        fields come along: a per-token one (loss_mask, ...) [rows, width]
        as the tokens, a per-sample one (prompt_len, ...) [rows]. A batch
        served without --micro-batches is one micro-batch: [self]."""
        micro = self.get("micro")
        if micro is None:
            return [self]
        own = ("tokens", "micro", "lengths", "sample_ids", "sample_offsets", "source")
        # The server's fields: per-sample ones are int64 [n], per-token ones
        # u8 or int32 shaped as the tokens.
        per_sample = [k for k, v in self.items() if k not in own and _is_int64(v)]
        per_row = [k for k in own[2:] if k in self] + per_sample
        per_token = ["tokens"] + [k for k in self if k not in own and k not in per_sample]
        out, at, first = [], 0, 0
        for rows, width in micro.tolist():
            mb = {k: self[k][at:at + rows * width].reshape(rows, width) for k in per_token}
            mb.update({k: self[k][first:first + rows] for k in per_row})
            out.append(mb)
            at += rows * width
            first += rows
        return out


class StepClock:
    """One rank's step times: told by the loader where each step starts and
    ends, it reports each step: its compute, the time from the batch
    yielded to the next one asked for, less its sync wait, which this clock
    does not measure (None; levelfeed.torch's does, from DDP's all-reduce)."""

    def __init__(self, loader):
        self._loader = loader
        self._lock = threading.Lock()
        self._start = None

    def _begin(self):
        """A step begins (under the lock)."""

    def _sync(self):
        """The step's sync wait in seconds, or None (under the lock)."""
        return None

    def step_start(self):
        with self._lock:
            self._start = time.perf_counter()
            self._begin()

    def step_end(self):
        """Reports the step that ends now (nothing before the first one)."""
        now = time.perf_counter()
        with self._lock:
            start, self._start = self._start, None
            sync = self._sync()
        if start is not None:
            self._loader._report(max(0.0, now - start - (sync or 0.0)), sync)


_INT_MAX = 2**31 - 1  # the C int the library takes
COUNT_NOTE_S = 10.0   # len() waiting for a count says so this often
# lf_client_epoch_batches' answers that are no failure of the stream
_COUNT_ANSWERS = (_capi.E_END, -errno.ERANGE, -errno.ENODATA, -errno.EAGAIN)


def _int_in(name, v, lo, hi):
    """v as an int in [lo, hi]; ctypes would wrap a larger one silently
    (rank=2**32+1 joined as rank 1)."""
    i = int(v)
    if not lo <= i <= hi:
        raise ValueError("levelfeed: %s=%r: want %d..%d" % (name, v, lo, hi))
    return i


def _timeout_ms(timeout):
    """Seconds (None: forever) as the library's milliseconds (-1: forever);
    beyond what an int holds (24.8 days) is forever too, not a wrapped 1 ms."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise ValueError("levelfeed: timeout=%r: want seconds >= 0 or None" % (timeout,))
    ms = int(timeout * 1000)
    return -1 if ms > _INT_MAX else ms


def _check_same_plan(plan_id, world_size):
    """Every rank's server must plan the same global sequence (each node's
    lf-server plans it alone, from its own flags and copy of the data): with
    torch.distributed initialised, the ranks all-gather their servers' plan
    fingerprints and node names, and every rank raises, naming the first
    rank that differs from rank 0, before any batch is taken. Collective:
    every rank of the default group constructs its Loader. A Loader of
    another world size is not the job's (one rank reading a dataset through
    a private server of world 1, as examples/torch_ddp.py does): its peers
    construct none, so the collective would wait for them forever."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    if world_size > 0 and world_size != dist.get_world_size():
        return
    import socket
    seen = [None] * dist.get_world_size()
    dist.all_gather_object(seen, (int(plan_id), socket.gethostname()))
    for r, (fp, node) in enumerate(seen):
        if fp != seen[0][0]:
            raise LevelfeedError(
                -errno.EINVAL, "levelfeed: the ranks' servers plan different sequences: rank %d "
                "(node %s) has plan fingerprint %016x, rank 0 (node %s) %016x; every node's "
                "lf-server must get the same datasets, --weight values and plan flags "
                "(docs/MULTINODE.md)"
                % (r, node, fp, seen[0][1], seen[0][0]))


class Loader:
    """Iterates this rank's batches from the node's lf-server: each `for`
    over it one epoch (batch.epoch says which), as a DataLoader does.

    endpoint    the server's control socket (None: $LEVELFEED_ENDPOINT, else the
                default endpoint of this job, named for $LEVELFEED_JOB,
                $SLURM_JOB_ID or $TORCHELASTIC_RUN_ID as the server names it)
    rank        global rank (None: RANK, else OMPI/PMI/SLURM variables)
    world_size  ranks in the job (None: WORLD_SIZE etc.; the server checks it)
    device      None or "cpu": host tensors (views of the ring); "cuda" or
                "cuda:N": device tensors (views of the client's device ring;
                "cuda" is torch's current device, as usual)
    device_depth  device slots (batches copied ahead of the trainer)
    timeout     seconds to wait for the server and for each batch (None: forever;
                a server still planning its start-up answers, so it restarts
                the wait)
    plan_id     (attribute) the server's plan fingerprint; with
                torch.distributed initialised, construction all-gathers it and
                raises when the ranks' servers differ (_check_same_plan)
    tensors     "torch" (default when torch imports) or "numpy"
    copy        True: each batch's tensors are owned copies (kept as long
                as one likes; the slot goes back at once)
    trace       a path: the run's Chrome trace (Perfetto), written by the
                node's lf-server once every rank it serves has finished its
                last epoch (or closed its loader); pass the same on every rank
    chart       a path: the run's SVG chart, likewise
    """

    def __init__(self, endpoint=None, rank=None, world_size=None, device=None,
                 timeout=60.0, tensors=None, device_depth=2, copy=False, trace=None,
                 chart=None):
        self._client = None
        self._trace_paths = None    # (trace, chart) for lf_client_trace, until written
        self._cuda = _cuda_index(device)
        if self._cuda is not None and tensors == "numpy":
            raise ValueError("levelfeed: device tensors are torch tensors, not numpy")
        if tensors is None:
            tensors = "torch" if torch is not None else "numpy"
        if tensors not in ("torch", "numpy") or (tensors == "torch" and torch is None):
            raise ValueError("levelfeed: tensors=%r: want 'numpy'%s"
                             % (tensors, "" if torch is None else " or 'torch'"))
        self._as_torch = tensors == "torch"
        self._copy = bool(copy)
        self._timeout_ms = _timeout_ms(timeout)
        device_depth = _int_in("device_depth", device_depth, 1, _INT_MAX)
        self._yielded = 0
        self._finished = False
        self._ahead = None          # the next epoch's first batch, taken to end this one
        self._state_ahead = None    # the position before it (what state_dict saves)
        self._pass = None           # the epoch the current `for` yields, once known
        self._want_epoch = None     # set_epoch's, checked against the next pass
        self._last = None           # the slot of the last batch yielded (release())
        self._thread = threading.get_ident()    # the one that takes batches
        self._later = collections.deque()       # slots let go of on other threads
        self._client = self._open(endpoint, rank, world_size)
        # the server's plan fingerprint (lf_client_plan_id): equal on every
        # rank exactly when all the job's servers plan the same sequence
        self.plan_id = lib.lf_client_plan_id(self._client)
        try:
            _check_same_plan(self.plan_id, self._world_size)
        except BaseException:
            self.close()
            raise
        if self._cuda is not None:
            self._use_device(device_depth)
        if trace is not None or chart is not None:
            # set once constructed: a failed construction closes without asking
            self._trace_paths = (trace, chart)
            self._clock = self._own_clock = StepClock(self)

    def _open(self, endpoint, rank, world_size):
        o = _capi.Options()
        lib.lf_client_options_default(ctypes.byref(o))
        if endpoint is not None:
            o.endpoint = str(endpoint).encode()
        if rank is not None:
            o.rank = _int_in("rank", rank, 0, _INT_MAX)
        if world_size is not None:
            o.world_size = _int_in("world_size", world_size, 1, _INT_MAX)
        # The C library reads 0 as its default (60 s): None (-1) waits as
        # long as an int allows (24 days), 0 the least it can (1 ms).
        o.connect_timeout_ms = _INT_MAX if self._timeout_ms < 0 else max(1, self._timeout_ms)
        why = ctypes.create_string_buffer(512)
        o.error = ctypes.cast(why, ctypes.c_char_p)
        o.error_size = len(why)
        self.rank, self._world_size = o.rank, o.world_size     # -1: from the environment
        if o.rank < 0:
            raise LevelfeedError(-errno.EINVAL, "levelfeed: no rank: pass rank= or set RANK")
        c = ctypes.c_void_p()
        rc = lib.lf_client_open(ctypes.byref(o), ctypes.byref(c))
        if rc < 0:
            raise _capi.error(rc, detail=why.value.decode("utf-8", "replace") or None)
        return c

    def _use_device(self, depth):
        rc = lib.lf_client_use_device(self._client, self._cuda, depth)
        if rc < 0:
            why = lib.lf_client_error(self._client).decode("utf-8", "replace")
            self.close()
            raise _capi.error(rc, detail=why)
        self._device = torch.device("cuda", self._cuda)

    def _live(self):
        if self._client is None:
            raise LevelfeedError(_capi.E_ORDER, "levelfeed: the loader is closed")
        return self._client

    # -- epochs: one `for`, one epoch ------------------------------------

    @property
    def finished(self):
        """True once every epoch of the plan has been yielded."""
        return self._finished and self._ahead is None

    def __iter__(self):
        self._pass = None
        return self

    def __next__(self):
        if self.finished:
            if self._pass is None:
                raise LevelfeedError(_capi.E_END, "levelfeed: the plan is over: every epoch "
                                     "the server planned has been served (lf-server "
                                     "--epochs sets how many)")
            raise StopIteration
        out = self._ahead if self._ahead is not None else self._take()
        self._ahead = None
        if out is None:
            raise StopIteration         # the last epoch ended
        if self._pass is None:
            self._check_epoch(out)
            self._pass = out.epoch
        elif out.epoch != self._pass:   # the next epoch's first batch
            self._ahead = out
            raise StopIteration
        self._yielded += 1
        self._last = None if out._slot is None else weakref.ref(out._slot)
        if self._clock is not None:
            self._clock.step_start()
        return out

    def __len__(self):
        """This rank's batches in the epoch the current `for` yields (between
        `for`s: the one the next yields), the same on every rank: the
        server's plan, told at connection. A `for` resumed mid-epoch
        (load_state_dict) yields the rest of it. A server counts the
        first epoch of a dataset larger than what it measures at start-up
        (2^20 samples) while serving it: len() then waits for that count,
        saying so on stderr every COUNT_NOTE_S seconds. Raises TypeError,
        as len() of a DataLoader over an IterableDataset does, where the
        count is not known: after the last epoch, on a closed loader, and
        past the first 8192 epochs of a server's run."""
        if self._client is None:
            raise TypeError("levelfeed: len() of a closed Loader")
        n = self._epoch_batches()
        if n == -errno.EAGAIN and self._ahead is None and not self._finished:
            # The server plans each epoch after the first while serving the
            # one before, and tells its count before its first batch: that
            # batch, taken now, is the next `for`'s first.
            self._ahead = self._take()
            n = self._epoch_batches()
        if n == -errno.EAGAIN:
            n = self._wait_count()
        if n >= 0:
            return n
        if n == _capi.E_END:
            raise TypeError("levelfeed: len(): the plan is over, every epoch the server "
                            "planned has been served (lf-server --epochs sets how many)")
        raise TypeError("levelfeed: len(): the server did not tell this epoch's batch count "
                        "(%s): it tells the first 8192 epochs of a run; run longer schedules "
                        "as consecutive servers started at --epoch E" % _capi.strerror(n))

    def _epoch(self):
        """The epoch len() is about."""
        if self._ahead is not None:
            return self._ahead.epoch
        if self._pass is not None and not self._finished:
            return self._pass
        return _capi.EPOCH_NEXT

    def _epoch_batches(self):
        return lib.lf_client_epoch_batches(self._client, self._epoch())

    def _wait_count(self):
        """The count of len()'s epoch, once the server tells it (its scout
        counts the epoch while the ranks are served: server/README.md,
        *Planning ahead*). The batches that come meanwhile wait for the
        next `for`; a server gone is an error (its heartbeats stop)."""
        start = time.monotonic()
        while True:
            n = lib.lf_client_epoch_batches_wait(self._client, self._epoch(),
                                                 int(COUNT_NOTE_S * 1000))
            if n >= 0 or n in _COUNT_ANSWERS:
                return n
            if n != _capi.E_TIMEOUT:
                check(n, self._client)  # the server gone or failed: raises
            print("levelfeed: len(): waiting for the server to count this epoch's batches "
                  "(it counts the first epoch of a dataset past 2^20 samples while serving "
                  "it): %.0f s so far" % (time.monotonic() - start), file=sys.stderr,
                  flush=True)

    def __bool__(self):
        # Always true, as before __len__: `if loader:` must not ask the
        # server's count (nor raise once the plan is over).
        return True

    def set_epoch(self, epoch):
        """The epoch the next `for` should yield, as DistributedSampler's
        set_epoch: the server plans the epochs, so this only checks that it
        agrees, raising when the next batch belongs to another epoch."""
        self._want_epoch = int(epoch)
        if self._ahead is not None:
            self._check_epoch(self._ahead)

    def _check_epoch(self, b):
        want, self._want_epoch = self._want_epoch, None
        if want is not None and b.epoch != want:
            self._ahead = b             # not lost: the next `for` starts with it
            raise LevelfeedError(_capi.E_STATE, "levelfeed: set_epoch(%d), but the server's "
                                 "next batch is of epoch %d: the server orders the epochs "
                                 "(lf-server --epochs, a restored state_dict); iterate "
                                 "without set_epoch or follow batch.epoch" % (want, b.epoch))

    # -- batches and their slots -----------------------------------------

    def _take(self):
        """The next batch from the server, or None after the last one."""
        c = self._live()
        if self._clock is not None:
            self._clock.step_end()      # reported before lf_next moves on to the next batch
        self._thread = threading.get_ident()
        self._give_back_later()
        self._state_ahead = self._save()
        b = _capi.Batch()
        rc = self._ask(lib.lf_next, c, b, "every ring slot is held by a batch still referred "
                       "to (a Batch or one of its tensors): let go of old batches (del, "
                       "batch.close()), keep copies (t.clone(), Loader(copy=True)), or give "
                       "the server more slots (lf-server --slots)")
        if rc == _capi.E_END:
            self._finished = True
            self._write_trace()
            return None
        check(rc, c)
        return self._held_batch(b)

    def _ask(self, next_fn, c, b, held):
        """next_fn (lf_next, lf_eval_next) into b; where every slot it could
        fill is held, once more after collecting the batches only a reference
        cycle still holds, then an error saying `held`."""
        rc = next_fn(c, ctypes.byref(b), self._timeout_ms)
        if rc == _capi.E_ORDER:
            gc.collect()
            self._give_back_later()
            rc = next_fn(c, ctypes.byref(b), self._timeout_ms)
            if rc == _capi.E_ORDER:
                raise LevelfeedError(rc, "levelfeed: " + held)
        return rc

    def _held_batch(self, b):
        """The Batch of b, which holds b's slot."""
        slot = _Slot(self, b)
        try:
            out = self._batch(b, slot)
        except BaseException:
            slot.close()
            raise
        out.epoch, out.step, out.seq, out.nsamples = b.epoch, b.step, b.seq, b.nsamples
        out.wait_s = b.wait_ns * 1e-9
        out.step_tokens = b.step_tokens
        return out

    # -- evaluation passes (lf-server --eval-data) ------------------------

    @property
    def eval_len(self):
        """This rank's batches in one evaluation pass (the same on every
        rank), or None when the server has no --eval-data."""
        n = lib.lf_client_eval_batches(self._live())
        return None if n < 0 else n

    def eval_batches(self):
        """One evaluation pass over the server's held-out set (lf-server
        --eval-data): yields this rank's share of it as Batches, every
        held-out sample once over the ranks, the same batches in the same
        order in every pass (eval_len of them; batch.step is the step in
        the pass, sample_ids the held-out set's own ids). Call it at the
        same training step on every rank. Training is not disturbed: its
        batches wait in their own ring slots meanwhile, and the next
        training batch and state_dict() are as without the pass. A pass has
        2 ring slots (with device=, 2 device slots of their own beside
        device_depth's): let go of a batch (del, close()) before taking the
        one after the next. A generator closed early (break) takes and
        gives back the rest of its pass, so the next pass starts clean."""
        c = self._live()
        check(lib.lf_eval_begin(c), c)
        try:
            while True:
                b = self._eval_next(c)
                if b is None:
                    return
                yield self._held_batch(b)
        except GeneratorExit:           # left early (break, del): the pass's rest
            while self._client is not None:
                b = self._eval_next(c)
                if b is None:
                    break
                self._release(b)
            raise

    def _eval_next(self, c):
        """The pass's next batch (a _capi.Batch), or None at its end."""
        self._thread = threading.get_ident()
        self._give_back_later()
        b = _capi.Batch()
        rc = self._ask(lib.lf_eval_next, c, b, "both eval slots are held by eval batches still "
                       "referred to: let go of the one before the last (del, batch.close()) "
                       "or keep copies (t.clone())")
        if rc == 0:
            return None
        check(rc, c)
        return b

    def _batch(self, b, slot):
        """The Batch of views of b's slot, or with copy=True of copies (the
        slot then given back at once)."""
        out = Batch()
        for i in range(b.ntensors):
            t = b.tensors[i]
            view = (_host_view(t, self._as_torch, slot) if self._cuda is None
                    else _device_view(t, self._device, slot))
            out[t.name.decode()] = view.clone() if self._copy and self._as_torch else (
                view.copy() if self._copy else view)
        if self._copy:
            slot.close()
        else:
            out._slot = slot
        return out

    def _give_back(self, b):
        """Returns b's slot to the server; nothing to do once closed (the
        ring went with the client). The client belongs to the thread that
        takes the batches: a view freed on another one (torch's autograd
        threads free saved tensors) queues its slot for that thread's next
        batch instead of calling the library beside it."""
        if self._client is None:
            return
        if threading.get_ident() != self._thread:
            self._later.append(b)
            return
        self._release(b)

    def _give_back_later(self):
        while self._later:
            self._release(self._later.popleft())

    def _release(self, b):
        # A device slot is refilled behind the work queued on torch's
        # current stream (which may still read the batch).
        stream = (None if self._cuda is None
                  else torch.cuda.current_stream(self._device).cuda_stream)
        check(lib.lf_release_stream(self._client, ctypes.byref(b), stream), self._client)

    def release(self):
        """Gives the last batch's slot back now (its tensors go stale)."""
        slot = self._last() if self._last is not None else None
        self._last = None
        if slot is not None:
            slot.close()

    _clock = None    # a StepClock: told where each step starts and ends
    _own_clock = None   # the loader's own, for trace=/chart= (no sync wait)

    def report_step(self, compute, sync=None):
        """Tells the server how long the trainer computed on the last batch
        and, where given, how long it then waited for the other ranks (sync:
        DDP's all-reduce), in seconds; lf-stat shows them next to the time
        this rank waited for data. levelfeed.torch.instrument measures and
        reports both for a DDP model. A trainer that calls it reports every
        step itself (the loader's own clock for trace= stops)."""
        if self._clock is not None and self._clock is self._own_clock:
            self._clock = None
        self._report(compute, sync)

    def _report(self, compute, sync):
        c = self._live()
        compute_ns = int(max(0.0, compute) * 1e9)
        if sync is None:
            check(lib.lf_report_step(c, compute_ns), c)
        else:
            check(lib.lf_report_step_sync(c, compute_ns, int(max(0.0, sync) * 1e9)), c)

    def report(self, timeout=10.0):
        """This rank's end-of-run report as text, what lf-server prints for
        it at exit: its shares of data wait, compute and sync wait, how far
        its compute followed the planned cost, its slowest steps and why.
        Once the loader is finished (the last epoch iterated)."""
        buf = ctypes.create_string_buffer(8192)
        check(lib.lf_client_report(self._live(), buf, len(buf), _timeout_ms(timeout)),
              self._client)
        return buf.value.decode("utf-8", "replace")

    def _save(self):
        """The client's position as lf_state_save's bytes: after the last
        batch lf_next returned."""
        buf = ctypes.create_string_buffer(256)
        n = check(lib.lf_state_save(self._live(), buf, len(buf)), self._client)
        return buf.raw[:n]

    def state_dict(self):
        """This rank's position, after the last batch yielded, in the shape of
        torchdata's StatefulDataLoader: a plain dict to put in a checkpoint.
        A batch taken ahead to end an epoch was not yielded: the position
        saved is the one before it."""
        state = self._state_ahead if self._ahead is not None else self._save()
        return {"_num_yielded": self._yielded, "_iterator_finished": self.finished,
                _STATE_KEY: {"version": _STATE_VERSION, "rank": self.rank, "state": state}}

    def load_state_dict(self, state_dict):
        """Resumes from state_dict(): call it before the first batch. The
        server refuses a state of another rank or another plan; under other
        mixture weights (--weight) it takes one saved at an epoch boundary
        (the next epoch is drawn under the new weights) and refuses one saved
        inside an epoch, naming both weight sets."""
        mine = state_dict.get(_STATE_KEY) if isinstance(state_dict, dict) else None
        if not isinstance(mine, dict) or mine.get("version") not in _STATE_VERSIONS:
            raise LevelfeedError(_capi.E_STATE, "levelfeed: not a levelfeed Loader state_dict")
        raw = bytes(mine["state"])
        rc = lib.lf_state_restore(self._live(), raw, len(raw))
        if rc == _capi.E_STATE:     # the library's words name the field that differs
            raise LevelfeedError(rc, "levelfeed: load_state_dict: the server refuses this "
                                 "state: " + lib.lf_client_error(self._client).decode(
                                     "utf-8", "replace"))
        check(rc, self._client)
        self._yielded = int(state_dict.get("_num_yielded", 0))
        self._finished = bool(state_dict.get("_iterator_finished", False))

    def _write_trace(self):
        """Has the server write the trace and chart (once): it answers when
        every rank it serves has asked too or left."""
        paths, self._trace_paths = self._trace_paths, None
        if paths is None:
            return
        if self._clock is not None:
            self._clock.step_end()      # a run stopped early: its last step
        t, c = (None if p is None else os.fsencode(os.fspath(p)) for p in paths)
        rc = lib.lf_client_trace(self._live(), t, c, self._timeout_ms)
        if rc == _capi.E_ORDER:
            raise LevelfeedError(rc, "levelfeed: trace/chart: with device= the server writes "
                                 "them at the plan's end only: iterate the last epoch")
        check(rc, self._client)

    def close(self):
        """Says goodbye and unmaps the ring: every batch of this loader not
        copied is stale afterwards (the slots went with the ring). With
        trace= or chart= not written yet (a run stopped early), has the
        server write them first."""
        try:
            if self._client is not None:
                self._write_trace()
        finally:
            self._close()

    def _close(self):
        if self._client is not None:
            self._ahead = None
            lib.lf_client_close(self._client)
            self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self._close()       # no trace: it would wait for the other ranks

