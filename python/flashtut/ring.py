"""Ring attention: one sequence split across P ranks, its key/value blocks passed round a
ring, each rank folding every visiting block into its queries' result by the log-sum-exp.

    import flashtut.ring as ring
    # rank r of P holds q, k, v of zigzag chunks r and 2P-1-r of the sequence (zigzag_shard)
    o, lse = ring.forward(q, k, v, causal=True, comm=ring.DistributedRing())   # torchrun
    dq, dk, dv = ring.backward(q, k, v, o, lse, do, causal=True, comm=...)

The merge is chapter 03's online softmax across blocks: two partial results (o_a, lse_a) and
(o_b, lse_b) over disjoint sets of keys combine as lse = log(e^lse_a + e^lse_b),
o = e^(lse_a − lse)·o_a + e^(lse_b − lse)·o_b (:func:`merge`). The backward needs no merge:
with the final o and lse, each block's gradients are exact partial sums (P = e^(S − lse)
recomputed from the final lse, D = rowsum(dO∘o) from the final o), dq summed on its rank and
dk, dv travelling with their block back to its owner.

**The zigzag layout.** Under the causal mask, a rank holding a contiguous slice would have
all its visitors' keys visible (the last rank) or none (the first): the ranks' work would
differ P-fold. Cut the sequence into 2P chunks and give rank r chunks r and 2P − 1 − r
(:func:`zigzag_shard`): every rank then holds one early and one late chunk, and at each
step of the ring every rank computes the same amount. When the block of rank s visits rank
r, of the four chunk pairs (query chunk i, key chunk j) only those with j <= i are
computed (:func:`step_pairs`):

    s == r   (r, r) and (2P−1−r, 2P−1−r) causal, (2P−1−r, r) whole
    s <  r   both query chunks against key chunk s, whole
    s >  r   query chunk 2P−1−r against both key chunks, whole

Without the mask every pair is computed, whole.

**What computes a block.** ``block_forward(q, k, v, causal) -> (o, lse)`` and
``block_backward(q, k, v, o, lse, do, causal) -> (dq, dk, dv)`` on one chunk pair (equal
lengths, so ``causal`` means the diagonal, top-left): :func:`reference_blocks` in float64
on any device (the tests' stand-in), :func:`flashtut_blocks` with the tutorial's kernels on
a GPU (chapters 09 and 10 on Hopper, 07 and 08 elsewhere: flashtut.forward_for and
backward_for).

**The ring.** A ``comm`` passes each rank's current block to the next rank and receives the
previous rank's: :class:`SimulatedRing` runs all P ranks in one process, on one device (the
tests, and a check of the schedule on one GPU); :class:`DistributedRing` is
``torch.distributed``'s point-to-point (NCCL between GPUs, gloo on the CPU), one process a
rank, the next block's transfer started before the current block is computed, so that the
two overlap.

This module imports torch; ``import flashtut`` alone does not.
"""
import math

import torch

__all__ = ["zigzag_shard", "zigzag_unshard", "merge", "step_pairs", "reference_blocks", "flashtut_blocks",
           "SimulatedRing", "DistributedRing", "forward", "backward", "forward_simulated", "backward_simulated"]


# ---- the layout ------------------------------------------------------------------------------

def zigzag_shard(x, world, rank, dim=2):
    """Rank ``rank``'s part of ``x`` (the sequence along ``dim``, divisible by 2·world): chunks
    rank and 2·world − 1 − rank, concatenated in that order."""
    chunks = x.chunk(2 * world, dim=dim)
    if len(chunks) != 2 * world or any(c.shape[dim] != chunks[0].shape[dim] for c in chunks):
        raise ValueError(f"zigzag_shard: the sequence ({x.shape[dim]} along dim {dim}) must split into "
                         f"{2 * world} equal chunks: make it a multiple of 2·world = {2 * world}")
    return torch.cat([chunks[rank], chunks[2 * world - 1 - rank]], dim=dim)


def zigzag_unshard(shards, dim=2):
    """The whole sequence from every rank's zigzag part (the inverse of :func:`zigzag_shard`)."""
    world = len(shards)
    firsts, seconds = zip(*(s.chunk(2, dim=dim) for s in shards))
    return torch.cat(list(firsts) + list(reversed(seconds)), dim=dim)


def step_pairs(rank, src, world, causal):
    """The (query half, key half, causal) triples rank ``rank`` computes when rank ``src``'s
    block visits it: halves 0 and 1 are the rank's chunks rank and 2·world − 1 − rank (and
    src's, src and 2·world − 1 − src)."""
    if not causal:
        return [(a, b, False) for a in (0, 1) for b in (0, 1)]
    if src == rank:
        return [(0, 0, True), (1, 0, False), (1, 1, True)]
    if src < rank:
        return [(0, 0, False), (1, 0, False)]
    return [(1, 0, False), (1, 1, False)]


# ---- the merge ----------------------------------------------------------------------------------

def merge(o, lse, o_b, lse_b):
    """(o, lse) and (o_b, lse_b), two partial results over disjoint keys, as one: float32
    (or wider) o [..., N, d] and lse [..., N]. A row that saw no key has lse = −∞ and o = 0."""
    new = torch.logaddexp(lse, lse_b)
    safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)  # no key anywhere: keep 0
    wa = torch.exp(lse - safe).unsqueeze(-1)
    wb = torch.exp(lse_b - safe).unsqueeze(-1)
    return o * wa + o_b * wb, new


# ---- the blocks ---------------------------------------------------------------------------------

def _expand(k, heads):
    """Grouped heads: k [B, H_kv, N, d] repeated to [B, heads, N, d]."""
    return k if k.shape[1] == heads else k.repeat_interleave(heads // k.shape[1], dim=1)


def reference_blocks(scale=None):
    """(block_forward, block_backward) in float64 on the tensors' device: the definition,
    for the tests and for checking the ring's schedule."""

    def scores(q, k, causal):
        s = q.double() @ _expand(k, q.shape[1]).double().transpose(-1, -2)
        s = s * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
        if causal:
            n, m = s.shape[-2:]
            s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        return s

    def block_forward(q, k, v, causal):
        s = scores(q, k, causal)
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse.unsqueeze(-1))
        return p @ _expand(v, q.shape[1]).double(), lse

    def block_backward(q, k, v, o, lse, do, causal):
        s = scores(q, k, causal)
        p = torch.exp(s - lse.double().unsqueeze(-1))
        vv, kk = _expand(v, q.shape[1]).double(), _expand(k, q.shape[1]).double()
        dp = do.double() @ vv.transpose(-1, -2)
        ds = p * (dp - (do.double() * o.double()).sum(-1, keepdim=True))
        sc = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
        dq = ds @ kk * sc
        dk, dv = ds.transpose(-1, -2) @ q.double() * sc, p.transpose(-1, -2) @ do.double()
        group = q.shape[1] // k.shape[1]
        if group > 1:  # the group's query heads sum into their key/value head
            dk = dk.unflatten(1, (k.shape[1], group)).sum(2)
            dv = dv.unflatten(1, (k.shape[1], group)).sum(2)
        return dq, dk, dv

    return block_forward, block_backward


def flashtut_blocks(scale=None, forward_impl=None, backward_impl=None):
    """(block_forward, block_backward) on the tutorial's kernels (bf16/fp16 CUDA tensors,
    d = 64 or 128): :func:`flashtut.forward` with ``forward_impl`` and :func:`flashtut.backward`
    with ``backward_impl`` (None: :func:`flashtut.forward_for` and :func:`flashtut.backward_for`
    of the GPU, chapters 09 and 10 on a Hopper GPU, 07 and 08 elsewhere)."""
    import flashtut

    def block_forward(q, k, v, causal):
        impl = forward_impl or flashtut.forward_for(torch.cuda.get_device_capability(q.device))
        o, lse = flashtut.forward(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal, scale=scale,
                                  impl=impl)
        return o.float(), lse

    def block_backward(q, k, v, o, lse, do, causal):
        impl = backward_impl or flashtut.backward_for(torch.cuda.get_device_capability(q.device))
        # A backward without grouped heads (chapter 08's) takes as many key/value heads as
        # query heads: they are expanded, and each group's dK and dV summed back.
        heads, heads_kv = q.shape[1], k.shape[1]
        expand = heads_kv != heads and not flashtut.backwards()[impl].grouped
        if expand:
            k, v = _expand(k, heads), _expand(v, heads)
        dq, dk, dv = flashtut.backward(q.contiguous(), k.contiguous(), v.contiguous(), o.to(q.dtype).contiguous(),
                                       lse.float().contiguous(), do.to(q.dtype).contiguous(), causal=causal,
                                       scale=scale, impl=impl)
        if expand:
            dk = dk.float().unflatten(1, (heads_kv, heads // heads_kv)).sum(2)
            dv = dv.float().unflatten(1, (heads_kv, heads // heads_kv)).sum(2)
        return dq, dk, dv

    return block_forward, block_backward


# ---- one rank's steps -----------------------------------------------------------------------------

def _halves(x):
    return x.chunk(2, dim=2)


def _forward_step(q, kv, rank, src, world, causal, block_forward, state):
    """Folds the block of rank ``src`` (kv = (k, v)) into this rank's (o, lse), in place."""
    qh, kh, vh = _halves(q), _halves(kv[0]), _halves(kv[1])
    o, lse = state
    for a, b, diag in step_pairs(rank, src, world, causal):
        o_b, lse_b = block_forward(qh[a], kh[b], vh[b], diag)
        rows = slice(a * qh[0].shape[2], (a + 1) * qh[0].shape[2])
        o[:, :, rows], lse[:, :, rows] = merge(o[:, :, rows], lse[:, :, rows], o_b.to(o.dtype), lse_b.to(lse.dtype))


def _backward_step(q, o, lse, do, kv, dkv, dq, rank, src, world, causal, block_backward):
    """Adds the gradients of the block of rank ``src`` into this rank's dq and the block's
    travelling dk, dv (dkv), in place."""
    qh, oh, lh, doh = _halves(q), _halves(o), lse.chunk(2, dim=2), _halves(do)
    kh, vh = _halves(kv[0]), _halves(kv[1])
    n = qh[0].shape[2]
    for a, b, diag in step_pairs(rank, src, world, causal):
        dq_b, dk_b, dv_b = block_backward(qh[a], kh[b], vh[b], oh[a], lh[a], doh[a], diag)
        dq[:, :, a * n:(a + 1) * n] += dq_b.to(dq.dtype)
        dkv[0][:, :, b * n:(b + 1) * n] += dk_b.to(dkv[0].dtype)
        dkv[1][:, :, b * n:(b + 1) * n] += dv_b.to(dkv[1].dtype)


def _empty_result(q, dtype):
    o = torch.zeros(q.shape, dtype=dtype, device=q.device)
    lse = torch.full(q.shape[:3], float("-inf"), dtype=dtype, device=q.device)
    return o, lse


# ---- the rings ---------------------------------------------------------------------------------

class SimulatedRing:
    """All ranks in one process: ``shift(blocks)`` takes every rank's block (a list, rank
    order) and returns what each receives, the block of the rank before it."""

    def __init__(self, world):
        self.world = world

    def shift(self, blocks):
        return [blocks[(r - 1) % self.world] for r in range(self.world)]


class DistributedRing:
    """``torch.distributed``'s point-to-point between the ranks of the default group: rank r
    sends to r + 1 and receives from r − 1 (mod P). ``start(tensors)`` posts the exchange of
    a block (a tuple of tensors) and returns a handle; ``finish(handle)`` waits for it and
    returns the received block."""

    def __init__(self, group=None):
        import torch.distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("DistributedRing: torch.distributed is not initialized: launch with torchrun "
                               "and call torch.distributed.init_process_group first")
        self.dist, self.group = dist, group
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)

    def start(self, tensors):
        if self.world == 1:
            return tensors, []
        received = tuple(torch.empty_like(t) for t in tensors)
        nxt, prv = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        ops = [self.dist.P2POp(self.dist.isend, t, nxt, self.group) for t in tensors]
        ops += [self.dist.P2POp(self.dist.irecv, t, prv, self.group) for t in received]
        return received, self.dist.batch_isend_irecv(ops)

    def finish(self, handle):
        received, works = handle
        for w in works:
            w.wait()
        return received


# ---- the passes ----------------------------------------------------------------------------------

def forward_simulated(qs, ks, vs, *, causal, blocks=None):
    """Every rank's (o, lse) from every rank's zigzag q, k, v (lists), one process: the ring's
    schedule, step by step, on one device. ``blocks``: (block_forward, block_backward), by
    default :func:`reference_blocks`."""
    block_forward = (blocks or reference_blocks())[0]
    world, ring = len(qs), SimulatedRing(len(qs))
    states = [_empty_result(q, torch.float64 if q.dtype == torch.float64 else torch.float32) for q in qs]
    kvs = list(zip(ks, vs))
    for step in range(world):
        for r in range(world):
            _forward_step(qs[r], kvs[r], r, (r - step) % world, world, causal, block_forward, states[r])
        kvs = ring.shift(kvs)
    return states


def backward_simulated(qs, ks, vs, os, lses, dos, *, causal, blocks=None):
    """Every rank's (dq, dk, dv), one process (see :func:`forward_simulated`)."""
    block_backward = (blocks or reference_blocks())[1]
    world, ring = len(qs), SimulatedRing(len(qs))
    acc = torch.float64 if qs[0].dtype == torch.float64 else torch.float32
    dqs = [torch.zeros(q.shape, dtype=acc, device=q.device) for q in qs]
    travel = [((k, v), (torch.zeros(k.shape, dtype=acc, device=k.device),
                        torch.zeros(v.shape, dtype=acc, device=v.device))) for k, v in zip(ks, vs)]
    for step in range(world):
        for r in range(world):
            kv, dkv = travel[r]
            _backward_step(qs[r], os[r], lses[r], dos[r], kv, dkv, dqs[r], r, (r - step) % world, world,
                           causal, block_backward)
        travel = ring.shift(travel)
    # After P shifts every block (and its dk, dv) is back on its owner.
    return [(dq, dkv[0], dkv[1]) for dq, (_, dkv) in zip(dqs, travel)]


def forward(q, k, v, *, causal, comm, blocks=None):
    """This rank's (o, lse) (float32, or float64 for float64 inputs), its zigzag q, k, v
    given, the other ranks' blocks received through ``comm`` (a :class:`DistributedRing`):
    each step posts the next block's transfer, computes the current one, then waits."""
    block_forward = (blocks or reference_blocks())[0]
    state = _empty_result(q, torch.float64 if q.dtype == torch.float64 else torch.float32)
    kv = (k.contiguous(), v.contiguous())
    for step in range(comm.world):
        pending = comm.start(kv) if step + 1 < comm.world else None
        _forward_step(q, kv, comm.rank, (comm.rank - step) % comm.world, comm.world, causal, block_forward, state)
        if pending is not None:
            kv = comm.finish(pending)
    return state


def backward(q, k, v, o, lse, do, *, causal, comm, blocks=None):
    """This rank's (dq, dk, dv) from its zigzag q, k, v, the final o and lse and the output
    gradient do: the blocks travel with their dk, dv, which end back on their owner."""
    block_backward = (blocks or reference_blocks())[1]
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    kv = (k.contiguous(), v.contiguous())
    dkv = (torch.zeros(k.shape, dtype=acc, device=k.device), torch.zeros(v.shape, dtype=acc, device=v.device))
    for step in range(comm.world):
        pending = comm.start(kv) if step + 1 < comm.world else None
        _backward_step(q, o, lse, do, kv, dkv, dq, comm.rank, (comm.rank - step) % comm.world, comm.world,
                       causal, block_backward)
        # dk, dv of the block computed here go on with it (they were summed, so they move now).
        dkv = comm.finish(comm.start(dkv)) if comm.world > 1 else dkv
        if pending is not None:
            kv = comm.finish(pending)
    return dq, dkv[0], dkv[1]
