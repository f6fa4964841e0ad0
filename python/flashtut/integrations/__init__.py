"""Where users already are: the tutorial's attention behind other libraries' switches.

- :mod:`flashtut.integrations.transformers`: ``register()`` makes it a Hugging Face
  transformers attention backend (``attn_implementation="tutorial_attention"``);
- :mod:`flashtut.integrations.sdpa`: ``register()`` offers it to PyTorch's
  ``torch.nn.attention.activate_flash_attention_impl`` (PyTorch >= 2.10), so that
  ``torch.nn.functional.scaled_dot_product_attention``'s flash backend runs chapters 07/08.

Importing this package, or either module, imports neither PyTorch nor transformers: they
are imported when a function is called (docs/use_in_your_model.md).
"""
__all__ = ["transformers", "sdpa"]


def _check_name(name, example):
    """A registration name as both modules' register() take it: a non-empty str, else a
    ValueError saying so (each module then refuses the names its library would misread)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string such as {example!r}, got {name!r}")
