"""The tutorial's attention as a PyTorch autograd function: chapter 09's forward and chapter 10's
backward on a Hopper GPU, chapters 07 and 08 on any other.

    import torch, flashtut.autograd as fa
    q, k, v = (torch.randn(4, 12, 1024, 64, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    o = fa.attention(q, k, v, is_causal=True)   # like F.scaled_dot_product_attention
    o.sum().backward()                          # q.grad, k.grad, v.grad from chapter 10 (08 off Hopper)

:func:`attention` takes what ``torch.nn.functional.scaled_dot_product_attention`` takes and
means the same by it: ``[batch, heads, seq_len, head_dim]`` tensors, ``is_causal`` (key j
visible to query i iff j <= i), ``scale`` (None: 1/sqrt(head_dim)). What the kernels cannot
do is refused before anything reaches the library, each with an error that says what to
change:

- ``attn_mask`` other than None, ``dropout_p`` other than 0, ``enable_gqa=True``:
  :class:`NotImplementedError` (the kernels know only the causal mask, have no dropout, and
  need k and v with q's number of heads: :func:`flashtut.attention` takes grouped heads);
- a dtype other than bf16 or fp16: :class:`TypeError` (run under
  ``torch.autocast("cuda", dtype=torch.bfloat16)``, which casts CUDA inputs here as it
  does for SDPA, or pass ``q.bfloat16()``);
- ``head_dim`` other than 64 or 128, q, k and v of different shapes, not 4 dimensions:
  :class:`ValueError`;
- tensors not on a CUDA device, or not all on one: :class:`ValueError`.

Views are read in place: the usual ``q`` is a ``view(B, N, H, d).transpose(1, 2)`` of a
Linear's output, whose strides the fastest kernels of chapters 07 and 08 take (the C API's
``*_strided`` functions; :func:`flashtut.view_strides` says which views qualify). Then o
and the gradients are laid out ``[B, N, H, d]`` like SDPA's FlashAttention backend lays
them out, so that the reshape back to ``[B, N, H·d]`` and the gradients' way back to the
projection are free. Any other layout is copied to contiguous memory first, the gradients
flowing back through the copy as usual.

:class:`FlashAttention` is the Function underneath: its forward calls
:func:`flashtut.forward` with :func:`forward_impl`'s choice (chapter 09 on a Hopper GPU,
chapter 07 on any other) and saves q, k, v, o and the log-sum-exp; its
backward calls :func:`flashtut.backward` with :func:`backward_impl`'s choice (chapter 10 on
a Hopper GPU, chapter 08 on any other; each recomputes P from q, k and the log-sum-exp) on the incoming gradient (read in place when it is such a view), and
returns None for every
input that does not need a gradient. It is once-differentiable (no double backward). Both
halves run on PyTorch's current stream. Under autocast the casting is done by
:func:`attention` itself, to the autocast dtype (bf16 or fp16, whichever autocast was asked
for); the Function runs no operation autocast would change, so it goes without
``torch.amp.custom_fwd``/``custom_bwd`` and the autocast context they would enter on every
backward (the comment in the class says when it would need them).

What a call costs on the CPU (Python and ctypes; the GPU's work aside) is measured by
``python/tests/bench_overhead.py`` and given in ``python/README.md``.

This module imports torch (it is a PyTorch module); ``import flashtut`` alone does not.
"""
import functools
import math
import numbers

try:
    import torch
except ImportError as _e:  # pragma: no cover - the message is tested in a subprocess
    raise ImportError(
        f"flashtut.autograd is PyTorch's autograd function over the tutorial's kernels and "
        f"needs PyTorch: install it (pip install torch); the rest of flashtut (import "
        f"flashtut) works without it ({_e})") from None
from torch.autograd.function import once_differentiable

import flashtut as _ft

__all__ = ["FlashAttention", "attention", "forward_impl", "backward_impl", "BACKWARD_IMPL", "HEAD_DIMS",
           "DTYPES"]

BACKWARD_IMPL = "ch08"  #: the backward off Hopper (flashtut.backward_for: ch10 on Hopper)
HEAD_DIMS = (64, 128)   #: the head dimensions chapters 07-09 and 08 compute
DTYPES = (torch.bfloat16, torch.float16)  #: the dtypes chapters 07-09 and 08 compute in


@functools.lru_cache(maxsize=None)
def _capability(index):
    return torch.cuda.get_device_capability(index)


def forward_impl(device):
    """The forward the Function (and flashtut.ops) runs on ``device``: on a CUDA device,
    :func:`flashtut.forward_for` of its compute capability (asked of the driver once);
    elsewhere chapter 07's, whose checks then say what is wrong with the tensors."""
    device = torch.device(device)
    if device.type != "cuda":
        return "ch07"
    return _ft.forward_for(_capability(device.index if device.index is not None else torch.cuda.current_device()))


def backward_impl(device, contiguous):
    """The backward the Function (and flashtut.ops) runs on ``device`` for tensors that are
    all contiguous or not: :func:`flashtut.backward_for` of its compute capability; elsewhere
    :data:`BACKWARD_IMPL`, whose checks then say what is wrong with the tensors."""
    device = torch.device(device)
    if device.type != "cuda":
        return BACKWARD_IMPL
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _ft.backward_for(_capability(index), contiguous)


# ---- autocast, across PyTorch versions -------------------------------------------------------
# torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) are
# PyTorch 2.4's; before it the same took no device.

def _autocast_dtype():
    """The dtype CUDA autocast casts to when it is on here, else None."""
    try:
        enabled = torch.is_autocast_enabled("cuda")
    except TypeError:  # pragma: no cover - PyTorch < 2.4
        enabled = torch.is_autocast_enabled()
    if not enabled:
        return None
    try:
        return torch.get_autocast_dtype("cuda")
    except AttributeError:  # pragma: no cover - PyTorch < 2.4
        return torch.get_autocast_gpu_dtype()


# ---- the Function ------------------------------------------------------------------------------

class FlashAttention(torch.autograd.Function):
    """``FlashAttention.apply(q, k, v, causal, scale)``: o = softmax(scale·q·kᵀ)·v with
    chapter 09's forward and chapter 10's backward on Hopper (chapters 07 and 08 elsewhere).

    q, k, v as :func:`flashtut.forward` wants them (CUDA, ``[B, H, N, d]``, contiguous or a
    view it reads, 16-byte aligned, one of bf16/fp16, d 64 or 128); ``scale`` None for
    1/sqrt(d). Use
    :func:`attention`, which checks and prepares the inputs, rather than this directly.
    """

    # No torch.amp.custom_fwd/custom_bwd: they make the backward run in the forward's autocast
    # state, which matters to a backward that runs operations autocast casts (a matmul, say).
    # Neither half here runs one (a dtype cast, a copy, allocations and the library's call,
    # which takes the dtype it is given), and attention() does the casting autocast would;
    # what custom_bwd would add is a torch.autocast context entered and left on every
    # backward call (4 µs a call on the CPU machine of python/README.md). A Function that
    # added such an operation to either half would need the two decorators back.
    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        o, lse = _ft.forward(q, k, v, causal=causal, scale=scale, impl=forward_impl(q.device))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale = causal, scale
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        if not any(need):
            return None, None, None, None, None
        # The incoming gradient is whatever the graph above produced: often a strided view
        # (o.transpose(1, 2) before the output projection), sometimes an expanded scalar
        # (o.sum()), in the autocast dtype or not. The kernel wants o's dtype and layout.
        if do.dtype != o.dtype:
            do = do.to(o.dtype)
        do = _prepared(do)  # a view of the output projection's gradient: read in place
        contiguous = all(t.is_contiguous() for t in (q, k, v, o, do))
        dq, dk, dv = _ft.backward(q, k, v, o, lse, do, causal=ctx.causal, scale=ctx.scale,
                                  impl=backward_impl(q.device, contiguous))
        return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
                None, None)


# ---- the checks ----------------------------------------------------------------------------------

_NAMES = ("query", "key", "value")


def _check_arguments(attn_mask, dropout_p, is_causal, scale):
    """SDPA's arguments the kernels cannot honour (a mask, dropout) or that are not what
    they must be (is_causal, scale), refused with what to pass instead (flashtut.ops's
    attention checks the same)."""
    if attn_mask is not None:
        raise NotImplementedError(
            "attn_mask is not supported: the kernels know only the causal mask (pass "
            "attn_mask=None, with is_causal=True for causal attention), or use "
            "torch.nn.functional.scaled_dot_product_attention for any other mask")
    if dropout_p != 0.0:
        raise NotImplementedError(
            f"dropout_p={dropout_p} is not supported: the kernels have no dropout; pass "
            f"dropout_p=0.0 (or drop out the output instead)")
    if not isinstance(is_causal, (bool, int)):
        raise TypeError(f"is_causal must be True or False, got {type(is_causal).__name__}")
    if scale is not None:
        if isinstance(scale, (torch.Tensor, bool)) or not isinstance(scale, numbers.Real):
            raise TypeError(f"scale must be a Python number or None, got {type(scale).__name__}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a positive finite number (or None for "
                             f"1/sqrt(head_dim)), got {scale}")


def _check(tensors, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """Everything the kernels cannot do, refused here, before the library is loaded or
    called. Order: what the arguments are, what the call asks for, the shapes, the dtype,
    the head dimension, the device (so that each of these can be seen on CPU tensors)."""
    for name, t in zip(_NAMES, tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    _check_arguments(attn_mask, dropout_p, is_causal, scale)
    if enable_gqa:
        raise NotImplementedError(
            "enable_gqa is not supported here: chapters 07 and 08 need key and value with "
            "query's number of heads; call flashtut.attention, which takes grouped heads (and "
            "reads them unexpanded on Hopper), or repeat them first "
            "(key.repeat_interleave(hq // hk, dim=1)) and pass enable_gqa=False")
    q = tensors[0]
    if q.dim() != 4:
        raise ValueError(f"query has shape {tuple(q.shape)}: expected 4 dimensions, [batch, "
                         f"heads, seq_len, head_dim] (from [batch, seq_len, heads, head_dim] "
                         f"that is .transpose(1, 2))")
    for name, t in zip(_NAMES[1:], tensors[1:]):
        if t.shape != q.shape:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)} but query {tuple(q.shape)}: the kernels "
                f"need query, key and value of one shape [batch, heads, seq_len, head_dim] "
                f"(no other key length, no grouped heads)")
    for name, t in zip(_NAMES, tensors):
        if t.dtype not in DTYPES:
            raise TypeError(
                f"{name} is {t.dtype}: flashtut's attention (chapters 07 and 08, the tensor "
                f"cores) computes bf16 or fp16: call it under torch.autocast(\"cuda\", "
                f"dtype=torch.bfloat16) (CUDA tensors are cast there), or pass "
                f"{name}.bfloat16() (or {name}.half())")
    for name, t in zip(_NAMES[1:], tensors[1:]):
        if t.dtype != q.dtype:
            raise TypeError(f"{name} is {t.dtype} but query is {q.dtype}: give them one dtype "
                            f"(or call under torch.autocast(\"cuda\"), which casts all three)")
    d = q.shape[-1]
    if d not in HEAD_DIMS:
        raise ValueError(
            f"head_dim {d} is not supported: chapters 07 and 08 compute head_dim 64 or 128 "
            f"(choose heads so that width / heads is 64 or 128, or use "
            f"torch.nn.functional.scaled_dot_product_attention)")
    _check_device(tensors)


def _check_device(tensors):
    """On a CUDA device, all on one (the CPU tests stand the CPU in for it by lifting this)."""
    q = tensors[0]
    for name, t in zip(_NAMES, tensors):
        if t.device.type != "cuda":
            raise ValueError(f"{name} is on {t.device}: the kernels run on a CUDA device: "
                             f"pass {name}.cuda()")
    for name, t in zip(_NAMES[1:], tensors[1:]):
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but query on {q.device}: put them on "
                             f"the same device")


def _prepared(t):
    """A view the kernels read (flashtut.view_strides: a transposed view of a projection, or
    any contiguous tensor) as it is; anything else copied to contiguous, 16-byte aligned
    memory (gradients flow through the copy)."""
    if _ft.view_strides(t) is not None:
        return t
    t = t.contiguous()
    if t.data_ptr() % _ft.ALIGNMENT:  # a contiguous view starting inside an element row
        t = t.clone()
    return t


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              *, enable_gqa=False):
    """``torch.nn.functional.scaled_dot_product_attention``, computed by chapters 07 and 08.

    query, key, value: ``[batch, heads, seq_len, head_dim]`` CUDA tensors of one shape, bf16
    or fp16 (under ``torch.autocast("cuda")``, any floating dtype but float64, cast to the
    autocast dtype as SDPA's are), head_dim 64 or 128, any strides. ``is_causal``: key j
    visible to query i iff j <= i. ``scale``: None for 1/sqrt(head_dim). ``attn_mask``,
    ``dropout_p`` and ``enable_gqa`` exist only so that SDPA's calls fit: anything but their
    defaults raises :class:`NotImplementedError`.

    Returns o shaped like query, differentiable in query, key and value: contiguous, or, when
    query is a view whose heads lie inside its tokens (``x.view(B, N, H, d).transpose(1,
    2)``), a view of ``[B, N, H, d]`` memory, as SDPA's FlashAttention backend returns it.
    Views are read in place (no copy of q, k, v or of the incoming gradient); the gradients
    come back in the same layout as o.
    """
    tensors = (query, key, value)
    if all(isinstance(t, torch.Tensor) for t in tensors):
        cast = _autocast_dtype()
        # What autocast does to SDPA's floating CUDA inputs. In a model under autocast they
        # come from a Linear that autocast ran, already in its dtype: then no .to() (which
        # would return the same tensor, after a µs of dispatch).
        if cast is not None:
            tensors = tuple(t.to(cast) if t.dtype != cast and t.is_cuda and t.is_floating_point()
                            and t.dtype != torch.float64 else t for t in tensors)
    _check(tensors, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    q, k, v = (_prepared(t) for t in tensors)
    return FlashAttention.apply(q, k, v, bool(is_causal), None if scale is None else float(scale))
