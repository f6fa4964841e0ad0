#!/usr/bin/env python3
"""Trains a small GPT with PyTorch's FlashAttention-2 or cuDNN backend or with the tutorial's
attention (through flashtut.autograd: chapters 09-10 on Hopper, chapters 07-08 elsewhere),
everything else identical, and writes the loss curve and the step times.

  python3 scripts/train_gpt.py --attention sdpa_flash --seed 0 --out build/train_sdpa_s0.csv
  python3 scripts/train_gpt.py --attention sdpa_flash --seed 1 --out build/train_sdpa_s1.csv
  python3 scripts/train_gpt.py --attention flashtut   --seed 0 --out build/train_flashtut_s0.csv
  python3 plots/plot_training.py build/train_*.csv --out build/training.png

  python3 scripts/train_gpt.py --attention flashtut --graph --repeat 2 --no-check \
      --out build/train_flashtut_s0_r2.csv   # steps replayed as a CUDA graph; a repeat's label

  python3 scripts/train_gpt.py --tiny --device cpu --out /tmp/t.csv   # a smoke test, no GPU
  python3 scripts/train_gpt.py --attention flashtut --check-only      # the kernels vs FA2 only

The model: GPT-2's shape at small scale (pre-LayerNorm blocks, learned positions, a GELU MLP
of 4x the width, the output layer tied to the token embedding, biases in every Linear,
no dropout): by default 6 layers, width 768, 12 heads of d = 64, context 1024; byte-level
tokens (vocabulary 256), so no tokenizer. About 43.5 M parameters.

The corpus is on every machine with Python and read locally: the standard library's own
source, every ``*.py`` file under ``sysconfig.get_paths()["stdlib"]`` (site-packages and
dist-packages left out, so installed packages never enter it), sorted by path and
concatenated as bytes. The last 5% of the bytes are held out for validation. The summary
prints the corpus's size and hash: two runs compare only on the same corpus (the same
Python version on the same kind of machine).

Training: bf16 autocast (``torch.autocast``; the parameters, the optimizer and the loss are
float32), AdamW (betas 0.9, 0.95; weight decay 0.1 on the matrices and embeddings), the
learning rate warmed up linearly over ``--warmup`` steps and then a cosine down to 10% at
the last step (``--schedule constant`` holds it instead), gradients clipped to norm 1, a
batch of ``--batch`` sequences of ``--context`` bytes at random offsets of the training
bytes.

``--seed`` seeds the model's initialization (made on the CPU, then moved) and the batch
order (its own ``torch.Generator``, on the CPU): two runs with the same seed start from the
same weights and see the same batches whichever attention they use. The validation batches
are the same for every run: ``--eval-batches`` batches at evenly spaced offsets of the
held-out bytes, evaluated every ``--eval-every`` steps and after the last.

Attention (``--attention``), the only difference between runs:

- ``sdpa_flash``: ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` inside
  ``torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` (FlashAttention-2; it fails
  rather than fall back to another backend). On ``--device cpu`` the math backend instead,
  written to the CSV as ``sdpa_math``.
- ``sdpa_cudnn``: the same under ``SDPBackend.CUDNN_ATTENTION`` (cuDNN's fused attention,
  the fastest of PyTorch's backends on Hopper; CUDA only).
- ``flashtut``: ``flashtut.autograd.attention(q, k, v, is_causal=True)``, with the library
  from ``--lib`` (default: flashtut's own, ``$FLASHTUT_LIB`` or
  ``build/common/libflashtut.so``). q, k and v arrive as strided views of the QKV
  projection, which the kernels read in place, as SDPA does; O and the gradients come back
  laid out [B, N, H, d], as SDPA's do. Before training, the kernels are checked against
  FlashAttention-2 and a float32 reference on one batch of random inputs of the model's
  attention shape (``--no-check`` skips it, ``--check-only`` runs only it): the run stops
  (exit 1) if the tutorial's output or gradients are off by more than
  max(2e-2, 2x FlashAttention-2's error) in relative L2 norm.

Timing: CUDA events around each step's forward, backward, clipping and optimizer update
(the batch's copy to the GPU and the evaluations are outside), synchronized at the end
event; the summary's median leaves out the first ``--timing-skip`` steps (warm-up:
allocator, cuBLAS heuristics).

``--graph``: the step replayed as a CUDA graph (``torch.cuda.CUDAGraph``). At this model's
size the GPU's work of a step (about 9 ms on an H200) is shorter than the Python that
queues it one operation at a time, so an eager step's time is the host's: FlashAttention-2's
ranged over 11.96-17.5 ms between calls on the same H200 with the same kernels (chapter 08's
README). A graph records the step's kernels once and replays them with one call, so the
step's time is the GPU's, which is what the attention kernels change.

The first ``GRAPH_WARMUP`` steps run eagerly on a side stream. They are real steps of the
run, and lazy initializations such as the optimizer's state happen there, as PyTorch's
whole-network capture asks. Then the next step's work is captured, and every later step
copies its batch into the captured input tensors and replays.

A replay computes what an eager step computes, though not bit for bit: AdamW takes its
capturable path (step count and learning rate on the GPU), and autocast casts the weights
anew inside the graph.

What capture needs, with either attention:

- the learning rate in a GPU tensor (``fill_`` before each step) and AdamW ``capturable``;
- autocast with its cast cache off;
- gradients left in place between steps (the captured backward writes them).

The tutorial's calls capture as they are: the library launches on PyTorch's current stream
and takes its outputs and workspace from PyTorch's allocator. python/tests/test_autograd_gpu.py
replays them against the float64 reference.

The CSV (``--out``), one row per step, written as the run goes (flushed each step):
``attention,seed,step,loss,val_loss,ms,lr,grad_norm,repeat,graph``. ``step`` counts from 1;
``loss`` is that step's training loss (on its batch, before its update), ``val_loss`` the
validation loss after its update (empty except on evaluation steps), ``ms`` the step's time,
``lr`` the learning rate it used, ``grad_norm`` the gradient norm before clipping,
``repeat`` the run's ``--repeat`` (a label that tells apart runs of one attention and seed),
``graph`` 1 for a step replayed from the CUDA graph, 0 for an eager one. A last line starting
``train_gpt: summary:`` gives the final training loss (the mean of the last 20 steps), the
final validation loss, the median step time, tokens per second, the GPU, the peak memory.

``--save PATH``: after the last step, the model's weights and its shape (a ``torch.save`` of
``{"config": {...}, "model": state_dict}``, float32) for ``scripts/generate.py``.

Exit codes: 0 done; 1 a non-finite loss or a failed check of the kernels; 2 bad arguments,
no library or no PyTorch; 3 no CUDA GPU.
"""
import argparse
import contextlib
import csv
import hashlib
import math
import os
import statistics
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from paths import unwritable  # noqa: E402  (scripts/paths.py)
try:
    import flashtut  # imports neither torch nor the library: both come later, in that order
except ImportError:  # neither installed nor on PYTHONPATH
    sys.exit("train_gpt.py needs the flashtut package: `pip install .` in the repository, or "
             "PYTHONPATH=python in a built tree (python/README.md)")

VOCAB = 256  # bytes
COLUMNS = ["attention", "seed", "step", "loss", "val_loss", "ms", "lr", "grad_norm", "repeat",
           "graph"]
LAST = 20  # the final training loss: the mean of the last this many steps
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}
# --graph: eager steps before the capture. PyTorch's whole-network capture wants a few
# iterations on a side stream first, so that what is made lazily on a first call (cuBLAS's
# workspace, the optimizer's state, autograd's per-stream bookkeeping) is made outside the
# capture; three is the number its documentation's example uses.
GRAPH_WARMUP = 3

# name: (default, --tiny's default). None in the parser means "not given".
DEFAULTS = {
    "layers": (6, 2), "width": (768, 128), "heads": (12, 2), "context": (1024, 128),
    "batch": (8, 8), "steps": (300, 5), "lr": (1e-3, 1e-3), "warmup": (30, 2),
    "eval_every": (25, 2), "eval_batches": (8, 2), "timing_skip": (10, 1),
}


# What a saved model records of its shape (build_model reads these from args).
CHECKPOINT_CONFIG = ("layers", "width", "heads", "context")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Train a small byte-level GPT on the Python standard library's source, "
                    "with PyTorch's FlashAttention-2 or the tutorial's attention.")
    ap.add_argument("--attention", choices=("sdpa_flash", "sdpa_cudnn", "flashtut"), default="sdpa_flash",
                    help="sdpa_flash: F.scaled_dot_product_attention under the FLASH_ATTENTION "
                         "backend (the default); sdpa_cudnn: under the CUDNN_ATTENTION backend; "
                         "flashtut: flashtut.autograd.attention (chapters 09-10 on Hopper, 07-08 "
                         "elsewhere)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seeds the initialization and the batch order (default 0)")
    ap.add_argument("--out", help="the CSV to write, one row per step (default: none)")
    ap.add_argument("--save", help="write the trained model here (for scripts/generate.py)")
    ap.add_argument("--lib", help="libflashtut.so for --attention flashtut (default: "
                                  "$FLASHTUT_LIB, else build/common/libflashtut.so)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: only with sdpa_flash, which becomes SDPA's math backend there "
                         "(a smoke test; bf16 autocast on the CPU is slow); default cuda")
    ap.add_argument("--tiny", action="store_true",
                    help="a smoke test: 2 layers, width 128, 2 heads of 64, context 128, "
                         "5 steps (flags given explicitly still win)")
    for name, (default, tiny) in DEFAULTS.items():
        flag = "--" + name.replace("_", "-")
        ap.add_argument(flag, type=type(default), default=None,
                        help=f"default {default} ({tiny} with --tiny)")
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                    help="after the warm-up: a cosine down to 10%% of --lr at the last step "
                         "(the default), or constant")
    ap.add_argument("--weight-decay", type=float, default=0.1,
                    help="AdamW's, on the matrices and embeddings (default 0.1)")
    ap.add_argument("--grad-clip", type=float, default=1.0,
                    help="the gradient norm clipped to (default 1; 0 for none)")
    ap.add_argument("--val-fraction", type=float, default=0.05,
                    help="the last this much of the corpus's bytes is the validation set "
                         "(default 0.05)")
    ap.add_argument("--corpus", help="a folder whose *.py files (recursively) are the corpus "
                                     "(default: the standard library's)")
    ap.add_argument("--no-check", action="store_true",
                    help="flashtut: skip the check of the kernels against FlashAttention-2")
    ap.add_argument("--check-only", action="store_true",
                    help="flashtut: run only the check of the kernels, then exit")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="after training, STEPS more eager steps (forward and backward, also "
                         "with --graph) under torch.profiler; prints the GPU time per kernel "
                         "(top 15) and the step's CPU and GPU totals")
    ap.add_argument("--graph", action="store_true",
                    help="replay each step as a CUDA graph after %d eager ones, so that the "
                         "step time is the GPU's, not Python's (the docstring says how)"
                    % GRAPH_WARMUP)
    ap.add_argument("--repeat", type=int, default=0,
                    help="a label written to the CSV's repeat column, to tell apart runs of "
                         "one attention and seed (default 0)")
    ap.add_argument("--print-every", type=int, default=10,
                    help="a progress line every this many steps (default 10)")
    args = ap.parse_args(argv)
    for name, (default, tiny) in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, tiny if args.tiny else default)
    return args


def fail(msg, code=2):
    print(f"train_gpt: error: {msg}", file=sys.stderr, flush=True)
    return code


def validate(args):
    """The argument errors, as one message each, or None."""
    if args.device == "cpu" and args.attention == "flashtut":
        return ("--attention flashtut runs the tutorial's CUDA kernels: it needs --device cuda "
                "(--device cpu works with --attention sdpa_flash, SDPA's math backend there)")
    if args.device == "cpu" and args.attention == "sdpa_cudnn":
        return ("--attention sdpa_cudnn is PyTorch's cuDNN backend: it needs --device cuda "
                "(--device cpu works with --attention sdpa_flash, SDPA's math backend there)")
    if args.graph and args.device != "cuda":
        return "--graph replays CUDA graphs: it needs --device cuda"
    if args.check_only and args.attention != "flashtut":
        return "--check-only checks the tutorial's kernels: give --attention flashtut"
    for name in ("layers", "width", "heads", "context", "batch", "steps", "eval_every",
                 "eval_batches", "print_every"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    if args.width % args.heads:
        return f"--width {args.width} is not a multiple of --heads {args.heads}"
    d = args.width // args.heads
    if args.attention == "flashtut" and d not in (64, 128):
        return (f"head_dim = width / heads = {d}: the tutorial's kernels compute 64 or 128 "
                f"(e.g. --width 768 --heads 12)")
    if args.warmup < 0 or args.timing_skip < 0:
        return "--warmup and --timing-skip must be 0 or more"
    if not 0 < args.val_fraction < 1:
        return "--val-fraction must be between 0 and 1"
    if args.lr <= 0:
        return "--lr must be positive"
    return None


# ---- the corpus ------------------------------------------------------------------------------

def corpus_files(root):
    """Every *.py under root, site-packages/dist-packages/__pycache__ left out, sorted by the
    path relative to root (so the order is the same on every machine with that tree)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        found += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return sorted(found, key=lambda p: os.path.relpath(p, root).split(os.sep))


def read_corpus(root):
    """(bytes, number of files): the files of corpus_files(root), concatenated."""
    files = corpus_files(root)
    chunks = []
    for path in files:
        with open(path, "rb") as fh:
            chunks.append(fh.read())
    return b"".join(chunks), len(files)


# ---- the model -------------------------------------------------------------------------------

def build_model(torch, args, attend):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            w = args.width
            self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
            self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
            self.fc, self.out = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)

        def forward(self, x):
            b, n, c = x.shape
            h = args.heads
            # [B, N, 3C] -> three [B, H, N, d] views (strided: the usual input to attention).
            # Both attentions read them through their strides (the tutorial's through the C
            # API's *_strided functions, common/core/strides.hpp) and return O laid out as
            # [B, N, H, d], so the output's transpose and reshape below are views and the
            # backward's gradients come back in the projection's layout: no copies on
            # either path (chapter 08's README, the training section, measures what the
            # copies cost before the kernels took views).
            q, k, v = (t.view(b, n, h, c // h).transpose(1, 2)
                       for t in self.qkv(self.ln1(x)).split(c, dim=2))
            y = attend(q, k, v).transpose(1, 2).reshape(b, n, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, args.width)
            self.pos = nn.Embedding(args.context, args.width)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.ln = nn.LayerNorm(args.width)
            for name, p in self.named_parameters():  # GPT-2's initialization
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() >= 2:
                    std = 0.02
                    if name.endswith(("proj.weight", "out.weight")):  # onto the residual stream
                        std /= math.sqrt(2 * args.layers)
                    nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx):
            n = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(n, device=idx.device))
            for block in self.blocks:
                x = block(x)
            return F.linear(self.ln(x), self.tok.weight)  # tied output layer

    return GPT()


def make_attention(torch, kind, device):
    """(the attention function of the model, the name the CSV gives it)."""
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if kind == "flashtut":
        import flashtut.autograd as fa

        def attend(q, k, v):
            return fa.attention(q, k, v, is_causal=True)
        return attend, "flashtut"
    if kind == "sdpa_cudnn":
        backend, name = SDPBackend.CUDNN_ATTENTION, "sdpa_cudnn"
    else:
        backend, name = ((SDPBackend.FLASH_ATTENTION, "sdpa_flash") if device == "cuda" else
                         (SDPBackend.MATH, "sdpa_math"))

    def attend(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return attend, name


# ---- the kernels against FlashAttention-2, before training --------------------------------------

def rel_err(got, ref):
    ref = ref.double()
    return ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check_kernels(torch, args, device="cuda"):
    """The tutorial's output and gradients against a float32 reference (SDPA's math
    backend on the same bf16 values) and FlashAttention-2's errors against the same, on one
    batch of the model's attention shape, causal. Returns True when they pass."""
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import flashtut.autograd as fa
    d = args.width // args.heads
    shape = (min(args.batch, 2), args.heads, args.context, d)
    g = torch.Generator(device=device).manual_seed(1234)
    # q, k, v as the model makes them: [B, H, N, d] views of one [B, N, 3·H·d] projection.
    b, h, n = shape[:3]
    x = torch.randn(b, n, 3 * h * d, device=device, dtype=torch.bfloat16, generator=g)
    q, k, v = (t.view(b, n, h, d).transpose(1, 2) for t in x.split(h * d, dim=2))
    do = torch.randn(shape, device=device, dtype=torch.bfloat16, generator=g)

    def run(fn, dtype):
        x = [t.to(dtype).detach().requires_grad_() for t in (q, k, v)]
        o = fn(*x)
        grads = torch.autograd.grad(o, x, do.to(dtype))
        return [o.detach()] + list(grads)

    def sdpa(backend):
        def fn(a, b, c):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(a, b, c, is_causal=True)
        return fn

    ref = run(sdpa(SDPBackend.MATH), torch.float32)
    fa2 = run(sdpa(SDPBackend.FLASH_ATTENTION), torch.bfloat16)
    ours = run(lambda a, b, c: fa.attention(a, b, c, is_causal=True), torch.bfloat16)
    if device == "cuda":
        torch.cuda.synchronize()
    ok = True
    print(f"train_gpt: check: causal attention B={shape[0]} H={shape[1]} N={shape[2]} d={d} "
          f"bf16, relative L2 error against float32 math:", flush=True)
    for name, a, b, r in zip(("o", "dq", "dk", "dv"), ours, fa2, ref):
        e_ours, e_fa2 = rel_err(a, r), rel_err(b, r)
        finite = bool(torch.isfinite(a).all())
        limit = max(2e-2, 2 * e_fa2)
        good = finite and e_ours <= limit
        ok &= good
        print(f"train_gpt: check:   {name:2s}  flashtut {e_ours:.2e}   FlashAttention-2 {e_fa2:.2e}"
              f"   limit {limit:.1e}  {'ok' if good else 'FAILED' + ('' if finite else ' (NaN/Inf)')}",
              flush=True)
    return ok


# ---- training --------------------------------------------------------------------------------

def capture_step(torch, work, opt):
    """One training step captured as a CUDA graph (PyTorch's whole-network capture): the
    gradients set to None first, so that the captured backward allocates them from the
    graph's memory and every replay writes them anew (no zeroing between replays). Capture
    records the kernels without running them, so the step is not taken here. Returns the
    graph and the tensors each replay overwrites: (graph, loss, gradient norm)."""
    opt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss, norm = work()
    return graph, loss, norm


def lr_at(step, args):
    """The learning rate of step (1-based): linear warm-up to --lr, then cosine to 10% or
    constant."""
    if args.warmup and step <= args.warmup:
        return args.lr * step / args.warmup
    if args.schedule == "constant":
        return args.lr
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    low = 0.1 * args.lr
    return low + 0.5 * (args.lr - low) * (1 + math.cos(math.pi * min(1.0, progress)))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    bad = validate(args)
    if bad:
        return fail(bad)
    for flag, path in (("--out", args.out), ("--save", args.save)):
        problem = path and unwritable(path)
        if problem:
            return fail(f"{flag} {path}: {problem}")
    if args.attention == "flashtut":  # the library must exist (checked without loading it)
        try:
            flashtut.library_path(args.lib)
        except flashtut.LibraryError as e:
            return fail(e)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        return fail(f"needs PyTorch ({e})")
    if args.device == "cuda" and not torch.cuda.is_available():
        return fail("PyTorch sees no CUDA GPU (--device cpu --tiny runs a smoke test without "
                    "one)", 3)
    if args.attention == "flashtut":  # torch first, then the library (flashtut.load's order)
        try:
            flashtut.load(args.lib)
        except flashtut.LibraryError as e:
            return fail(e)
        missing = [k for k, kind in (("ch07", "forward"), ("ch08", "backward"))
                   if k not in flashtut.available(kind)]
        if missing:
            return fail(f"{flashtut._lib_path} lacks {' and '.join(missing)}: rebuild it "
                        f"from this checkout (cmake --build build --target flashtut)")
    device = torch.device(args.device)
    gpu = torch.cuda.get_device_name(device) if args.device == "cuda" else "cpu"
    print(f"train_gpt: torch {torch.__version__}, CUDA {torch.version.cuda}, device {gpu}"
          + (f", library {flashtut._lib_path}" if args.attention == "flashtut" else ""),
          flush=True)

    if args.attention == "flashtut" and not args.no_check:
        if args.check_only:
            if not check_kernels(torch, args):
                return fail("the tutorial's kernels disagree with the reference (above)", 1)
            print("train_gpt: check: passed", flush=True)
            return 0
        # The check runs in a process of its own (this script with --check-only), so that the
        # training process does what the FlashAttention-2 runs it is compared with do, and no
        # more. (On the H200's host the tutorial's runs that checked in-process took 1.15-1.42x
        # FlashAttention-2's step; those with the check apart 1.17-1.19x; those with none
        # 1.01-1.14x: chapter 08's README, the training section.)
        import subprocess
        argv_now = sys.argv[1:] if argv is None else list(argv)
        rc = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv_now +
                            ["--check-only"]).returncode
        if rc == 1:
            return fail("the tutorial's kernels disagree with the reference (above): not "
                        "training with them (--no-check trains anyway)", 1)
        if rc != 0:
            return fail(f"the kernel check (train_gpt.py --check-only) exited with {rc} "
                        f"(above): not training", rc)
    elif args.check_only:
        return fail("--check-only with --no-check: nothing to do")

    # The corpus, on the CPU.
    root = args.corpus or sysconfig.get_paths()["stdlib"]
    data, nfiles = read_corpus(root)
    split = int(len(data) * (1 - args.val_fraction))
    need = (args.context + 1) * 2
    if split < need or len(data) - split < args.context + 1:
        return fail(f"the corpus under {root} has {len(data)} bytes in {nfiles} files: too "
                    f"few for a context of {args.context}")
    digest = hashlib.sha256(data).hexdigest()[:16]
    buffer = bytearray(data)  # writable, and alive as long as the tensor that views it
    all_bytes = torch.frombuffer(buffer, dtype=torch.uint8)
    train, val = all_bytes[:split], all_bytes[split:]
    print(f"train_gpt: corpus {root}: {nfiles} files, {len(data)} bytes (sha256 {digest}), "
          f"{len(train)} for training, {len(val)} held out", flush=True)

    # The model and the optimizer: the same weights for every run with this seed.
    torch.manual_seed(args.seed)
    attend, attention_name = make_attention(torch, args.attention, args.device)
    model = build_model(torch, args, attend).to(device)
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    extra = {"fused": True} if args.device == "cuda" else {}
    lr_start = args.lr
    if args.graph:
        # A replayed step reads nothing from the host: the learning rate lives in a GPU tensor
        # (set_lr fills it before each step) and AdamW keeps its step count on the GPU.
        extra["capturable"] = True
        lr_start = torch.tensor(args.lr, device=device)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_start, betas=(0.9, 0.95), eps=1e-8, **extra)

    def set_lr(lr):
        for group in opt.param_groups:
            if torch.is_tensor(group["lr"]):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr
    print(f"train_gpt: {attention_name}, seed {args.seed}: {args.layers} layers, width "
          f"{args.width}, {args.heads} heads of {args.width // args.heads}, context "
          f"{args.context}, batch {args.batch}, {nparams / 1e6:.1f} M parameters; {args.steps} "
          f"steps, lr {args.lr:g} ({args.warmup} warm-up, {args.schedule}), bf16 autocast"
          + (f", CUDA graph from step {GRAPH_WARMUP + 1}" if args.graph else ""), flush=True)

    # The batches: training ones from a generator of this seed, validation ones fixed.
    gen = torch.Generator().manual_seed(args.seed)
    window = torch.arange(args.context + 1)

    def batch_at(source, starts):
        chunk = source[starts[:, None] + window].to(device).long()  # [B, context + 1]
        return chunk[:, :-1], chunk[:, 1:]

    def train_batch():
        return batch_at(train, torch.randint(0, len(train) - args.context, (args.batch,),
                                             generator=gen))

    val_starts = torch.linspace(0, len(val) - args.context - 1,
                                args.eval_batches * args.batch).long().view(args.eval_batches, -1)
    # Autocast keeps the bf16 copies of the weights it made for the rest of its context; a
    # captured step must make them inside the graph instead (cache off), as PyTorch asks.
    autocast = lambda: torch.autocast(device_type=args.device, dtype=torch.bfloat16,  # noqa: E731
                                      cache_enabled=not args.graph)

    def loss_of(x, y):
        with autocast():
            logits = model(x)
        return F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))

    @torch.no_grad()
    def evaluate():
        model.eval()
        losses = [loss_of(*batch_at(val, s)) for s in val_starts]
        model.train()
        return torch.stack(losses).mean().item()

    def clock():
        if args.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()

            def stop():
                end.record()
                end.synchronize()
                return start.elapsed_time(end)
            return stop
        t0 = time.perf_counter()
        return lambda: (time.perf_counter() - t0) * 1e3

    out = None
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        out = open(args.out, "w", newline="")
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        out.flush()

    def step_work(x, y):
        """One step's work on the GPU: forward, backward, clipping, update (what --graph
        captures). Returns the loss and the gradient norm, as tensors."""
        loss = loss_of(x, y)
        loss.backward()
        if args.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        else:
            norm = torch.linalg.vector_norm(
                torch.stack([p.grad.detach().norm() for p in model.parameters()]))
        opt.step()
        return loss, norm

    graph = static_loss = static_norm = None  # the captured step and its outputs, once made
    if args.graph:
        # The tensors the graph reads its batch from: each step copies its batch in.
        static_x = torch.empty(args.batch, args.context, dtype=torch.long, device=device)
        static_y = torch.empty_like(static_x)
        side = torch.cuda.Stream(device)

    losses, times, val_loss, status = [], [], None, 0
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model.train()
    t_run = time.perf_counter()
    for step in range(1, args.steps + 1):
        lr = lr_at(step, args)
        set_lr(lr)
        x, y = train_batch()
        if args.graph:
            static_x.copy_(x)
            static_y.copy_(y)
            x, y = static_x, static_y
        replayed = graph is not None
        if replayed:
            stop = clock()
            graph.replay()
            ms = stop()
            loss, norm = static_loss, static_norm
        else:
            # Eager (the warm-up steps of --graph on their side stream, after the batch's copy).
            if args.graph:
                side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side) if args.graph else contextlib.nullcontext():
                stop = clock()
                loss, norm = step_work(x, y)
                opt.zero_grad(set_to_none=True)
                ms = stop()
            if args.graph:
                torch.cuda.current_stream(device).wait_stream(side)
            if args.graph and step == GRAPH_WARMUP and step < args.steps:
                try:
                    graph, static_loss, static_norm = capture_step(torch, lambda: step_work(
                        static_x, static_y), opt)
                except RuntimeError as e:
                    return fail(f"capturing the training step as a CUDA graph failed ({e}); "
                                f"run without --graph", 1)
        loss_v, norm_v = loss.item(), norm.item()
        losses.append(loss_v)
        times.append(ms)
        ev = None
        if step % args.eval_every == 0 or step == args.steps:
            ev = val_loss = evaluate()
        if out:
            writer.writerow([attention_name, args.seed, step, f"{loss_v:.6f}",
                             "" if ev is None else f"{ev:.6f}", f"{ms:.4f}", f"{lr:.6g}",
                             f"{norm_v:.6g}", args.repeat, int(replayed)])
            out.flush()
        if step % args.print_every == 0 or step == 1 or step == args.steps or ev is not None:
            print(f"train_gpt: step {step:4d}  loss {loss_v:.4f}" +
                  ("" if ev is None else f"  val {ev:.4f}") +
                  f"  lr {lr:.2e}  grad norm {norm_v:.3f}  {ms:8.2f} ms", flush=True)
        if not (math.isfinite(loss_v) and math.isfinite(norm_v)):
            fail(f"step {step}: the loss is {loss_v}, the gradient norm {norm_v}: stopping", 1)
            status = 1
            break
    if out:
        out.close()
    if args.profile > 0 and status == 0:
        # Where a step's time goes: the kernels by GPU time, then what the whole window cost
        # the GPU (kernel time) against its wall time (a GPU idle between launches shows here).
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        # With --graph the gradients are the graph's tensors: drop them, so that the profiled
        # backwards allocate their own, as eager steps do, rather than add into those.
        opt.zero_grad(set_to_none=True)
        with profile(activities=acts) as prof:
            t0 = time.perf_counter()
            for _ in range(args.profile):
                x, y = train_batch()
                loss_of(x, y).backward()
                opt.zero_grad(set_to_none=True)  # no optimizer step: the weights stay as trained
            if args.device == "cuda":
                torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) * 1e3 / args.profile
        # FT_PROFILE_SORT / FT_PROFILE_ROWS: another order and length of the table (e.g.
        # self_cpu_time_total, to see where the host's time goes).
        sort = os.environ.get("FT_PROFILE_SORT") or ("cuda_time_total" if args.device == "cuda"
                                                     else "cpu_time_total")
        rows = int(os.environ.get("FT_PROFILE_ROWS") or 15)
        print(prof.key_averages().table(sort_by=sort, row_limit=rows), flush=True)
        # The kernels alone (device-side events): the operators' rows carry their kernels'
        # time again, so summing every row would count it twice.
        from torch.autograd import DeviceType
        gpu_ms = sum(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0))
                     for e in prof.key_averages()
                     if getattr(e, "device_type", None) == DeviceType.CUDA) / 1e3
        print(f"train_gpt: profile: {args.profile} steps (forward+backward, no optimizer): wall "
              f"{wall:.2f} ms a step, kernels {gpu_ms / args.profile:.2f} ms a step", flush=True)

    last = losses[-LAST:]
    timed = times[args.timing_skip:] if len(times) > args.timing_skip else times
    first_timed = args.timing_skip + 1 if len(times) > args.timing_skip else 1
    median_ms = statistics.median(timed)
    tokens_per_s = args.batch * args.context / (median_ms / 1e3)
    peak = (torch.cuda.max_memory_allocated(device) / 2**30) if args.device == "cuda" else float("nan")
    print(f"train_gpt: summary: attention={attention_name} seed={args.seed} repeat={args.repeat} "
          f"graph={int(args.graph)} steps={len(losses)} "
          f"final_train_loss={statistics.fmean(last):.4f} (mean of steps "
          f"{len(losses) - len(last) + 1}-{len(losses)}) final_val_loss="
          f"{'nan' if val_loss is None else f'{val_loss:.4f}'} median_step_ms={median_ms:.2f} "
          f"(steps {first_timed}-{len(times)}) tokens_per_s={tokens_per_s:.0f} "
          f"peak_mem_gib={peak:.2f} params_m={nparams / 1e6:.1f} corpus_sha256={digest} "
          f"wall_s={time.perf_counter() - t_run:.1f} gpu={gpu}", flush=True)
    if args.out:
        print(f"train_gpt: wrote {args.out}", flush=True)
    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        config = {k: getattr(args, k) for k in CHECKPOINT_CONFIG}
        torch.save({"config": config, "model": model.state_dict()}, args.save)
        print(f"train_gpt: saved the model to {args.save}", flush=True)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (flashtut.FlashtutError, flashtut.LibraryError) as e:  # the library refused or failed
        sys.exit(fail(f"libflashtut: {e}", 1))
