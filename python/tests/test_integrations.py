#!/usr/bin/env python3
"""CPU tests of flashtut.integrations (ctest python_integrations): the Hugging Face
transformers backend and the PyTorch SDPA registration, without a GPU.

- always: the modules import without PyTorch or transformers being imported, and
  register() says "pip install transformers" when transformers is missing;
- with PyTorch: the SDPA flash-impl registration (register, activate, restore);
- with transformers (skipped, saying so, without it: CI does not install it): tiny
  random-weight Llama (MHA and GQA), GPT-2 and Qwen2 built with
  attn_implementation="tutorial_attention" call flashtut.attention with the right
  arguments and give exactly the logits of attn_implementation="sdpa" when
  flashtut.attention is patched to call torch's scaled_dot_product_attention; padding
  masks and dropout in training are refused with their messages; CPU float32 tensors reach
  flashtut's own dtype check.

Exit 77 (skipped) only when every case was skipped.

  python3 python/tests/test_integrations.py [-v]
"""
import copy
import inspect
import os
import subprocess
import sys
import unittest
from unittest import mock

try:
    import torch
except ImportError:
    torch = None
try:
    import transformers
except ImportError:
    transformers = None

import flashtut
import flashtut.integrations.transformers as ft_hf

NAME = ft_hf.DEFAULT_NAME
NO_TORCH = "PyTorch is not installed (pip install torch)"
NO_HF = ("transformers is not installed: its cases are skipped (pip install transformers "
         "to run them)")


def _run(code):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


class WithoutTransformers(unittest.TestCase):
    def test_imports_import_neither_torch_nor_transformers(self):
        r = _run("import sys; import flashtut.integrations.transformers, "
                 "flashtut.integrations.sdpa; "
                 "print('torch' in sys.modules, 'transformers' in sys.modules)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", "False"])

    def test_register_says_pip_install_transformers(self):
        r = _run("import sys; sys.modules['transformers'] = None\n"
                 "import flashtut.integrations.transformers as t\n"
                 "try:\n    t.register()\nexcept ImportError as e:\n    print('IE', e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("IE", r.stdout)
        self.assertIn("pip install transformers", r.stdout)

    def test_names_with_flash_are_refused(self):
        for bad in ("flashtut", "my_flash_attention", "org/repo"):
            with self.assertRaises(ValueError) as cm:
                ft_hf.register(bad)
            self.assertIn(NAME, str(cm.exception))

    def test_both_registers_refuse_a_name_that_is_no_string(self):
        # Checked before PyTorch or transformers is imported (neither is needed here).
        import flashtut.integrations.sdpa as ft_sdpa
        for register, example in ((ft_hf.register, NAME), (ft_sdpa.register, ft_sdpa.DEFAULT_NAME)):
            for bad in ("", None, 123):
                with self.subTest(register=register.__module__, name=bad):
                    with self.assertRaises(ValueError) as cm:
                        register(bad)
                    self.assertEqual(str(cm.exception), f"name must be a non-empty string such "
                                                        f"as {example!r}, got {bad!r}")
        with self.assertRaisesRegex(ValueError, "'FA4' is PyTorch's own: choose another name"):
            ft_sdpa.register("FA4")


@unittest.skipIf(torch is None, NO_TORCH)
class SdpaRegistry(unittest.TestCase):
    def test_register_activate_restore(self):
        import flashtut.integrations.sdpa as ft_sdpa
        import torch.nn.attention as attention
        if not ft_sdpa.available():
            with self.assertRaisesRegex(RuntimeError, "register_flash_attention_impl"):
                ft_sdpa.register()
            return
        self.assertEqual(ft_sdpa.register(), "flashtut")
        self.assertIn("flashtut", attention.list_flash_attention_impls())
        self.assertIsNone(attention.current_flash_attention_impl())  # not activated on register
        attention.activate_flash_attention_impl("flashtut")
        try:
            self.assertEqual(attention.current_flash_attention_impl(), "flashtut")
        finally:
            attention.restore_flash_attention_impl()
        self.assertIsNone(attention.current_flash_attention_impl())


def _sdpa_reference(calls):
    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                  scale=None, *, enable_gqa=False):
        calls.append(dict(shape=(tuple(query.shape), tuple(key.shape)), attn_mask=attn_mask,
                          dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                          enable_gqa=enable_gqa))
        return torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
            scale=scale, enable_gqa=enable_gqa)
    return attention


def cached_step(model, ids, cache):
    """model(ids) through the KV cache (None: a new one); its logits and the cache after. The
    cache's argument and output are named past_key_values, or cache in later transformers 5."""
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    out = model(ids, use_cache=True, **({} if cache is None else {name: cache}))
    return out.logits, getattr(out, name)


def _configs():
    small = dict(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, max_position_embeddings=64)
    return {
        "llama_mha": transformers.LlamaConfig(**small, num_key_value_heads=4),
        "llama_gqa": transformers.LlamaConfig(**small, num_key_value_heads=2),
        "qwen2_gqa": transformers.Qwen2Config(**small, num_key_value_heads=1),
        "gpt2": transformers.GPT2Config(vocab_size=101, n_embd=64, n_layer=2, n_head=4,
                                        n_positions=64, bos_token_id=0, eos_token_id=0),
    }


def _pair(config, name=NAME):
    """The same random weights under "sdpa" and under name, in eval mode."""
    torch.manual_seed(0)  # (each its own config: from_config sets _attn_implementation on it)
    ref = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                        attn_implementation="sdpa")
    ours = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                         attn_implementation=name)
    assert ref.config._attn_implementation == "sdpa", ref.config._attn_implementation
    assert ours.config._attn_implementation == name, ours.config._attn_implementation
    ours.load_state_dict(ref.state_dict())
    return ref.eval(), ours.eval()


@unittest.skipIf(torch is None, NO_TORCH)
@unittest.skipIf(transformers is None, NO_HF)
class TransformersBackend(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ft_hf.register()

    def test_registered_under_its_name(self):
        self.assertIs(transformers.AttentionInterface._global_mapping[NAME], ft_hf.attention_forward)
        from transformers.masking_utils import sdpa_mask
        self.assertIs(transformers.AttentionMaskInterface._global_mapping[NAME], sdpa_mask)

    def test_models_match_sdpa_exactly(self):
        ids = torch.randint(0, 101, (2, 24), generator=torch.Generator().manual_seed(1))
        for label, config in _configs().items():
            with self.subTest(model=label):
                ref, ours = _pair(config)
                calls = []
                with mock.patch.object(flashtut, "attention", _sdpa_reference(calls)), \
                        torch.no_grad():
                    got = ours(ids).logits
                    want = ref(ids).logits
                    got_masked = ours(ids, attention_mask=torch.ones_like(ids)).logits
                self.assertTrue(torch.equal(got, want), f"{label}: logits differ by "
                                f"{(got - want).abs().max().item()}")
                self.assertTrue(torch.equal(got_masked, want))
                layers = config.num_hidden_layers
                self.assertEqual(len(calls), 2 * layers)
                heads = config.num_attention_heads
                kv = getattr(config, "num_key_value_heads", None) or heads
                head_dim = config.hidden_size // heads
                for c in calls:
                    self.assertEqual(c["shape"], ((2, heads, 24, head_dim), (2, kv, 24, head_dim)))
                    self.assertIsNone(c["attn_mask"])
                    self.assertEqual(c["dropout_p"], 0.0)
                    self.assertIs(c["is_causal"], True)
                    self.assertAlmostEqual(c["scale"], head_dim ** -0.5)
                    self.assertEqual(c["enable_gqa"], kv != heads)

    def test_gradients_match_sdpa_exactly(self):
        config = _configs()["llama_gqa"]
        ref, ours = _pair(config)
        ids = torch.randint(0, 101, (2, 16), generator=torch.Generator().manual_seed(2))
        with mock.patch.object(flashtut, "attention", _sdpa_reference([])):
            ours(ids, labels=ids).loss.backward()
        ref(ids, labels=ids).loss.backward()
        for (n, a), (_, b) in zip(ours.named_parameters(), ref.named_parameters()):
            self.assertTrue(torch.equal(a.grad, b.grad), n)

    def test_decode_steps_through_the_cache_match_sdpa_exactly(self):
        # A prefill, one new token at a time, then four at once (the rows speculative decoding
        # verifies: transformers gives them a bottom-right mask, which the backend passes on
        # as causal_lower_right), every step through the model's KV cache.
        from torch.nn.attention.bias import CausalBias, CausalVariant
        ids = torch.randint(0, 101, (2, 30), generator=torch.Generator().manual_seed(3))
        for label, config in _configs().items():
            with self.subTest(model=label):
                ref, ours = _pair(config)
                calls = []
                logits = {}
                with mock.patch.object(flashtut, "attention", _sdpa_reference(calls)), torch.no_grad():
                    for name, model in (("ours", ours), ("sdpa", ref)):
                        cache, got = None, []
                        for a, b in ((0, 20), (20, 21), (21, 22), (22, 26), (26, 30)):
                            step, cache = cached_step(model, ids[:, a:b], cache)
                            got.append(step)
                        logits[name] = got
                for step, (a, b) in enumerate(zip(logits["ours"], logits["sdpa"])):
                    self.assertTrue(torch.equal(a, b), f"{label}, step {step}: logits differ by "
                                    f"{(a - b).abs().max().item()}")
                layers = config.num_hidden_layers
                self.assertEqual(len(calls), 5 * layers)
                one_row, four_rows = calls[layers], calls[3 * layers]
                self.assertEqual((one_row["shape"][0][2], one_row["shape"][1][2]), (1, 21))
                self.assertEqual((one_row["is_causal"], one_row["attn_mask"]), (False, None))
                self.assertEqual((four_rows["shape"][0][2], four_rows["shape"][1][2]), (4, 26))
                self.assertIsInstance(four_rows["attn_mask"], CausalBias)
                self.assertEqual(four_rows["attn_mask"].variant, CausalVariant.LOWER_RIGHT)
                self.assertIs(four_rows["is_causal"], False)

    def test_a_padding_mask_is_refused(self):
        ref, ours = _pair(_configs()["llama_gqa"])
        ids = torch.randint(0, 101, (2, 12))
        mask = torch.ones_like(ids)
        mask[0, :4] = 0  # left padding
        with mock.patch.object(flashtut, "attention", _sdpa_reference([])), \
                self.assertRaises(NotImplementedError) as cm:
            ours(ids, attention_mask=mask)
        self.assertIn('attn_implementation="sdpa" for padded batches', str(cm.exception))

    def test_dropout_in_training_is_refused(self):
        config = transformers.GPT2Config(vocab_size=101, n_embd=64, n_layer=1, n_head=4,
                                         attn_pdrop=0.1, bos_token_id=0, eos_token_id=0)
        _, ours = _pair(config)
        ours.train()
        with mock.patch.object(flashtut, "attention", _sdpa_reference([])), \
                self.assertRaisesRegex(NotImplementedError, "dropout"):
            ours(torch.randint(0, 101, (1, 8)))
        ours.eval()  # dropout is 0 in eval mode: runs
        with mock.patch.object(flashtut, "attention", _sdpa_reference([])):
            ours(torch.randint(0, 101, (1, 8)))

    def test_mask_kinds(self):
        causal = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
        self.assertEqual(ft_hf._mask_kind(causal, 5, 5), "causal")
        self.assertEqual(ft_hf._mask_kind(torch.ones(1, 1, 5, 5, dtype=torch.bool), 5, 5), "full")
        additive = torch.zeros(1, 1, 5, 5).masked_fill(~causal, torch.finfo(torch.float32).min)
        self.assertEqual(ft_hf._mask_kind(additive, 5, 5), "causal")
        padded = causal.clone()
        padded[..., 0] = False
        self.assertIsNone(ft_hf._mask_kind(padded, 5, 5))
        self.assertIsNone(ft_hf._mask_kind(torch.randn(1, 1, 5, 5), 5, 5))  # a bias
        # four new rows at the end of a cache of 9: row i sees keys up to i + 5
        rows = torch.ones(4, 9, dtype=torch.bool).tril(5)[None, None]
        self.assertEqual(ft_hf._mask_kind(rows, 4, 9), "bottom-right")
        self.assertIsNone(ft_hf._mask_kind(torch.ones(4, 9, dtype=torch.bool).tril(4)[None, None], 4, 9))
        static = torch.zeros(4, 12, dtype=torch.bool)
        static[:, :9] = rows[0, 0]  # a static cache's unfilled rows hidden: refused
        self.assertIsNone(ft_hf._mask_kind(static[None, None], 4, 12))

    def test_cpu_float32_reaches_flashtuts_own_check(self):
        _, ours = _pair(_configs()["llama_mha"])
        with self.assertRaises(TypeError) as cm:
            ours(torch.randint(0, 101, (1, 8)))
        self.assertIn("bf16 or fp16", str(cm.exception))

    def test_unsupported_head_dim_reaches_flashtuts_own_check(self):
        _, ours = _pair(_configs()["llama_mha"])  # head_dim 16
        with self.assertRaises(ValueError) as cm:
            ours.bfloat16()(torch.randint(0, 101, (1, 8)))
        self.assertIn("head_dim 16 is not supported", str(cm.exception))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2 if "-v" in sys.argv else 1).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun and len(result.skipped) == result.testsRun:
        print("test_integrations: skipped: every case was skipped (see above)")
        sys.exit(77)
    if transformers is None:
        print(f"test_integrations: {NO_HF}")
