"""The tutorial's attention as a Hugging Face transformers attention backend.

    import flashtut.integrations.transformers as ft_hf
    name = ft_hf.register()                       # "tutorial_attention"
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation=name,
                                                 dtype=torch.bfloat16).cuda()

:func:`register` puts :func:`attention_forward` in ``transformers.AttentionInterface`` and
transformers' SDPA mask builder (``sdpa_mask``) in ``transformers.AttentionMaskInterface``
under one name, so that a model built with ``attn_implementation=name`` calls the tutorial's
kernels (chapter 09's forward and chapter 10's backward on Hopper, 07's and 08's elsewhere; through
:func:`flashtut.attention`)
wherever it would call ``torch.nn.functional.scaled_dot_product_attention``, with the masks
the "sdpa" backend gets: None when the batch is unpadded and purely causal (transformers
then relies on ``is_causal``), a boolean ``[B, 1, N, N_kv]`` mask otherwise.

**The name must not contain "flash".** transformers (``is_flash_attention_requested`` in
``transformers/utils/generic.py``, used by ``PreTrainedModel._check_and_adjust_attn_implementation``
in ``modeling_utils.py``) treats every implementation whose name contains ``"flash"`` as a
flavour of Dao-AILab's flash attention: it remaps it to a model's
``_compatible_flash_implementations``, may try to fetch a kernel from the Hub
(``kernels-community/...``), requires ``_supports_flash_attn`` and builds the masks of
``flash_attention_2`` (unpadded sequences, not ``[B, 1, N, N_kv]`` masks). A name with a
``/`` is taken for a Hub kernel repository. Hence the default ``"tutorial_attention"``;
:func:`register` refuses names with ``"flash"`` or ``"/"``.

What the kernels compute, and what is refused (by :func:`attention_forward`, or by
:func:`flashtut.attention` with its own message):

- causal self-attention (decoders) and full attention (``is_causal=False``, or one query
  token while decoding with a cache: chapter 11's decode, through :func:`flashtut.attention`),
  grouped-query heads (``enable_gqa``), ``scaling``;
- ``attention_mask``: None, or a mask that is exactly the causal pattern (or exactly all
  visible): computed with ``is_causal``; or exactly the pattern of several new rows at the
  end of a longer cache (key j visible to query i iff j <= i + N_kv - N, as transformers
  builds it for speculative decoding's rows): computed as
  ``torch.nn.attention.bias.causal_lower_right``. Any other mask (padding, sliding windows,
  a static cache's unfilled rows) raises :class:`NotImplementedError`: use
  ``attn_implementation="sdpa"`` for padded batches. Looking at the mask's values reads
  them (a host synchronisation, a graph break under ``torch.compile``); transformers
  passes None for unpadded batches, where nothing is read;
- ``dropout > 0`` (a model in training mode with attention dropout): NotImplementedError;
- bf16/fp16 CUDA tensors, head_dim 64 or 128 (flashtut's TypeError/ValueError otherwise);
  ``softcap``, ``position_bias``, ``output_attentions`` (attention weights): refused.
"""

from flashtut.integrations import _check_name

__all__ = ["register", "attention_forward", "DEFAULT_NAME"]

DEFAULT_NAME = "tutorial_attention"
_INSTALL = ("flashtut.integrations.transformers needs Hugging Face transformers: "
            "pip install transformers")


def _transformers():
    try:
        import transformers
    except ImportError as e:
        raise ImportError(f"{_INSTALL} ({e})") from None
    return transformers


def register(name=DEFAULT_NAME):
    """Register the tutorial's attention with transformers under ``name`` and return it:
    ``AttentionInterface.register(name, attention_forward)`` and
    ``AttentionMaskInterface.register(name, sdpa_mask)`` (the masks the "sdpa" backend
    gets; without a mask function of its own, transformers would build no mask at all for
    the name, padding included). Then build or load a model with
    ``attn_implementation=name``, or switch one with ``model.set_attn_implementation(name)``.

    Raises ImportError (saying ``pip install transformers``) without transformers, and
    ValueError for a name transformers would misread (one with "flash" or "/": the module's
    docstring says why)."""
    _check_name(name, DEFAULT_NAME)
    if "flash" in name.lower():
        raise ValueError(
            f"{name!r} contains 'flash': transformers treats such names as Dao-AILab flash "
            f"attention (remapped, fetched from the Hub, given unpadded masks): choose "
            f"another, e.g. {DEFAULT_NAME!r}")
    if "/" in name or ":" in name:
        raise ValueError(f"{name!r} looks like a Hub kernel repository to transformers: "
                         f"choose a plain name, e.g. {DEFAULT_NAME!r}")
    transformers = _transformers()
    from transformers.masking_utils import sdpa_mask
    transformers.AttentionInterface.register(name, attention_forward)
    transformers.AttentionMaskInterface.register(name, sdpa_mask)
    return name


def _mask_kind(mask, q_len, kv_len):
    """'causal' when mask (boolean: True = visible; or additive float: 0 = visible) is
    exactly the top-left causal pattern (key j visible to query i iff j <= i), 'bottom-right'
    when it is the pattern of new rows at the end of a longer cache (iff j <= i + kv_len -
    q_len: a decode step's several rows, as speculative decoding verifies them), 'full' when
    everything is visible, else None. Reads the mask's values."""
    import torch
    if mask.dim() < 2 or tuple(mask.shape[-2:]) != (q_len, kv_len):
        return None
    if mask.dtype == torch.bool:
        visible = mask
    else:
        visible = mask == 0
        hidden = mask <= torch.finfo(mask.dtype).min / 2
        if not bool((visible | hidden).all()):  # a bias, not a mask
            return None
    if bool(visible.all()):
        return "full"
    ones = torch.ones(q_len, kv_len, dtype=torch.bool, device=mask.device)
    if bool((visible == ones.tril()).all()):
        return "causal"
    if kv_len > q_len and bool((visible == ones.tril(kv_len - q_len)).all()):
        return "bottom-right"
    return None


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, **kwargs):
    """What transformers calls in place of its ``sdpa_attention_forward`` (same signature):
    query ``[B, H, N, d]``, key and value ``[B, H_kv, N_kv, d]`` (``H_kv`` a divisor of
    ``H``); returns ``(output [B, N, H, d] contiguous, None)`` as transformers expects.
    Computed by :func:`flashtut.attention` (looked up at each call)."""
    import flashtut
    if kwargs.get("softcap") is not None:
        raise NotImplementedError("flashtut's attention has no softcap: use "
                                  "attn_implementation=\"eager\" for this model")
    if kwargs.get("position_bias") is not None:
        raise NotImplementedError("flashtut's attention adds no position bias: use "
                                  "attn_implementation=\"sdpa\" for this model")
    if kwargs.get("output_attentions", False):
        raise NotImplementedError("flashtut's attention never forms the attention weights "
                                  "(output_attentions=True): use attn_implementation=\"eager\"")
    if dropout and dropout > 0:
        raise NotImplementedError(
            f"attention dropout {dropout} (a model in training mode with attention dropout): "
            f"flashtut's kernels have no dropout: set the config's attention dropout to 0 "
            f"(e.g. attention_dropout=0.0, or attn_pdrop=0.0 for GPT-2), call model.eval(), "
            f"or use attn_implementation=\"sdpa\"")
    q_len, kv_len = query.shape[2], key.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    rows_at_the_end = None  # the bottom-right mask, as SDPA's object for it
    if attention_mask is not None:
        kind = _mask_kind(attention_mask, q_len, kv_len)
        if kind is None:
            raise NotImplementedError(
                f"flashtut's attention computes the causal mask (aligned top-left, or "
                f"bottom-right for new rows at the end of a cache) or no mask, and got an "
                f"attention_mask of shape {tuple(attention_mask.shape)} that is none of them "
                f"(padding, a sliding window, a static cache's unfilled rows): use "
                f"attn_implementation=\"sdpa\" for padded batches")
        if kind == "bottom-right":  # new rows at the end of the cache: the decode's alignment
            from torch.nn.attention.bias import causal_lower_right
            rows_at_the_end = causal_lower_right(q_len, kv_len)
        causal = kind == "causal"
    # As transformers' sdpa_attention_forward: one query token sees every key (decoding).
    causal = bool(causal) and q_len > 1
    if causal and attention_mask is None and kv_len > q_len:
        # a prefill into an empty static cache: the keys past the queries are padding
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    enable_gqa = key.shape[1] != query.shape[1]
    out = flashtut.attention(query, key, value, attn_mask=rows_at_the_end, is_causal=causal,
                             scale=scaling, enable_gqa=enable_gqa)
    return out.transpose(1, 2).contiguous(), None
