#!/usr/bin/env python3
"""Training-step time of Hugging Face models with the tutorial's attention beside PyTorch's,
in one process: what docs/use_in_your_model.md's table reports.

  python3 scripts/hf_step_time.py --out DIR [--models llama_gqa gpt2] [--steps 10]
  python3 scripts/hf_step_time.py --list          the plan, without PyTorch or a GPU

For each model (random weights, bf16, AdamW) and each attention:
  tutorial   attn_implementation="tutorial_attention" (flashtut.integrations.transformers:
             chapter 09's forward on Hopper, chapter 07's elsewhere; chapter 08's backward)
  torch_flash, torch_cudnn
             attn_implementation="sdpa" inside sdpa_kernel(FLASH_ATTENTION) or
             sdpa_kernel(CUDNN_ATTENTION): PyTorch's FlashAttention-2 and cuDNN backends
one training step (forward, loss, backward, optimizer step) is timed with CUDA events after
warm-up steps, the median of --steps; every attention starts from the same weights and
batch. Writes DIR/hf_step_time.csv: model, attention, batch, seq_len, heads, heads_kv,
head_dim, layers, ms, ms_min, ms_max, steps, first_loss, gpu. Exit 77 (with the reason)
without PyTorch, transformers or a CUDA GPU, unless --list.
"""
import argparse
import csv
import os
import statistics
import sys

# The models: transformers config class, its arguments (random weights), and the batch.
# Sized so that attention is a real share of the step (long sequences, d = 64 and 128).
MODELS = {
    "llama_mha": ("LlamaConfig", dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                                      num_attention_heads=16, num_key_value_heads=16), 4, 2048),
    "llama_gqa": ("LlamaConfig", dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                                      num_attention_heads=16, num_key_value_heads=4), 4, 2048),
    "qwen2_gqa": ("Qwen2Config", dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                                      num_attention_heads=16, num_key_value_heads=2), 4, 2048),
    "gpt2": ("GPT2Config", dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024), 8, 1024),
}
ATTENTIONS = ["tutorial", "torch_flash", "torch_cudnn"]
COLUMNS = ["model", "attention", "batch", "seq_len", "heads", "heads_kv", "head_dim", "layers",
           "ms", "ms_min", "ms_max", "steps", "first_loss", "gpu"]
VOCAB = 32000


def shape_of(name):
    """(batch, seq_len, heads, heads_kv, head_dim, layers) of a model of MODELS."""
    _, kw, batch, n = MODELS[name]
    heads = kw.get("num_attention_heads", kw.get("n_head"))
    hidden = kw.get("hidden_size", kw.get("n_embd"))
    return (batch, n, heads, kw.get("num_key_value_heads", heads), hidden // heads,
            kw.get("num_hidden_layers", kw.get("n_layer")))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", metavar="DIR", help="where hf_step_time.csv goes (required unless --list)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--attentions", nargs="+", default=ATTENTIONS, choices=ATTENTIONS)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        ap.error("--steps must be positive and --warmup not negative")
    if not args.list and not args.out:
        ap.error("--out DIR is required (or --list)")
    return args


def plan(args):
    """[(model, attention)] in the order they run."""
    return [(m, a) for m in args.models for a in args.attentions]


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)


def measure(args, torch, transformers):
    import flashtut.integrations.transformers as ft_hf
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tutorial = ft_hf.register()
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for name in args.models:
        cls, kw, batch, n = MODELS[name]
        config = getattr(transformers, cls)(vocab_size=VOCAB, attention_dropout=0.0, **kw) \
            if cls != "GPT2Config" else transformers.GPT2Config(vocab_size=VOCAB, attn_pdrop=0.0,
                                                                resid_pdrop=0.0, embd_pdrop=0.0,
                                                                bos_token_id=0, eos_token_id=0, **kw)
        torch.manual_seed(0)
        state = transformers.AutoModelForCausalLM.from_config(config).state_dict()
        ids = torch.randint(0, VOCAB, (batch, n), device="cuda")
        for attention in args.attentions:
            impl = tutorial if attention == "tutorial" else "sdpa"
            backend = {"torch_flash": SDPBackend.FLASH_ATTENTION,
                       "torch_cudnn": SDPBackend.CUDNN_ATTENTION}.get(attention)
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=impl)
            model.load_state_dict(state)
            model = model.to("cuda", torch.bfloat16).train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def step():
                opt.zero_grad(set_to_none=True)
                if backend is None:
                    loss = model(ids, labels=ids).loss
                else:
                    with sdpa_kernel(backend):
                        loss = model(ids, labels=ids).loss
                loss.backward()
                opt.step()
                return loss

            first = float(step())
            for _ in range(args.warmup):
                step()
            times = []
            for _ in range(args.steps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            b, seq, h, hkv, d, layers = shape_of(name)
            rows.append({"model": name, "attention": attention, "batch": b, "seq_len": seq, "heads": h,
                         "heads_kv": hkv, "head_dim": d, "layers": layers,
                         "ms": statistics.median(times), "ms_min": min(times), "ms_max": max(times),
                         "steps": len(times), "first_loss": first, "gpu": gpu})
            print(f"{name:10s} {attention:12s} {rows[-1]['ms']:9.2f} ms/step "
                  f"(min {min(times):.2f}, max {max(times):.2f}), first loss {first:.4f}", flush=True)
            del model, opt
            torch.cuda.empty_cache()
    return rows


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for m, a in plan(args):
            b, n, h, hkv, d, layers = shape_of(m)
            print(f"{m:10s} {a:12s} B={b} N={n} H={h} H_kv={hkv} d={d} layers={layers}")
        return 0
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"hf_step_time: skipped: {e} (pip install torch transformers)")
        return 77
    if not torch.cuda.is_available():
        print("hf_step_time: skipped: no CUDA GPU")
        return 77
    rows = measure(args, torch, transformers)
    os.makedirs(args.out, exist_ok=True)
    write_csv(os.path.join(args.out, "hf_step_time.csv"), rows)
    print(f"wrote {len(rows)} rows to {os.path.join(args.out, 'hf_step_time.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
