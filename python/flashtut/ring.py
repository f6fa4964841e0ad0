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
r, the query rows and keys with something visible form one rectangle, so each visit is one
kernel call (:func:`step_block`; half 0 is chunk r of the queries or chunk s of the keys,
half 1 the late chunk):

    s == r   the whole block against itself, causal: the local order of [chunk r;
             chunk 2P−1−r] is the sequence's order, so the block's own diagonal mask is
             the sequence's
    s <  r   every query row against key half 0 (chunk s), no mask
    s >  r   query half 1 (chunk 2P−1−r) against the whole block, no mask

Without the mask every visit is the whole block against the whole block. The first visit
(the rank's own block) covers every query row, so the forward takes its (o, lse) as they
are; each later visit is merged into the rows it touched.

**What computes a block.** ``block_forward(q, k, v, causal) -> (o, lse)`` and
``block_backward(q, k, v, o, lse, do, causal) -> (dq, dk, dv)`` on one rectangle (query
length 2n or n, key length 2n or n, for chunks of n; ``causal`` only on a square, the
diagonal): :func:`reference_blocks` in float64 on any device (the tests' stand-in),
:func:`flashtut_blocks` with the tutorial's kernels on a GPU (chapters 09 and 10 on Hopper,
07 and 08 elsewhere: flashtut.forward_for and backward_for; a kernel that takes one length,
chapter 08's backward, gets two square calls instead, :func:`square_blocks`).

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

__all__ = ["zigzag_shard", "zigzag_unshard", "merge", "step_block", "reference_blocks", "flashtut_blocks",
           "square_blocks",
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
    firsts, seconds = zip(*(s.chunk(2, dim=dim) for s in shards))
    return torch.cat(list(firsts) + list(reversed(seconds)), dim=dim)


def step_block(rank, src, world, causal):
    """(query half, key half, causal) of the one call rank ``rank`` makes when rank ``src``'s
    block visits it: a half is 0 or 1 (the rank's chunk ``rank`` or 2·world − 1 − ``rank``;
    src's chunk ``src`` or 2·world − 1 − ``src``), None the whole block. Under the causal mask
    every (query, key) pair with the key visible lies in that rectangle, and every pair in it
    is visible, but for the own block's diagonal mask (causal True)."""
    if not causal:
        return None, None, False
    if src == rank:
        return None, None, True
    if src < rank:
        return None, 0, False  # key chunk src is before both query chunks; 2P−1−src after both
    return 1, None, False      # both of src's chunks lie between the rank's two: only the late one sees them


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


def _wide(x):
    """``x`` in float32 at least, for a sum of two partial gradients (a kernel may return bf16)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def square_blocks(block_forward, block_backward):
    """(block_forward, block_backward) that give ``block_forward`` and ``block_backward`` only
    square calls: a 2n × n or n × 2n rectangle (never causal, :func:`step_block`) becomes two
    n × n calls, their results joined (the query halves' rows side by side, the key halves'
    partial results merged or summed). For a kernel that takes one length for queries and
    keys (chapter 08's backward)."""

    def cut(q, k, causal):
        if q.shape[2] == k.shape[2]:
            return None
        if causal:
            raise ValueError(f"square_blocks: a causal call on {q.shape[2]} queries against {k.shape[2]} keys: "
                             f"the ring asks for the mask only on a square")
        if q.shape[2] == 2 * k.shape[2]:
            return "queries"
        if k.shape[2] == 2 * q.shape[2]:
            return "keys"
        raise ValueError(f"square_blocks: {q.shape[2]} queries against {k.shape[2]} keys: neither equal nor a pair")

    def forward(q, k, v, causal):
        how = cut(q, k, causal)
        if how is None:
            return block_forward(q, k, v, causal)
        if how == "queries":
            (o0, l0), (o1, l1) = (block_forward(_half(q, h), k, v, False) for h in (0, 1))
            return torch.cat([o0, o1], dim=2), torch.cat([l0, l1], dim=2)
        (o0, l0), (o1, l1) = (block_forward(q, _half(k, h), _half(v, h), False) for h in (0, 1))
        return merge(o0, l0, o1, l1)

    def backward(q, k, v, o, lse, do, causal):
        how = cut(q, k, causal)
        if how is None:
            return block_backward(q, k, v, o, lse, do, causal)
        if how == "queries":
            (dq0, dk0, dv0), (dq1, dk1, dv1) = (
                block_backward(_half(q, h), k, v, _half(o, h), _half(lse, h), _half(do, h), False) for h in (0, 1))
            return torch.cat([dq0, dq1], dim=2), _wide(dk0) + dk1, _wide(dv0) + dv1
        (dq0, dk0, dv0), (dq1, dk1, dv1) = (
            block_backward(q, _half(k, h), _half(v, h), o, lse, do, False) for h in (0, 1))
        return _wide(dq0) + dq1, torch.cat([dk0, dk1], dim=2), torch.cat([dv0, dv1], dim=2)

    return forward, backward


def flashtut_blocks(scale=None, forward_impl=None, backward_impl=None):
    """(block_forward, block_backward) on the tutorial's kernels (bf16/fp16 CUDA tensors,
    d = 64 or 128): :func:`flashtut.forward` with ``forward_impl`` and :func:`flashtut.backward`
    with ``backward_impl`` (None: :func:`flashtut.forward_for` and :func:`flashtut.backward_for`
    of the GPU, chapters 09 and 10 on a Hopper GPU, 07 and 08 elsewhere). A kernel that takes
    one length (its Impl's ``lengths`` false) gets square calls (:func:`square_blocks`)."""
    import flashtut

    # The implementations on the tensors' GPU, when not named.
    fwd_impl = lambda q: forward_impl or flashtut.forward_for(torch.cuda.get_device_capability(q.device))
    bwd_impl = lambda q: backward_impl or flashtut.backward_for(torch.cuda.get_device_capability(q.device))

    def one_forward(q, k, v, causal):
        impl = fwd_impl(q)
        o, lse = flashtut.forward(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal, scale=scale,
                                  impl=impl)
        return o.float(), lse

    def one_backward(q, k, v, o, lse, do, causal):
        impl = bwd_impl(q)
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

    square_forward, square_backward = square_blocks(one_forward, one_backward)

    def block_forward(q, k, v, causal):
        call = one_forward if flashtut.forwards()[fwd_impl(q)].lengths else square_forward
        return call(q, k, v, causal)

    def block_backward(q, k, v, o, lse, do, causal):
        call = one_backward if flashtut.backwards()[bwd_impl(q)].lengths else square_backward
        return call(q, k, v, o, lse, do, causal)

    return block_forward, block_backward


# ---- one rank's steps -----------------------------------------------------------------------------

def _half(x, half, dim=2):
    """Half ``half`` (0 or 1) of ``x`` along the sequence, or all of it (None): a view."""
    return x if half is None else x.chunk(2, dim=dim)[half]


def _accumulator(x):
    """The dtype partial results are summed in: float64 for float64 inputs, else float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _add_into(total, half, part):
    """``total``'s rows of ``half`` (None: all) += ``part``, in place."""
    _half(total, half).add_(part.to(total.dtype))


def _forward_step(q, kv, rank, src, world, causal, block_forward, state):
    """(o, lse) with the block of rank ``src`` (kv = (k, v)) folded in: the call's result as it
    is on the first visit (``state`` None: the own block, every row), else merged into the
    rows the call covered, in place."""
    a, b, diag = step_block(rank, src, world, causal)
    o_b, lse_b = block_forward(_half(q, a), _half(kv[0], b), _half(kv[1], b), diag)
    acc = _accumulator(q)
    if state is None:
        return o_b.to(acc), lse_b.to(acc)
    o, lse = state
    rows_o, rows_lse = _half(o, a), _half(lse, a)
    rows_o[:], rows_lse[:] = merge(rows_o, rows_lse, o_b.to(acc), lse_b.to(acc))
    return state


def _backward_share(q, o, lse, do, kv, dq, rank, src, world, causal, block_backward):
    """The gradients of the block of rank ``src`` from this rank's queries: dq's part added
    into ``dq`` in place; this rank's share of the block's dk, dv returned with the key half
    it covers, (dk, dv, half)."""
    a, b, diag = step_block(rank, src, world, causal)
    dq_b, dk_b, dv_b = block_backward(_half(q, a), _half(kv[0], b), _half(kv[1], b), _half(o, a), _half(lse, a),
                                      _half(do, a), diag)
    _add_into(dq, a, dq_b)
    return dk_b, dv_b, b


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
    states = [None] * world
    kvs = list(zip(ks, vs))
    for step in range(world):
        for r in range(world):
            states[r] = _forward_step(qs[r], kvs[r], r, (r - step) % world, world, causal, block_forward, states[r])
        kvs = ring.shift(kvs)
    return states


def backward_simulated(qs, ks, vs, os, lses, dos, *, causal, blocks=None):
    """Every rank's (dq, dk, dv), one process (see :func:`forward_simulated`): each block's
    dk, dv travel with it, each rank adding its share, and end back on its owner."""
    block_backward = (blocks or reference_blocks())[1]
    world, ring = len(qs), SimulatedRing(len(qs))
    acc = _accumulator(qs[0])
    dqs = [torch.zeros(q.shape, dtype=acc, device=q.device) for q in qs]
    travel = [((k, v), (torch.zeros(k.shape, dtype=acc, device=k.device),
                        torch.zeros(v.shape, dtype=acc, device=v.device))) for k, v in zip(ks, vs)]
    for step in range(world):
        for r in range(world):
            kv, dkv = travel[r]
            dk_b, dv_b, b = _backward_share(qs[r], os[r], lses[r], dos[r], kv, dqs[r], r, (r - step) % world, world,
                                            causal, block_backward)
            _add_into(dkv[0], b, dk_b)
            _add_into(dkv[1], b, dv_b)
        travel = ring.shift(travel)
    # After P shifts every block (and its dk, dv) is back on its owner.
    return [(dq, dkv[0], dkv[1]) for dq, (_, dkv) in zip(dqs, travel)]


def forward(q, k, v, *, causal, comm, blocks=None):
    """This rank's (o, lse) (float32, or float64 for float64 inputs), its zigzag q, k, v
    given, the other ranks' blocks received through ``comm`` (a :class:`DistributedRing`):
    each step posts the next block's transfer, computes the current one, then waits."""
    block_forward = (blocks or reference_blocks())[0]
    state = None
    kv = (k.contiguous(), v.contiguous())
    for step in range(comm.world):
        pending = comm.start(kv) if step + 1 < comm.world else None
        state = _forward_step(q, kv, comm.rank, (comm.rank - step) % comm.world, comm.world, causal, block_forward,
                              state)
        if pending is not None:
            kv = comm.finish(pending)
    return state


def backward(q, k, v, o, lse, do, *, causal, comm, blocks=None):
    """This rank's (dq, dk, dv) from its zigzag q, k, v, the final o and lse and the output
    gradient do. The blocks travel with their dk, dv and end back on their owner; both
    transfers overlap the kernels: at each step the rank computes its share of the visiting
    block's gradients first, then waits for the sum the ranks before it sent, adds its share
    and sends the sum on. Only the last transfer, each block's sum going home, is not hidden."""
    block_backward = (blocks or reference_blocks())[1]
    acc = _accumulator(q)
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    kv = (k.contiguous(), v.contiguous())
    travelling = None  # the transfer of the previous step's block's dk, dv sum
    for step in range(comm.world):
        pending = comm.start(kv) if step + 1 < comm.world else None
        dk_b, dv_b, b = _backward_share(q, o, lse, do, kv, dq, comm.rank, (comm.rank - step) % comm.world,
                                        comm.world, causal, block_backward)
        if travelling is None:  # the own block: no rank has added to it yet
            dkv = (torch.zeros(k.shape, dtype=acc, device=k.device), torch.zeros(v.shape, dtype=acc, device=v.device))
        else:
            dkv = comm.finish(travelling)
        _add_into(dkv[0], b, dk_b)
        _add_into(dkv[1], b, dv_b)
        travelling = comm.start(dkv)  # on to the next rank: after the last step, its owner
        if pending is not None:
            kv = comm.finish(pending)
    dk, dv = comm.finish(travelling)
    return dq, dk, dv
