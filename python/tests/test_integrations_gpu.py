#!/usr/bin/env python3
"""GPU test of the transformers backend (ctest python_integrations_gpu): a few training
steps of tiny random-weight Llama (MHA and GQA), Qwen2 (GQA) and GPT-2 in bf16, with
attn_implementation="tutorial_attention" (chapters 07 and 08) against the same model with
transformers' "sdpa": the losses agree within bf16 noise, and the gradients of the first
step are as close to "sdpa"'s as those of the bf16 "eager" backend are (times a margin);
and a prefill then 13 decode steps through the KV cache (12 of one token, one of four;
chapter 11's decode), whose logits are as close to "sdpa"'s as "eager"'s are (times the same
margin).
Exit 77 (skipped, saying why) without PyTorch, transformers or a CUDA GPU.

  python3 python/tests/test_integrations_gpu.py [-v]
"""
import copy
import sys
import unittest
import unittest.mock

try:
    import torch
except ImportError:
    print("test_integrations_gpu: skipped: PyTorch is not installed (pip install torch)")
    sys.exit(77)
try:
    import transformers
except ImportError:
    print("test_integrations_gpu: skipped: transformers is not installed (pip install transformers)")
    sys.exit(77)
if not torch.cuda.is_available():
    print("test_integrations_gpu: skipped: no CUDA GPU")
    sys.exit(77)

import flashtut.integrations.transformers as ft_hf
from test_integrations import cached_step  # noqa: E402 (this folder: the CPU test's helper)

NAME = ft_hf.register()
STEPS = 4


def configs():
    small = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                 num_attention_heads=4, max_position_embeddings=512, attention_dropout=0.0)
    return {  # head_dim 64 everywhere: what chapters 07 and 08 compute
        "llama_mha": transformers.LlamaConfig(**small, num_key_value_heads=4),
        "llama_gqa": transformers.LlamaConfig(**small, num_key_value_heads=2),
        "qwen2_gqa": transformers.Qwen2Config(**small, num_key_value_heads=1),
        "gpt2": transformers.GPT2Config(vocab_size=512, n_embd=256, n_layer=2, n_head=4,
                                        n_positions=512, attn_pdrop=0.0, resid_pdrop=0.0,
                                        embd_pdrop=0.0, bos_token_id=0, eos_token_id=0),
    }


def train(config, impl, state, ids):
    """STEPS steps of SGD in bf16 from state; the losses and the first step's gradients."""
    model = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                          attn_implementation=impl)
    model.load_state_dict(state)
    model = model.to("cuda", torch.bfloat16).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    losses, grads = [], None
    for _ in range(STEPS):
        opt.zero_grad()
        loss = model(ids, labels=ids).loss
        loss.backward()
        if grads is None:
            grads = {n: p.grad.float().clone() for n, p in model.named_parameters()}
        losses.append(loss.item())
        opt.step()
    return losses, grads


def distance(a, b):
    return max(((a[n] - b[n]).norm() / (b[n].norm() + 1e-12)).item() for n in b)


class Training(unittest.TestCase):
    def test_training_steps_match_sdpa(self):
        ids = torch.randint(0, 512, (4, 256), device="cuda",
                            generator=torch.Generator("cuda").manual_seed(0))
        for label, config in configs().items():
            with self.subTest(model=label):
                torch.manual_seed(0)
                state = transformers.AutoModelForCausalLM.from_config(
                    copy.deepcopy(config)).state_dict()
                want, g_sdpa = train(config, "sdpa", state, ids)
                got, g_ours = train(config, NAME, state, ids)
                _, g_eager = train(config, "eager", state, ids)
                for a, b in zip(got, want):  # bf16 noise on a loss of ~6
                    self.assertLess(abs(a - b), 2e-2 * max(1.0, abs(b)), (label, got, want))
                ours, eager = distance(g_ours, g_sdpa), distance(g_eager, g_sdpa)
                print(f"{label}: losses {got} vs sdpa {want}; gradient distance to sdpa: "
                      f"ours {ours:.3g}, eager {eager:.3g}")
                self.assertLessEqual(ours, 2 * eager + 1e-2, label)


def decode_logits(config, impl, state, ids, bounds):
    """The logits of ids fed through the KV cache in the chunks bounds names ((0, prompt) the
    prefill, then a token or a few a step: the same tokens for every backend), float32."""
    model = transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config),
                                                          attn_implementation=impl)
    model.load_state_dict(state)
    model = model.to("cuda", torch.bfloat16).eval()
    logits, cache = [], None
    with torch.no_grad():
        for a, b in bounds:
            step, cache = cached_step(model, ids[:, a:b], cache)
            logits.append(step.float())
    return torch.cat(logits, dim=1)


class Decoding(unittest.TestCase):
    def test_decode_steps_through_the_cache_match_sdpa(self):
        # A generation loop's steps: one new token against the cache, then four at once (a
        # bottom-right mask, passed on as causal_lower_right), which flashtut.attention hands
        # to chapter 11's decode (a spy on the forward the operator calls).
        import flashtut
        ids = torch.randint(0, 512, (2, 80), device="cuda",
                            generator=torch.Generator("cuda").manual_seed(1))
        bounds = [(0, 64)] + [(t, t + 1) for t in range(64, 76)] + [(76, 80)]
        impls, forward = [], flashtut.forward

        def spy(*args, impl, **kw):
            impls.append(impl)
            return forward(*args, impl=impl, **kw)

        for label, config in configs().items():
            with self.subTest(model=label):
                torch.manual_seed(0)
                state = transformers.AutoModelForCausalLM.from_config(
                    copy.deepcopy(config)).state_dict()
                want = decode_logits(config, "sdpa", state, ids, bounds)
                eager = decode_logits(config, "eager", state, ids, bounds)
                impls.clear()
                with unittest.mock.patch.object(flashtut, "forward", spy):
                    got = decode_logits(config, NAME, state, ids, bounds)
                self.assertEqual(impls.count(flashtut.DECODE_IMPL), 13 * config.num_hidden_layers,
                                 label)  # the 13 decode steps, each layer
                ours = ((got - want).norm() / want.norm()).item()
                theirs = ((eager - want).norm() / want.norm()).item()
                print(f"{label}: decode logits' distance to sdpa: ours {ours:.3g}, eager {theirs:.3g}")
                self.assertLessEqual(ours, 2 * theirs + 1e-2, label)


if __name__ == "__main__":
    unittest.main()
