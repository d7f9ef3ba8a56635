#!/usr/bin/python3
"""A small next-token model trained with DistributedDataParallel, fed by
levelfeed or, for comparison, by a plain DataLoader + DistributedSampler.

    lf-server --data DIR --world 2 --epochs 2 &
    torchrun --nproc_per_node=2 examples/torch_ddp.py --data DIR
    torchrun --nproc_per_node=2 examples/torch_ddp.py --loader torch --data DIR --epochs 2

With `lf-server --micro-batches` each step arrives as the plan's
micro-batches (each padded to its own longest): the example runs them one
after another with DDP's no_sync, each weighted by its share of the step's
tokens, so the step's gradient is the same as one padded batch's and is
all-reduced once (ranks may hold different numbers of micro-batches).

Rank, world and rendezvous come from the variables torchrun sets (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); without them it runs as a
single process. gloo on CPU, nccl when CUDA is available.

--loader torch: the DataLoader needs a map-style Dataset over the same
samples, and the shard format has no Python reader (writing one would copy
the C reader). So each rank first reads the whole dataset once into memory
through levelfeed itself (a private lf-server, world 1, naive sampler, one
epoch, not timed) and then trains from an in-memory Dataset with
DistributedSampler and a padding collate, batch size fixed. That baseline
never touches storage during training: it is the DataLoader's best case,
and what it shows next to levelfeed is the effect of fixed-count batches
(unequal work per rank, waiting at the all-reduce) and of the per-step cost
of the loader itself. Its collate pads to the batch's longest sample, each
cut to --max-len first, as a DataLoader user's would.

--out-vocab K: the output layer predicts the K-1 ids most frequent in
--data (counted in the pass that finds the vocabulary), one class each, and
one class for every other id; the embedding keeps a row per id. A model for
measuring the loaders on a CPU: a full output layer over GPT-2's 50k ids
builds 400 MB of logits for 4 x 512 tokens and a CPU step takes seconds.

Printed at the end (rank 0): tokens/s over all ranks, step time p50/p99,
and for each rank the time spent waiting for data and waiting at the
gradient all-reduce (a tiny all-reduce timed in a DDP comm hook before the
last gradient bucket's all-reduce: it returns once the slowest rank has
finished its backward, so its duration is this rank's wait). A line `summary k=v ...`
carries the same for scripts, with the tokens trained on (all ranks: equal for
both loaders over the same data and epochs).

Where the wait comes from: each rank's line also gives the wait its work
up to the comm hook explains (optimizer, data, forward and backward of every
micro-batch; summed over steps, the slowest rank's minus this rank's), in
wall time and in the thread's CPU time (the work itself: a wall-time wait
beyond it is time the machine gave to other processes), and its compute.
Then the wait per second of step on the steps where every rank ran the same
work (as many micro-batches, as many padded cells), where it is the
machine's and not the loader's, and on the other steps. --step-times FILE:
rank 0 writes one line per step and rank, "step rank micro samples tokens
padded compute_ms wait_ms reduce_ms optim_ms data_ms cpu_ms mb_ms,mb_ms,..."
(padded: the cells the model ran, micro-batches x their padded length;
reduce: the last gradient bucket's all-reduce after the wait; cpu_ms: the
thread's CPU time from the previous step's all-reduce to the hook; mb_ms:
each micro-batch's forward and backward).

For tests: --dump FILE writes one line per batch, "epoch step rank n
id,id,... crc32 loss"; --stop-after K saves a checkpoint (model, optimizer,
loader.state_dict()) to --checkpoint PREFIX.rankR.pt after K steps and
exits; --resume loads it and continues.
"""
import argparse
import collections
import contextlib
import functools
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import levelfeed  # noqa: E402  (from the source tree when not installed)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=("levelfeed", "torch"), default="levelfeed")
    p.add_argument("--endpoint", help="lf-server control socket (default: the server's)")
    p.add_argument("--data", help="the dataset directory (the server's --data): the "
                   "vocabulary comes from it; --loader torch trains on it")
    p.add_argument("--epochs", type=int, default=1, help="--loader torch: epochs")
    p.add_argument("--batch-size", type=int, default=16, help="--loader torch: samples per rank")
    p.add_argument("--workers", type=int, default=0, help="--loader torch: DataLoader workers")
    p.add_argument("--lf-server", default=None,
                   help="--loader torch: lf-server program (default: $LF_BIN/lf-server, PATH)")
    p.add_argument("--vocab", type=int, default=0,
                   help="token ids are below this (default: from the data, --data DIR)")
    p.add_argument("--max-len", type=int, default=2048, help="longer samples are truncated")
    p.add_argument("--out-vocab", type=int, default=0,
                   help="the output layer predicts the K-1 ids most frequent in --data, one "
                   "class each, and one class for every other id (default 0: one class per id; "
                   "see the note on --out-vocab)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--dump", help="per-batch lines (epoch step rank n ids crc32 loss)")
    p.add_argument("--step-times", help="rank 0 writes each step's breakdown, every rank, here "
                   "(see the note on where the wait comes from)")
    p.add_argument("--checkpoint", help="checkpoint prefix (PREFIX.rankR.pt)")
    p.add_argument("--stop-after", type=int, default=0, help="save --checkpoint after K steps, exit")
    p.add_argument("--resume", action="store_true", help="start from --checkpoint")
    a = p.parse_args()
    if a.loader == "torch" and not a.data:
        p.error("--loader torch needs --data DIR")
    if not a.vocab and not a.data:
        p.error("the vocabulary comes from the data: pass --data DIR (the dataset lf-server "
                "serves), or --vocab N")
    if a.out_vocab and (a.out_vocab < 2 or not a.data):
        p.error("--out-vocab K needs K >= 2 and --data DIR (the frequencies come from it)")
    if (a.stop_after or a.resume) and not a.checkpoint:
        p.error("--stop-after and --resume need --checkpoint")
    if a.loader == "torch" and (a.stop_after or a.resume):
        p.error("--stop-after/--resume: only with --loader levelfeed")
    return a


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP. Attention is written out
    (not nn.MultiheadAttention) so an empty batch flows through it."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        n, length, dim = x.shape
        q, k, v = (self.qkv(self.ln1(x)).view(n, length, 3, self.heads, dim // self.heads)
                   .permute(2, 0, 3, 1, 4))
        att = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(n, length, dim))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """keep (--out-vocab): the ids the output layer predicts, one class
    each, with one more class for every other id; None: one class per id.
    The map from id to class is a buffer that never changes, so DDP need
    not broadcast it (broadcast_buffers=False below)."""

    def __init__(self, vocab, dim, heads, max_len, keep=None):
        super().__init__()
        classes = vocab if keep is None else len(keep) + 1
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.block, self.ln = Block(dim, heads), nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        self.register_buffer("classes", None if keep is None else
                             torch.full((vocab,), len(keep), dtype=torch.long)
                             .index_put_((keep,), torch.arange(len(keep))), persistent=False)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        return self.head(self.ln(self.block(self.tok(tokens) + self.pos(pos))))

    def class_of(self, ids):
        return ids if self.classes is None else self.classes[ids]


def next_token_loss(model, tokens, lengths):
    """Mean cross-entropy of each real position's next token (pads after a
    sample's length are masked; the causal mask keeps them out of attention).
    The mean is over this rank's tokens: DDP then averages the ranks."""
    logits = model(tokens[:, :-1])
    targets = getattr(model, "module", model).class_of(tokens[:, 1:])
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                         reduction="none").view(targets.shape)
    pos = torch.arange(targets.shape[1], device=tokens.device)
    mask = pos[None, :] < (lengths[:, None] - 1)
    return (ce * mask).sum() / mask.sum().clamp(min=1)


def micro_batches(b):
    """The batch's micro-batches (lf-server --micro-batches), or the batch
    itself as one (DataLoader batches are plain dicts)."""
    return b.micro_batches() if hasattr(b, "micro_batches") else [b]


def check_vocab(tokens, vocab):
    """An id past the embedding would fail deep inside it (or, on a GPU,
    as a device-side assert): say which id and what to pass instead."""
    top = int(tokens.max()) if tokens.numel() else 0
    if top >= vocab:
        raise SystemExit("torch_ddp: token id %d in the data, but --vocab %d: pass --vocab %d or "
                         "more, or leave it out to take it from --data" % (top, vocab, top + 1))


def train_step(ddp, b, device, max_len, vocab, waits=None):
    """Forward and backward over the batch's micro-batches, gradients
    accumulated: each weighted by its share of the step's predicted tokens,
    and all-reduced once, with the last one (ranks may hold different
    numbers of micro-batches). Returns the step's loss, the tokens it
    trained on (samples longer than --max-len count as truncated), the
    cells the model ran (samples x padded length) and each micro-batch's
    forward and backward in seconds (with waits, the AllreduceWait hooked
    into ddp, the last one's up to the hook, where this rank's backward is
    done and the wait begins)."""
    parts = micro_batches(b)
    total = sum(int((mb["lengths"].clamp(max=max_len) - 1).clamp(min=0).sum()) for mb in parts)
    loss_sum, cells, times = 0.0, 0, []
    for k, mb in enumerate(parts):
        t0 = time.perf_counter()
        if waits:
            waits.hook_at = None
        tokens = mb["tokens"].to(device, non_blocking=True)[:, :max_len].long()
        lengths = mb["lengths"].to(device, non_blocking=True).long().clamp(max=max_len)
        check_vocab(tokens, vocab)
        share = float((lengths - 1).clamp(min=0).sum()) / max(total, 1)
        sync = contextlib.nullcontext() if k == len(parts) - 1 else ddp.no_sync()
        with sync:
            loss = next_token_loss(ddp, tokens, lengths) * share
            loss.backward()
        loss_sum += float(loss)
        cells += tokens.shape[0] * tokens.shape[1]
        times.append(((waits and waits.hook_at) or time.perf_counter()) - t0)
    return (loss_sum, sum(int(mb["lengths"].clamp(max=max_len).sum()) for mb in parts), cells,
            times)


# One rank's step, as train() records it (seconds): micro-batches, samples,
# tokens trained on, padded cells; compute (data to the model, forward and
# backward, up to the comm hook), the wait there, the rest of the reduce,
# optimizer, data; the work since the ranks last left an all-reduce together
# up to the hook (wall, and this thread's CPU time); each micro-batch's
# forward and backward.
StepRecord = collections.namedtuple(
    "StepRecord", "micro samples tokens padded compute wait reduce optim data arrive arrive_cpu mb")


class AllreduceWait:
    """A DDP comm hook: before the last gradient bucket's all-reduce (when
    this rank's backward is complete), a tiny blocking all-reduce returns
    only once every rank got there, i.e. once the slowest rank has finished
    its backward (and the earlier buckets' transfers are done); its duration
    is this rank's wait. Every bucket is averaged as DDP's default hook
    does. On a GPU
    the stream is synchronized around the tiny all-reduce, which costs some
    overlap: the price of measuring."""

    def __init__(self, world):
        self.world, self.seconds, self.tiny = world, 0.0, torch.zeros(1)
        self.hook_at = None     # perf_counter when the last bucket's hook began, this step
        self.hook_cpu = 0.0     # and this thread's CPU time then (the hook runs on it on CPU)
        self.last = 0.0         # the wait of the last bucket's hook, this step

    @staticmethod
    def sync(t):
        if t.is_cuda:
            torch.cuda.current_stream(t.device).synchronize()

    def hook(self, _state, bucket):
        buf = bucket.buffer()
        if bucket.is_last():
            tiny = self.tiny.to(buf.device)
            self.sync(buf)          # this rank's own backward is done
            self.hook_cpu = time.thread_time()
            t0 = self.hook_at = time.perf_counter()
            dist.all_reduce(tiny)
            self.sync(buf)          # nccl returns at once: wait for the result
            self.last = time.perf_counter() - t0
            self.seconds += self.last
        buf.div_(self.world)
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])


def find_lf_server(explicit):
    if explicit:
        return explicit
    if os.environ.get("LF_BIN"):
        return os.path.join(os.environ["LF_BIN"], "lf-server")
    return shutil.which("lf-server") or "lf-server"


def read_dataset(args, visit):
    """Calls visit(batch) for every batch of one pass over --data, read
    through a private lf-server (world 1, naive sampler, one epoch, numpy
    tensors): the example's only way to see the whole dataset, as the shard
    format has no Python reader."""
    rt = tempfile.mkdtemp(prefix="lf-preload-")       # 0700, as lf-server wants
    ep = os.path.join(rt, "ctl")
    srv = subprocess.Popen([find_lf_server(args.lf_server), "--data", args.data, "--world", "1",
                            "--sampler", "naive", "--batch-per-rank", "64", "--epochs", "1",
                            "--endpoint", ep, "--quiet"])
    try:
        with levelfeed.Loader(endpoint=ep, rank=0, world_size=1, tensors="numpy") as lo:
            for b in lo:
                visit(b)
        if srv.wait(timeout=30) != 0:
            raise RuntimeError("reading %s: lf-server exited %d" % (args.data, srv.returncode))
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
        shutil.rmtree(rt, ignore_errors=True)


def preload(args):
    """Every sample of the dataset in memory, by id (see the module's note
    on --loader torch)."""
    samples = {}

    def keep(b):
        for i, sid in enumerate(b["sample_ids"]):
            samples[int(sid)] = b["tokens"][i, :b["lengths"][i]].astype(np.int64)
    read_dataset(args, keep)
    return [samples[i] for i in range(len(samples))]


def data_vocab(args, rank, device, samples=None):
    """The vocabulary the data needs (its largest token id + 1, or --vocab)
    and, with --out-vocab K, the K-1 ids most frequent in it (else None):
    found by rank 0 (in the preloaded samples, else in one pass over --data)
    and broadcast, so every rank builds the same model; third, the share of
    the data's tokens those ids are (on rank 0). Neither the manifest nor the
    server carries the largest id or the frequencies, hence the pass."""
    counts = [np.zeros(0, dtype=np.int64)]

    def count(ids):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size:
            old = counts[0]
            counts[0] = np.bincount(ids, minlength=len(old))
            counts[0][:len(old)] += old

    def scan(b):               # the tokens within each row's length: not the pads
        rows = np.arange(b["tokens"].shape[1])[None, :] < b["lengths"][:, None]
        count(b["tokens"][rows])
    if rank == 0 and (args.out_vocab or not args.vocab):
        if samples is not None:
            for s in samples:
                count(s)
        else:
            read_dataset(args, scan)
    head = torch.tensor([args.vocab or len(counts[0])], dtype=torch.int64, device=device)
    dist.broadcast(head, 0)
    vocab = max(int(head[0]), 1)
    if not args.out_vocab or args.out_vocab >= vocab:
        return vocab, None, 1.0
    keep, share = torch.zeros(args.out_vocab - 1, dtype=torch.int64, device=device), 0.0
    if rank == 0:
        full = np.zeros(vocab, dtype=np.int64)     # an id past --vocab is refused later
        full[:min(vocab, len(counts[0]))] = counts[0][:vocab]
        order = np.argsort(-full, kind="stable")[:len(keep)]
        keep[:] = torch.from_numpy(order)
        share = float(full[order].sum()) / max(int(full.sum()), 1)
    dist.broadcast(keep, 0)
    return vocab, keep.cpu(), share


class InMemoryTokens(torch.utils.data.Dataset):
    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return i, self.samples[i]


def pad_collate(items, max_len):
    """The batch levelfeed's pad layout gives: tokens [n, longest] padded
    with 0, lengths, sample_ids; a sample longer than max_len is cut to its
    first max_len tokens here, as a DataLoader user's collate would."""
    cut = [s[:max_len] for _, s in items]
    longest = max(len(s) for s in cut)
    tokens = torch.zeros(len(items), longest, dtype=torch.int32)
    for row, s in enumerate(cut):
        tokens[row, :len(s)] = torch.from_numpy(s)
    return {"tokens": tokens,
            "lengths": torch.tensor([len(s) for s in cut], dtype=torch.int32),
            "sample_ids": torch.tensor([i for i, _ in items], dtype=torch.int64)}


def dataloader_batches(args, ds, rank, world):
    sampler = torch.utils.data.distributed.DistributedSampler(
        ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=sampler,
                                     collate_fn=functools.partial(pad_collate,
                                                                  max_len=args.max_len),
                                     num_workers=args.workers)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, b in enumerate(dl):
            yield epoch, step, b


def levelfeed_batches(loader):
    while not loader.finished:      # one `for` per epoch, as with a DataLoader
        for b in loader:
            yield b.epoch, b.step, b


def percentile(xs, q):
    return float(np.percentile(np.array(xs), q)) if xs else 0.0


class Dump:
    """The --dump lines of one rank (format of lf-server --print-plan, plus
    a CRC of the token bytes and the loss)."""

    def __init__(self, path, rank):
        self.f = open(path, "w") if path else None
        self.rank = rank

    def write(self, epoch, step, b, loss):
        if not self.f:
            return
        ids = ",".join(str(i) for i in b["sample_ids"].cpu().tolist())
        crc = zlib.crc32(b["tokens"].cpu().numpy().tobytes())   # device tensors too
        self.f.write("%d %d %d %d %s %08x %.9g\n" % (epoch, step, self.rank, len(b["sample_ids"]),
                                                      ids, crc, loss))

    def close(self):
        if self.f:
            self.f.close()


def setup():
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    cuda = torch.cuda.is_available()
    device = torch.device("cpu")
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    return rank, world, device


def checkpoint_path(args, rank):
    return "%s.rank%d.pt" % (args.checkpoint, rank)


def explained_waits(per_rank, field):
    """Each rank's wait that its work up to the comm hook explains: summed
    over steps, the slowest rank's minus this rank's (per_rank: each rank's
    StepRecords; field: "arrive", wall time, or "arrive_cpu")."""
    out = [0.0] * len(per_rank)
    for i in range(min(len(s) for s in per_rank)):
        arrive = [getattr(s[i], field) for s in per_rank]
        for r, t in enumerate(arrive):
            out[r] += max(arrive) - t
    return out


def wait_rates(per_rank):
    """The all-reduce wait (all ranks) per second of step (the slowest
    rank's compute), over the steps whose ranks ran the same work (as many
    micro-batches and padded cells each) and over the others: on the first,
    the wait is the machine's, not the loader's. Returns (steps, ms/s) for
    each: the same work, then the rest."""
    acc = [[0, 0.0, 0.0], [0, 0.0, 0.0]]
    for i in range(min(len(s) for s in per_rank)):
        rows = [s[i] for s in per_rank]
        a = acc[0 if len({(r.micro, r.padded) for r in rows}) == 1 else 1]
        a[0] += 1
        a[1] += sum(r.wait for r in rows)
        a[2] += max(r.compute for r in rows)
    return [(n, 1e3 * w / t if t > 0 else 0.0) for n, w, t in acc]


def write_step_times(path, per_rank):
    """--step-times: one line per step and rank (the module's note)."""
    with open(path, "w") as f:
        f.write("# step rank micro samples tokens padded compute_ms wait_ms reduce_ms optim_ms "
                "data_ms cpu_ms mb_ms,...\n")
        for i in range(min(len(s) for s in per_rank)):
            for r, s in enumerate(per_rank):
                t = s[i]
                f.write("%d %d %d %d %d %d %s %s\n"
                        % ((i, r, t.micro, t.samples, t.tokens, t.padded)
                           + (" ".join("%.2f" % (v * 1e3) for v in (
                               t.compute, t.wait, t.reduce, t.optim, t.data, t.arrive_cpu)),
                              ",".join("%.1f" % (v * 1e3) for v in t.mb))))


def report(args, rank, world, device, stats):
    """Rank 0 prints the run's figures; every rank contributes its own."""
    mine = torch.tensor([stats["tokens"], stats["data_wait"], stats["ar_wait"], stats["wall"],
                         sum(s.compute for s in stats["steps"])], dtype=torch.float64,
                        device=device)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    per_rank = [None] * world
    dist.all_gather_object(per_rank, stats["steps"])
    if rank != 0:
        return
    every = [e.cpu().tolist() for e in every]
    explained = explained_waits(per_rank, "arrive")
    by_work = explained_waits(per_rank, "arrive_cpu")
    (same, same_rate), (other, other_rate) = wait_rates(per_rank)
    if args.step_times:
        write_step_times(args.step_times, per_rank)
    tokens = sum(e[0] for e in every)
    wall = max(e[3] for e in every)
    steps, losses = stats["step_times"], stats["losses"]
    # The first 5 steps (near the untrained loss) against the last 20.
    first, last = float(np.mean(losses[:5])), float(np.mean(losses[-20:]))
    p50, p99 = percentile(steps, 50) * 1e3, percentile(steps, 99) * 1e3
    print("%s: %d steps, %.0f tokens/s, step p50 %.2f ms p99 %.2f ms, loss %.3f -> %.3f"
          % (args.loader, len(steps), tokens / wall, p50, p99, first, last))
    for r, e in enumerate(every):
        print("  rank %d: waited %.3f s for data, %.3f s at the all-reduce (the slower rank's "
              "longer wall time: %.3f s, its greater CPU work: %.3f s), computed %.2f s (of %.2f s)"
              % (r, e[1], e[2], explained[r], by_work[r], e[4], e[3]))
    print("  all-reduce wait per second of step: %.1f ms on the %d step(s) where every rank ran "
          "the same work (micro-batches and padded cells), %.1f ms on the other %d"
          % (same_rate, same, other_rate, other))
    print("summary loader=%s steps=%d tokens=%d tokens_per_s=%.0f step_p50_ms=%.3f "
          "step_p99_ms=%.3f loss_first=%.4f loss_last=%.4f micro_per_step=%.2f data_wait_s=%s "
          "allreduce_wait_s=%s explained_wait_s=%s work_wait_s=%s compute_s=%s same_steps=%d "
          "same_wait_ms_per_s=%.2f other_wait_ms_per_s=%.2f"
          % (args.loader, len(steps), tokens, tokens / wall, p50, p99, first, last,
             stats["micro"] / max(len(steps), 1),
             ",".join("%.3f" % e[1] for e in every), ",".join("%.3f" % e[2] for e in every),
             ",".join("%.3f" % w for w in explained), ",".join("%.3f" % w for w in by_work),
             ",".join("%.3f" % e[4] for e in every), same, same_rate, other_rate))


def train(args, rank, world, device):
    """The training loop; returns this rank's figures."""
    # The preload runs before the clock starts (the baseline's steps are
    # timed, not its loading); the vocabulary comes from the data read.
    samples = preload(args) if args.loader == "torch" else None
    vocab, keep, share = data_vocab(args, rank, device, samples)
    if rank == 0:
        out = "" if keep is None else (
            ", output %d classes (the %d most frequent ids, %.1f %% of the data's tokens, "
            "and one for the rest)" % (len(keep) + 1, len(keep), 100 * share))
        print("vocabulary %d (%s)%s" % (vocab, "--vocab" if args.vocab else "from the data", out),
              flush=True)
    torch.manual_seed(args.seed)
    model = TinyLM(vocab, args.dim, args.heads, args.max_len, keep).to(device)
    ddp = nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None,
        broadcast_buffers=False)
    waits = AllreduceWait(world)
    ddp.register_comm_hook(None, waits.hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr)

    loader = None
    if args.loader == "levelfeed":
        # On a GPU the client copies batches into device memory ahead of the
        # loop (the .to(device) below is then a no-op).
        loader = levelfeed.Loader(endpoint=args.endpoint, rank=rank, world_size=world,
                                  device=device if device.type == "cuda" else None)
        if args.resume:
            ck = torch.load(checkpoint_path(args, rank))
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            loader.load_state_dict(ck["loader"])
        batches = levelfeed_batches(loader)
    else:
        batches = dataloader_batches(args, InMemoryTokens(samples), rank, world)

    dump = Dump(args.dump, rank)
    stats = {"tokens": 0, "data_wait": 0.0, "step_times": [], "losses": [], "micro": 0,
             "steps": []}
    dist.barrier()
    start = t_prev = t_reduced = time.perf_counter()
    cpu_reduced = time.thread_time()
    steps = 0
    while True:
        try:
            epoch, step, b = next(batches)
        except StopIteration:
            break
        t_got = time.perf_counter()
        stats["data_wait"] += t_got - t_prev
        opt.zero_grad(set_to_none=True)
        waits.last = 0.0
        value, ntok, cells, mb_times = train_step(ddp, b, device, args.max_len, vocab, waits)
        t_step = time.perf_counter()
        micro = len(micro_batches(b))
        stats["micro"] += micro
        opt.step()
        t_done = time.perf_counter()
        # The CPU time is the work itself, without the time the machine gave
        # to other processes.
        hook_at = waits.hook_at or t_step
        hook_cpu = waits.hook_cpu if waits.hook_at else time.thread_time()
        stats["steps"].append(StepRecord(
            micro, len(b["sample_ids"]), ntok, cells, sum(mb_times), waits.last,
            t_step - hook_at - waits.last, t_done - t_step, t_got - t_prev, hook_at - t_reduced,
            hook_cpu - cpu_reduced, mb_times))
        t_reduced, cpu_reduced = t_step, time.thread_time()
        if loader:
            loader.report_step(t_done - t_got)
        dump.write(epoch, step, b, value)
        stats["tokens"] += ntok
        stats["losses"].append(value)
        stats["step_times"].append(t_done - t_prev)
        steps += 1
        t_prev = t_done
        if rank == 0 and args.log_every and steps % args.log_every == 0:
            print("step %d (epoch %d): loss %.4f" % (steps, epoch, value), flush=True)
        if args.stop_after and steps == args.stop_after:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "loader": loader.state_dict(), "steps": steps},
                       checkpoint_path(args, rank))
            break
    stats["wall"] = time.perf_counter() - start
    stats["ar_wait"] = waits.seconds
    dump.close()
    if loader:
        loader.close()
    return stats


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world, device = setup()
    stats = train(args, rank, world, device)
    # The DDP reducer (gone with train's frame) must be freed while the
    # process group lives: freed at interpreter exit, gloo's destructor can
    # deadlock with a Python comm-hook callback waiting for the GIL.
    gc.collect()
    report(args, rank, world, device, stats)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
