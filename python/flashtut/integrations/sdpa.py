"""The tutorial's kernels behind PyTorch's own ``scaled_dot_product_attention``.

    import torch, flashtut.integrations.sdpa as ft_sdpa
    from torch.nn.attention import activate_flash_attention_impl, sdpa_kernel, SDPBackend
    ft_sdpa.register()                            # offers "flashtut"; activates nothing
    activate_flash_attention_impl("flashtut")     # SDPA's flash backend: ch09+ch10 on Hopper, else ch07+ch08
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION): # (or let SDPA pick flash, as it prefers)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.nn.attention.restore_flash_attention_impl()   # back to PyTorch's FA2

PyTorch 2.10 and later let a library replace the kernels of SDPA's flash backend
(``torch.nn.attention.register_flash_attention_impl``, which FA3/FA4 use): :func:`register`
offers a function that, when the user activates it, registers two CUDA kernels on the
``aten`` operators ``_scaled_dot_product_flash_attention`` (chapter 09's forward on Hopper, 07's elsewhere,
chapter 11's decode for a decode step, through ``flashtut::attention_forward``) and ``_scaled_dot_product_flash_attention_backward``
(chapter 10's backward on Hopper, 08's elsewhere, through ``flashtut::attention_backward``).
PyTorch's own selection logic still decides when the flash backend runs (bf16/fp16 CUDA
tensors, no ``attn_mask``, sm80+, ...); once it does, a call the tutorial's kernels cannot
compute (head_dim other than 64 and 128, dropout, off Hopper the gradient with two lengths)
raises NotImplementedError saying so, as PyTorch's FA4 route does: pick another backend with
``sdpa_kernel`` or restore FA2. Grouped-query heads (``enable_gqa=True``) reach both kernels
as they are (off Hopper the backward operator expands key and value for chapter 08 and sums
their gradients back). The log-sum-exp returned is the
tutorial's (float32 ``[B, H, N]``), consumed only by its own backward.

Imports PyTorch only when a function is called.
"""

from flashtut.integrations import _check_name

__all__ = ["register", "available", "DEFAULT_NAME"]

DEFAULT_NAME = "flashtut"


def available():
    """True when the installed PyTorch has ``torch.nn.attention.register_flash_attention_impl``."""
    import torch.nn.attention as attention
    return hasattr(attention, "register_flash_attention_impl")


def register(name=DEFAULT_NAME):
    """Offer the tutorial's kernels to ``torch.nn.attention.activate_flash_attention_impl``
    under ``name`` and return it; nothing changes until the user activates it (PyTorch asks
    providers not to activate on import). Raises ValueError for a name that is not a
    non-empty string or is PyTorch's own ("FA3", "FA4"), RuntimeError on a PyTorch without
    the registry (before 2.10)."""
    _check_name(name, DEFAULT_NAME)
    if name in ("FA3", "FA4"):
        raise ValueError(f"{name!r} is PyTorch's own: choose another name")
    import torch
    import torch.nn.attention as attention
    if not available():
        raise RuntimeError(
            f"PyTorch {torch.__version__} has no torch.nn.attention.register_flash_attention_impl "
            f"(PyTorch 2.10 and later): use flashtut.attention, or upgrade PyTorch")
    attention.register_flash_attention_impl(name, register_fn=_activate)
    return name


class _Handle:
    """What the registry keeps while the kernels are active; remove() unregisters them."""

    def __init__(self, library):
        self.library = library

    def remove(self):
        if self.library is not None:
            self.library._destroy()
            self.library = None


def _activate():
    from torch.library import Library
    import flashtut.ops  # noqa: F401  (the flashtut:: operators)
    lib = Library("aten", "IMPL", "CUDA")
    lib.impl("_scaled_dot_product_flash_attention", _sdpa_flash_forward, "CUDA")
    lib.impl("_scaled_dot_product_flash_attention_backward", _sdpa_flash_backward, "CUDA")
    return _Handle(lib)


def _refuse(what, detail):
    raise NotImplementedError(
        f"SDPA's flash backend is flashtut's (activate_flash_attention_impl), whose {what} "
        f"{detail}: call torch.nn.attention.restore_flash_attention_impl() or choose another "
        f"backend with torch.nn.attention.sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)")


def _check(query, dropout_p):
    from flashtut.autograd import HEAD_DIMS, DTYPES
    if dropout_p != 0.0:
        _refuse("kernels", f"have no dropout (dropout_p={dropout_p})")
    if query.shape[-1] not in HEAD_DIMS:
        _refuse("kernels", f"compute head_dim 64 or 128, not {query.shape[-1]}")
    if query.dtype not in DTYPES:
        _refuse("kernels", f"compute bf16 or fp16, not {query.dtype}")


def _matching(like, t):
    """t in the layout PyTorch's meta function promises (the query's dimension order)."""
    from torch.nn.attention._utils import _empty_with_matching_layout
    want = _empty_with_matching_layout(like, tuple(like.shape))
    if want.stride() == t.stride():
        return t
    want.copy_(t)
    return want


def _sdpa_flash_forward(query, key, value, dropout_p=0.0, is_causal=False,
                        return_debug_mask=False, *, scale=None):
    import torch
    import flashtut as ft
    from flashtut.ops import _ready
    _check(query, dropout_p)
    if return_debug_mask:
        _refuse("kernels", "return no debug mask")
    q, k, v = (_ready(t) for t in (query, key, value))
    o, lse = torch.ops.flashtut.attention_forward(q, k, v, bool(is_causal), scale,
                                                  ft.CAUSAL_TOP_LEFT)
    dev = query.device
    return (_matching(query, o), lse, None, None, query.shape[2], key.shape[2],
            torch.zeros((2,), dtype=torch.uint64, device=dev),
            torch.zeros((), dtype=torch.uint64, device=dev),
            torch.empty(0, dtype=query.dtype, device=dev))


def _sdpa_flash_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k,
                         max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *,
                         scale=None):
    import torch
    import flashtut as ft
    from flashtut.ops import _ready, backward_computes
    _check(query, dropout_p)
    if key.shape[2] != query.shape[2] and not backward_computes(query.device).lengths:
        _refuse("backward on this GPU (chapter 08's; chapter 10's on Hopper computes two lengths)",
                f"takes one length, not {query.shape[2]} queries and {key.shape[2]} keys")
    if grad_out.dtype != out.dtype:
        grad_out = grad_out.to(out.dtype)
    # Grouped heads as they are: the operator's backward sums dK and dV over each group
    # (chapter 10 in the kernel; for chapter 08 it expands key and value and sums back).
    dq, dk, dv = torch.ops.flashtut.attention_backward(
        *(_ready(t) for t in (grad_out, query, key, value, out)), logsumexp, bool(is_causal), scale,
        ft.CAUSAL_TOP_LEFT)
    return _matching(query, dq), _matching(key, dk), _matching(value, dv)
