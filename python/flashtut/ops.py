"""The tutorial's attention as PyTorch operators (``torch.library``): what ``torch.compile``
and CUDA graphs see, and what :func:`flashtut.attention` calls.

    import torch, flashtut
    q = torch.randn(2, 32, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True) for _ in range(2))
    o = flashtut.attention(q, k, v, is_causal=True, enable_gqa=True)   # SDPA's signature
    o.sum().backward()
    fast = torch.compile(model, fullgraph=True)                          # no graph break

Two custom operators, each with a fake (meta) implementation that gives the outputs'
shapes, dtypes and strides without running anything, so that ``torch.compile`` traces
through them and a CUDA graph captures them like any PyTorch kernel:

- ``flashtut::attention_forward(q, k, v, is_causal, scale, causal_align) -> (o, lse)``:
  :func:`flashtut.forward` with :func:`flashtut.autograd.forward_impl`'s choice (chapter 09
  on a Hopper GPU, chapter 07 on any other), or chapter 11's decode for a decode step (at
  most 16 new query rows against a longer, contiguous cache, no mask or causal from the
  bottom right: :func:`flashtut.decodes`), such as a model's generation loop makes;
- ``flashtut::attention_backward(do, q, k, v, o, lse, is_causal, scale, causal_align)
  -> (dq, dk, dv)``: :func:`flashtut.backward` with :func:`flashtut.autograd.backward_impl`'s
  choice (chapter 10 on a Hopper GPU, chapter 08 on any other);

and the forward's autograd formula is the backward operator (``register_autograd``): the
saved q, k, v, o and lse, P recomputed from them in the backward kernel.

:func:`attention` is ``torch.nn.functional.scaled_dot_product_attention``'s call on top:
``[batch, heads, seq_len, head_dim]`` tensors, ``is_causal`` (top-left, as SDPA aligns it),
``scale``, ``enable_gqa`` (key and value with fewer heads, a divisor of query's), a key
length other than the query's. What the kernels cannot do is refused before anything
reaches the library, with an error that says what to change (``attn_mask``, ``dropout_p``,
dtypes other than bf16/fp16 outside autocast, head dims other than 64 and 128, CPU
tensors; the operators called directly refuse CPU tensors with a message of the same kind).
Grouped heads and a key length other than the query's reach both operators as they are:
chapter 10's backward (Hopper) computes them, dK and dV summed over the query heads that
share a key/value head inside the kernel. Chapter 08's backward (any other GPU) takes one
head count and one length: with grouped heads the backward operator expands key and value
for it and sums their gradients back itself (the forward still reads them unexpanded), and a
key length other than the query's is refused with gradients, saying so: at the call, or under
torch.compile (which cannot ask the library while it traces) when the backward runs.
"""
from typing import Optional

try:
    import torch
except ImportError as _e:  # pragma: no cover - the message is tested in a subprocess
    raise ImportError(
        f"flashtut.ops registers the tutorial's attention as PyTorch operators and needs "
        f"PyTorch: install it (pip install torch); the rest of flashtut (import flashtut) "
        f"works without it ({_e})") from None
from torch import Tensor
from torch.nn.attention.bias import CausalBias, CausalVariant

import flashtut as _ft
from flashtut.autograd import (DTYPES, HEAD_DIMS, _autocast_dtype, _check_arguments, _check_device, backward_impl,
                               forward_impl)

__all__ = ["attention", "attention_forward", "attention_backward", "backward_computes", "BACKWARD_IMPL"]

BACKWARD_IMPL = "ch08"  #: the backward off Hopper (flashtut.backward_for: ch10 on Hopper)


def backward_computes(device):
    """The :class:`flashtut.Impl` of the backward the backward operator runs on ``device``
    (chapter 10's on Hopper, chapter 08's elsewhere): its ``grouped`` and ``lengths`` say
    whether it takes key and value with fewer heads, and a key length of their own. Loads the
    library; called in eager code only (never while torch.compile traces)."""
    return _ft.backwards()[backward_impl(device, True)]


def _backward_takes_lengths(device):
    """Whether the backward on ``device`` takes a key length other than the query's; True
    when there is no driver to ask (fake tensors on a machine without a GPU), where the
    backward operator is left to refuse it."""
    return not torch.cuda.is_available() or backward_computes(device).lengths


def _compiling():
    """True while torch.compile traces: no library call then (it would break the graph)."""
    return torch.compiler.is_compiling()


def _one_length_only(lq, lk):
    """The refusal of a gradient with two lengths by a backward that computes one."""
    return NotImplementedError(
        f"the gradient of attention with key length {lk} != query length {lq} is computed by "
        f"chapter 10's backward (a Hopper GPU) only; this GPU's backward (chapter 08) takes one "
        f"length. Call it under torch.no_grad() (the forward kernel computes it), or use "
        f"torch.nn.functional.scaled_dot_product_attention for training")


def _layout_like(t, contiguous):
    """An empty tensor shaped like t, laid out as the library lays out its outputs: [B, H,
    N, d] when the inputs are contiguous, else [B, N, H, d] memory when t's heads lie inside
    its tokens (flashtut._empty_output). The fake implementations use it too, so that the
    strides torch.compile plans with are the strides the kernels write."""
    tokens = not contiguous and _ft._tokens_outside(t)
    if not tokens:
        return t.new_empty(t.shape)
    b, h, n, d = t.shape
    return t.new_empty((b, n, h, d)).transpose(1, 2)


def _all_contiguous(*tensors):
    return all(t.is_contiguous() for t in tensors)


def _ready(t):
    """t as it is when its strides are those of a view the kernels read (flashtut.view_strides'
    rule on strides alone: nothing torch.compile cannot trace), else a contiguous copy; where
    the view starts (its 16-byte alignment) is the operator's to check, on the real tensor
    (_aligned)."""
    return t if _ft._readable_strides(t) is not None else t.contiguous()


def _aligned(t):
    """t, or a copy of it in fresh (16-byte aligned) memory when it starts between 16-byte
    boundaries (a view into a larger tensor): inside the operators, on real tensors."""
    if t.data_ptr() % _ft.ALIGNMENT == 0:
        return t
    return t.contiguous() if not t.is_contiguous() else t.clone()


def _laid_out(out, like, contiguous):
    """out in the layout the fake implementation promised (_layout_like(like, contiguous)),
    copied there in the rare case an input had to be copied (_aligned) and the library chose
    another."""
    want = _layout_like(like, contiguous)
    if out.stride() == want.stride():
        return out
    want.copy_(out)
    return want


# ---- the forward operator ------------------------------------------------------------------

@torch.library.custom_op("flashtut::attention_forward", mutates_args=(), device_types="cuda")
def attention_forward(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, scale: Optional[float],
                      causal_align: int) -> tuple[Tensor, Tensor]:
    """o and the log-sum-exp (float32 [B, H, N]) of chapter 11's decode for a decode step
    (:func:`flashtut.decodes`), else of chapter 09's forward on Hopper, chapter 07's elsewhere."""
    return _forward(q, k, v, is_causal, scale, causal_align)


def _forward_impl(q, k, v, is_causal, causal_align):
    """The forward the operator runs, and the q it gives it: chapter 11's decode
    (:data:`flashtut.DECODE_IMPL`, q made contiguous: it reads Q as [B, H, N_q, d], a few
    rows) for a decode step whose key and value are contiguous, as a KV cache keeps them
    (views of a longer cache go to the forward chapters, which read any view); else
    :func:`forward_impl`'s (chapter 09 on Hopper, 07 elsewhere). The time of a decode step is
    reading the cache once, which chapter 11 splits across the whole GPU."""
    if (_ft.decodes(q.shape[2], k.shape[2], is_causal, causal_align)
            and k.is_contiguous() and v.is_contiguous()):
        return _ft.DECODE_IMPL, q.contiguous()
    return forward_impl(q.device), q


def _forward(q, k, v, is_causal, scale, causal_align):
    """The forward operator's work on real tensors (a plain function, so that the CPU test
    can run it with a stand-in for the library)."""
    impl, q_read = _forward_impl(q, k, v, is_causal, causal_align)
    o, lse = _ft.forward(*(_aligned(t) for t in (q_read, k, v)), causal=is_causal, scale=scale,
                         impl=impl, causal_align=causal_align)
    return _laid_out(o, q, _all_contiguous(q, k, v)), lse


@attention_forward.register_fake
def _(q, k, v, is_causal, scale, causal_align):
    o = _layout_like(q, _all_contiguous(q, k, v))
    return o, q.new_empty(q.shape[:3], dtype=torch.float32)


# CPU tensors (the operators called directly, not through attention(), which checks the
# device first) get flashtut's message rather than the dispatcher's "Could not run ... with
# arguments from the 'CPU' backend". Only real CPU tensors reach these: fake ones (and so
# torch.compile's tracing) take the fake implementations, CUDA ones the kernels above.
def _refuse_cpu(names, tensors):
    for name, t in zip(names, tensors):
        if t.device.type != "cuda":
            raise ValueError(f"{name} is on {t.device}, the kernels run on a CUDA device: "
                             f"pass {name}.cuda()")
    raise ValueError("the kernels run on a CUDA device: pass CUDA tensors")


@attention_forward.register_kernel("cpu")
def _(q, k, v, is_causal, scale, causal_align):
    _refuse_cpu(("q", "k", "v"), (q, k, v))


# ---- the backward operator -----------------------------------------------------------------

@torch.library.custom_op("flashtut::attention_backward", mutates_args=(), device_types="cuda")
def attention_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                       is_causal: bool, scale: Optional[float],
                       causal_align: int) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv of chapter 10's backward on Hopper, chapter 08's elsewhere (P recomputed
    from q, k and lse). k and v may have fewer heads than q (dk and dv have theirs) and,
    where the backward computes two lengths, another length."""
    return _backward(do, q, k, v, o, lse, is_causal, scale, causal_align)


def _backward(do, q, k, v, o, lse, is_causal, scale, causal_align):
    """The backward operator's work on real tensors (a plain function, so that the CPU test
    can run it with a stand-in for the library)."""
    contiguous = _all_contiguous(q, k, v, o, do)
    impl = backward_impl(q.device, contiguous)
    can = _ft.backwards()[impl]
    if k.shape[2] != q.shape[2] and not can.lengths:
        raise _one_length_only(q.shape[2], k.shape[2])
    group = q.shape[1] // k.shape[1]
    expand = group > 1 and not can.grouped  # chapter 08: one head count
    q2, o2, do2 = (_aligned(t) for t in (q, o, do))
    if expand:  # query head h reads key/value head h // group: copies in fresh memory
        k2, v2 = (t.repeat_interleave(group, dim=1) for t in (k, v))
    else:
        k2, v2 = _aligned(k), _aligned(v)
    dq, dk, dv = _ft.backward(q2, k2, v2, o2, lse, do2, causal=is_causal, scale=scale,
                              impl=impl, causal_align=causal_align)
    if expand:  # each key/value head's gradient: the sum over its group (float32 inside sum)
        dk, dv = (t.unflatten(1, (k.shape[1], group)).sum(2) for t in (dk, dv))
    return _laid_out(dq, q, contiguous), _laid_out(dk, k, contiguous), _laid_out(dv, k, contiguous)


@attention_backward.register_fake
def _(do, q, k, v, o, lse, is_causal, scale, causal_align):
    contiguous = _all_contiguous(q, k, v, o, do)
    return _layout_like(q, contiguous), _layout_like(k, contiguous), _layout_like(k, contiguous)


@attention_backward.register_kernel("cpu")
def _(do, q, k, v, o, lse, is_causal, scale, causal_align):
    _refuse_cpu(("do", "q", "k", "v", "o", "lse"), (do, q, k, v, o, lse))


def _setup_context(ctx, inputs, output):
    q, k, v, is_causal, scale, causal_align = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.args = (is_causal, scale, causal_align)
    ctx.mark_non_differentiable(lse)


def _gradients(ctx, do, _dlse):
    q, k, v, o, lse = ctx.saved_tensors
    # The incoming gradient is whatever the graph above made of o: often a strided view, in
    # the autocast dtype or not. The kernel wants o's dtype and a layout it reads.
    if do.dtype != o.dtype:
        do = do.to(o.dtype)
    dq, dk, dv = attention_backward(_ready(do), q, k, v, o, lse, *ctx.args)
    return dq, dk, dv, None, None, None


attention_forward.register_autograd(_gradients, setup_context=_setup_context)


# ---- SDPA's call ---------------------------------------------------------------------------

_NAMES = ("query", "key", "value")


def _check(tensors, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """What the kernels cannot do, refused before the library is touched, in the order
    arguments, shapes, dtype, head dimension, device."""
    for name, t in zip(_NAMES, tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    _check_arguments(attn_mask, dropout_p, is_causal, scale)
    q, k, v = tensors
    if any(t.dim() != 4 for t in tensors):
        raise ValueError(f"query, key and value have shapes {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}: expected 4 dimensions each, [batch, heads, "
                         f"seq_len, head_dim]")
    if k.shape != v.shape:
        raise ValueError(f"key has shape {tuple(k.shape)} but value {tuple(v.shape)}: they "
                         f"must have one shape [batch, heads_kv, len_kv, head_dim]")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"key has shape {tuple(k.shape)} but query {tuple(q.shape)}: they "
                         f"must share batch and head_dim")
    if k.shape[1] != q.shape[1]:
        if not enable_gqa:
            raise ValueError(f"key has {k.shape[1]} heads but query {q.shape[1]}: pass "
                             f"enable_gqa=True for grouped-query attention (as SDPA asks)")
        if q.shape[1] % k.shape[1]:
            raise ValueError(f"query's {q.shape[1]} heads are not a multiple of key's "
                             f"{k.shape[1]}: grouped-query attention needs them to be")
    for name, t in zip(_NAMES, tensors):
        if t.dtype not in DTYPES:
            raise TypeError(
                f"{name} is {t.dtype}: flashtut's attention (chapters 07 and 08, the tensor "
                f"cores) computes bf16 or fp16: call it under torch.autocast(\"cuda\", "
                f"dtype=torch.bfloat16), or pass {name}.bfloat16() (or {name}.half())")
        if t.dtype != q.dtype:
            raise TypeError(f"{name} is {t.dtype} but query is {q.dtype}: give them one dtype "
                            f"(or call under torch.autocast(\"cuda\"), which casts all three)")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(
            f"head_dim {q.shape[-1]} is not supported: chapters 07 and 08 compute head_dim 64 "
            f"or 128 (or use torch.nn.functional.scaled_dot_product_attention)")
    _check_device(tensors)


def _causal_bias(attn_mask, is_causal, q, k):
    """SDPA's causal masks given as objects (``torch.nn.attention.bias.causal_upper_left`` and
    ``causal_lower_right``, a ``CausalBias``), which the kernels compute without a mask
    tensor: ``(None, True, its alignment)``. Any other attn_mask comes back as it is, with
    ``is_causal`` and the top-left alignment, for the checks to refuse. (The classes are
    imported with the module: torch.compile(fullgraph=True) traces this on every call.)"""
    if not isinstance(attn_mask, CausalBias):
        return attn_mask, is_causal, _ft.CAUSAL_TOP_LEFT
    if is_causal:
        raise ValueError("attn_mask is a CausalBias, which already says causal: pass "
                         "is_causal=False with it (as SDPA asks)")
    lengths = (attn_mask.seq_len_q, attn_mask.seq_len_kv)
    if isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() == k.dim() == 4 \
            and lengths != (q.shape[2], k.shape[2]):
        raise ValueError(f"attn_mask is a causal mask for {lengths[0]} queries and {lengths[1]} "
                         f"keys, but query has {q.shape[2]} rows and key {k.shape[2]}: build it "
                         f"for these lengths")
    lower_right = attn_mask.variant == CausalVariant.LOWER_RIGHT
    return None, True, _ft.CAUSAL_BOTTOM_RIGHT if lower_right else _ft.CAUSAL_TOP_LEFT


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              *, enable_gqa=False):
    """``torch.nn.functional.scaled_dot_product_attention``, computed by the tutorial's
    kernels through the operators above (``torch.compile(fullgraph=True)`` and CUDA graphs
    go through them without a break).

    query ``[batch, heads, seq_len, head_dim]``, key and value ``[batch, heads_kv, len_kv,
    head_dim]`` (heads_kv = heads, or with ``enable_gqa`` a divisor of it), bf16 or fp16
    CUDA tensors (under ``torch.autocast("cuda")`` any floating dtype but float64, cast to
    the autocast dtype as SDPA's are), head_dim 64 or 128, any strides (views the kernels
    read are read in place, others copied). ``is_causal``: key j visible to query i iff
    j <= i (SDPA's alignment, also when the lengths differ). ``scale``: None for
    1/sqrt(head_dim). ``attn_mask``: None, or PyTorch's causal masks as objects,
    ``torch.nn.attention.bias.causal_upper_left(N, N_k)`` (``is_causal``'s alignment) and
    ``causal_lower_right(N, N_k)`` (key j visible to query i iff j <= i + N_k - N: the
    decode's, new rows at the end of a cache), computed without a mask tensor; any other mask,
    and ``dropout_p`` other than 0, raise :class:`NotImplementedError`.

    A decode step (:func:`flashtut.decodes`: at most 16 query rows against a longer key
    length, no mask or ``causal_lower_right``'s; key and value contiguous, as a KV cache that grows by concatenation
    keeps them) runs chapter 11's decode, which splits the cache's keys across the GPU;
    everything else chapter 09's forward (Hopper) or chapter 07's.

    Gradients: on a Hopper GPU chapter 10's backward takes grouped heads and two lengths as
    they are. Elsewhere chapter 08's takes one head count and one length: the backward
    operator expands key and value for it and sums their gradients back, and a key length
    other than query's raises :class:`NotImplementedError` when the call needs gradients
    (under ``torch.no_grad()`` the forward kernel computes it; under torch.compile the
    refusal comes from the backward operator, when the backward runs).
    """
    tensors = (query, key, value)
    if all(isinstance(t, torch.Tensor) for t in tensors):
        cast = _autocast_dtype()
        if cast is not None:  # what autocast does to SDPA's floating CUDA inputs
            tensors = tuple(t.to(cast) if t.dtype != cast and t.is_cuda and t.is_floating_point()
                            and t.dtype != torch.float64 else t for t in tensors)
    attn_mask, is_causal, align = _causal_bias(attn_mask, is_causal, *tensors[:2])
    _check(tensors, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    q, k, v = tensors
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    if grad and k.shape[2] != q.shape[2] and not _compiling() and not _backward_takes_lengths(q.device):
        raise _one_length_only(q.shape[2], k.shape[2])  # now, not when the backward runs
    q, k, v = (_ready(t) for t in (q, k, v))
    o, _ = attention_forward(q, k, v, bool(is_causal), None if scale is None else float(scale), align)
    return o
