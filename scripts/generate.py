#!/usr/bin/env python3
"""Generates text with the small GPT of scripts/train_gpt.py and a KV cache: the prompt's keys
and values computed once (prefill), then one token a step whose query attends to the whole
cache (decode), greedily. The attention is PyTorch's SDPA or the tutorial's (a forward
chapter's kernel for the prefill, chapter 11's decode for the steps); ``--check`` also
generates without any cache, recomputing the whole sequence each step with SDPA, and
requires the same tokens.

  python3 scripts/train_gpt.py --steps 300 --graph --save build/gpt.pt      # a model, first
  python3 scripts/generate.py --checkpoint build/gpt.pt --prompt "def main(" --tokens 200 --check
  python3 scripts/generate.py --checkpoint build/gpt.pt --attention flashtut --check

``--precision bf16`` (the default on a GPU) runs under bf16 autocast, as the model trained,
with a bf16 cache; ``float32`` (the default on the CPU) without autocast: there the cached
and the uncached generations differ only by the order of float32 sums.

The cache: per layer, K and V tensors [1, H, context, d] in that precision, filled up to the current
length. A decode step passes the filled part as views of the cache ([1, H, length, d], each
head's rows ``context`` rows apart), which chapter 11 and SDPA both read in place.

The bottom-right causal mask: the prompt attends causally to itself; each new token attends
to every cached key (one query row at the cache's end sees them all).

``--sdpa-backend`` pins SDPA to one of PyTorch's backends (flash, cudnn, efficient, math)
instead of PyTorch's own choice (auto): every decode step presents SDPA a new key length, so
what a backend does once a shape, it does every step.

Prints the prompt and its continuation, then ``generate: summary:`` with the tokens generated,
tokens per second of the decode steps (wall clock between two synchronizations, the prefill
apart), the SDPA backend, and, with ``--check``,
whether the tokens equal the uncached generation's. Exit 0; 1 when --check finds a different
token; 2 bad arguments, no checkpoint (or a file that is not one), no PyTorch or no library;
3 no CUDA GPU for --device cuda.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
sys.path.insert(0, HERE)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a model saved by train_gpt.py --save")
    ap.add_argument("--prompt", default="def ", help="the text to continue (bytes of UTF-8)")
    ap.add_argument("--tokens", type=int, default=100, help="tokens (bytes) to generate")
    ap.add_argument("--attention", choices=("sdpa", "flashtut"), default="sdpa",
                    help="sdpa: PyTorch's F.scaled_dot_product_attention; flashtut: the tutorial's kernels")
    ap.add_argument("--sdpa-backend", choices=("auto",) + SDPA_BACKENDS, default="auto",
                    help="--attention sdpa: PyTorch's choice (auto) or one backend alone")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--lib", help="libflashtut.so for --attention flashtut")
    ap.add_argument("--precision", choices=("bf16", "float32"), default=None,
                    help="bf16: autocast and a bf16 cache, as the model trained (default on cuda); "
                         "float32: no autocast, a float32 cache (default on cpu; SDPA only)")
    ap.add_argument("--check", action="store_true",
                    help="also generate without a cache (SDPA, the whole sequence each step) and compare")
    args = ap.parse_args(argv)
    if args.tokens < 1:
        ap.error("--tokens must be at least 1")
    if not args.prompt:
        ap.error("--prompt must hold at least one byte")
    if args.attention == "flashtut" and args.device != "cuda":
        ap.error("--attention flashtut runs the tutorial's CUDA kernels: it needs --device cuda")
    args.precision = args.precision or ("bf16" if args.device == "cuda" else "float32")
    if args.attention == "flashtut" and args.precision != "bf16":
        ap.error("--attention flashtut computes in bf16: --precision bf16")
    if args.sdpa_backend != "auto" and args.attention != "sdpa":
        ap.error("--sdpa-backend chooses SDPA's backend: it needs --attention sdpa")
    if args.device == "cpu" and args.sdpa_backend not in ("auto", "math"):
        ap.error(f"--sdpa-backend {args.sdpa_backend} runs on CUDA only: on the CPU use auto or math")
    return args


# SDPA's backends as --sdpa-backend names them, and torch.nn.attention.SDPBackend's names.
SDPA_BACKENDS = ("flash", "cudnn", "efficient", "math")
SDPA_NAMES = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
              "math": "MATH"}


class Attention:
    """The two attention calls generation makes: the prompt on itself (causal), and the new
    rows against the cache (bottom-right causal, all of it for one row)."""

    def __init__(self, torch, kind, lib, sdpa_backend="auto"):
        self.torch, self.kind = torch, kind
        self.sdpa_backend = sdpa_backend
        if kind == "flashtut":
            import flashtut
            flashtut.load(lib)
            self.ft = flashtut
            self.prefill_impl = flashtut.forward_for(torch.cuda.get_device_capability())
            self.decode_impl = "ch11"

    def sdpa(self, q, k, v, **kw):
        """F.scaled_dot_product_attention, under the one backend --sdpa-backend names."""
        F = self.torch.nn.functional
        if self.sdpa_backend == "auto":
            return F.scaled_dot_product_attention(q, k, v, **kw)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(getattr(SDPBackend, SDPA_NAMES[self.sdpa_backend])):
            return F.scaled_dot_product_attention(q, k, v, **kw)

    def prefill(self, q, k, v):
        if self.kind == "sdpa":
            return self.sdpa(q, k, v, is_causal=True)
        return self.ft.forward(q, k, v, causal=True, impl=self.prefill_impl)[0]

    def decode(self, q, k, v):
        if self.kind == "sdpa":  # one row at the cache's end sees every key: no mask
            return self.sdpa(q, k, v)
        return self.ft.forward(q, k, v, causal=True, impl=self.decode_impl,
                               causal_align=self.ft.CAUSAL_BOTTOM_RIGHT)[0]


def cached_forward(torch, model, cfg, idx, start, cache, attention, prefill):
    """Logits of the last position for tokens idx [1, n] at positions start.., appending their
    K and V to `cache` (per layer a pair [1, H, context, d])."""
    F = torch.nn.functional
    n = idx.shape[1]
    h, d = cfg["heads"], cfg["width"] // cfg["heads"]
    x = model.tok(idx) + model.pos(torch.arange(start, start + n, device=idx.device))
    for block, (kc, vc) in zip(model.blocks, cache):
        q, k, v = (t.view(1, n, h, d).transpose(1, 2) for t in block.qkv(block.ln1(x)).split(cfg["width"], dim=2))
        kc[:, :, start:start + n] = k
        vc[:, :, start:start + n] = v
        keys, values = kc[:, :, :start + n], vc[:, :, :start + n]
        q = q.contiguous()
        y = attention.prefill(q, k.contiguous(), v.contiguous()) if prefill else attention.decode(q, keys, values)
        x = x + block.proj(y.transpose(1, 2).reshape(1, n, cfg["width"]))
        x = x + block.out(F.gelu(block.fc(block.ln2(x)), approximate="tanh"))
    return F.linear(model.ln(x[:, -1:]), model.tok.weight)[:, -1]


def precision_context(torch, device, precision):
    """bf16 autocast, or nothing (float32)."""
    import contextlib
    return (torch.autocast(device_type=device, dtype=torch.bfloat16) if precision == "bf16"
            else contextlib.nullcontext())


def generate_cached(torch, model, cfg, prompt, count, attention, device, precision):
    """Greedy tokens with the cache; the decode steps' seconds (prefill apart)."""
    h, d = cfg["heads"], cfg["width"] // cfg["heads"]
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    cache = [tuple(torch.zeros(1, h, cfg["context"], d, device=device, dtype=dtype) for _ in range(2))
             for _ in model.blocks]
    idx = torch.tensor([prompt], device=device)
    out = []
    with torch.no_grad(), precision_context(torch, device, precision):
        logits = cached_forward(torch, model, cfg, idx, 0, cache, attention, prefill=True)
        out.append(int(logits.argmax()))
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        t0 = time.perf_counter()
        for _ in range(count - 1):
            pos = len(prompt) + len(out) - 1
            logits = cached_forward(torch, model, cfg, torch.tensor([[out[-1]]], device=device), pos, cache,
                                    attention, prefill=False)
            out.append(int(logits.argmax()))
        sync()
    return out, time.perf_counter() - t0


def generate_uncached(torch, model, prompt, count, device, precision):
    """Greedy tokens recomputing the whole sequence each step, with the model's own forward
    (SDPA): the plain generation the cached ones are checked against."""
    seq = list(prompt)
    with torch.no_grad(), precision_context(torch, device, precision):
        for _ in range(count):
            logits = model(torch.tensor([seq], device=device))
            seq.append(int(logits[0, -1].argmax()))
    return seq[len(prompt):]


def load_checkpoint(torch, path, config_keys):
    """(the dict train_gpt.py --save wrote, None), or (None, the message saying why `path`
    is not one)."""
    if not os.path.isfile(path):
        return None, f"no checkpoint {path}: train one with python3 scripts/train_gpt.py --save {path}"
    not_ours = f"--checkpoint {path} is not a model saved by train_gpt.py --save"
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (other bytes raise UnpicklingError, RuntimeError, EOFError, ...)
        return None, f"{not_ours} (torch.load: {type(e).__name__}): give one that it wrote"
    config = saved.get("config") if isinstance(saved, dict) else None
    if not (isinstance(config, dict) and isinstance(saved.get("model"), dict)
            and all(isinstance(config.get(k), int) and config[k] > 0 for k in config_keys)):
        return None, (f"{not_ours} (it lacks the config {', '.join(config_keys)} or the "
                      f"weights): give one that it wrote")
    return saved, None


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError as e:
        print(f"generate: needs PyTorch ({e}); pip install torch", file=sys.stderr)
        return 2
    import train_gpt
    saved, problem = load_checkpoint(torch, args.checkpoint, train_gpt.CHECKPOINT_CONFIG)
    if problem:
        print(f"generate: {problem}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("generate: PyTorch sees no CUDA GPU (--device cpu generates with SDPA on the CPU)", file=sys.stderr)
        return 3
    cfg = saved["config"]
    prompt = list(args.prompt.encode("utf-8"))
    if len(prompt) + args.tokens > cfg["context"]:
        print(f"generate: the prompt's {len(prompt)} bytes and {args.tokens} new tokens exceed the "
              f"model's context of {cfg['context']}: ask for fewer", file=sys.stderr)
        return 2
    F = torch.nn.functional
    model = train_gpt.build_model(torch, argparse.Namespace(**cfg),
                                  lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    try:
        model.load_state_dict(saved["model"])
    except RuntimeError:  # weights of another shape than its config says
        print(f"generate: {args.checkpoint}: its weights do not fit its config {cfg}: give "
              f"--checkpoint a model train_gpt.py --save wrote", file=sys.stderr)
        return 2
    model.to(args.device).eval()
    try:
        attention = Attention(torch, args.attention, args.lib, args.sdpa_backend)
    except Exception as e:  # noqa: BLE001  (flashtut.LibraryError and what loading raises)
        print(f"generate: {e}", file=sys.stderr)
        return 2

    tokens, seconds = generate_cached(torch, model, cfg, prompt, args.tokens, attention, args.device, args.precision)
    text = bytes(tokens).decode("utf-8", "replace")
    print(f"{args.prompt}{text}")
    rate = (len(tokens) - 1) / seconds if seconds > 0 and len(tokens) > 1 else float("nan")
    backend = f" sdpa_backend={args.sdpa_backend}" if args.attention == "sdpa" else ""
    summary = (f"generate: summary: attention={args.attention}{backend} tokens={len(tokens)} "
               f"decode_tokens_per_s={rate:.1f} device={args.device} precision={args.precision}")
    status = 0
    if args.check:
        want = generate_uncached(torch, model, prompt, args.tokens, args.device, args.precision)
        same = sum(1 for a, b in zip(tokens, want) if a == b)
        first = next((i for i, (a, b) in enumerate(zip(tokens, want)) if a != b), None)
        summary += f" check={'same' if first is None else f'differs at token {first}'} ({same} of {len(want)} equal)"
        status = 0 if first is None else 1
    print(summary, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
