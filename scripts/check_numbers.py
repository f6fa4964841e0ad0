#!/usr/bin/env python3
"""Holds the numbers the pages take from committed CSVs (or from other pages: the instructors'
reading times count the READMEs' words) to their sources.

  python3 scripts/check_numbers.py        exit 1, naming each number its source no longer gives
  python3 scripts/check_numbers.py --fix  rewrite the checked tables' cells from their sources

Two kinds of check. Tables: every value cell of the chapters' measured tables (01-09), the
instructors' reading times, recomputed and compared at the precision the cell is printed
with. Quotes: a piece of prose (a range of ratios, a figure) recomputed and looked for
verbatim. A re-measured CSV that moves a number, or an edit that changes one by hand, fails
here until text and source agree. README.md's results section has its own generator
(scripts/update_readme.py --check).
"""
import csv
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "plots", "results", "h200")


def read(name):
    with open(os.path.join(RESULTS, name), newline="") as f:
        return list(csv.DictReader(f))


def page(path):
    """The page's text with every run of whitespace one space (quotes may wrap lines)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return " ".join(f.read().split())


def span(values, digits=2, unit="×"):
    lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


# ---- chapter 09: ch09_vs_pytorch.csv ----------------------------------------------------

STEPS = ["ch09_wgmma", "ch09_tma", "ch09_warp_specialized", "ch09_pingpong", "ch09_overlap", "ch09_persistent",
         "ch09_wide_persistent"]
SHAPES = [(d, c, n) for d in (64, 128) for c in (0, 1) for n in (1024, 4096, 16384)]


def standard(r):
    """A row at the tour's shapes: 16384 tokens (B = 16384/N), H = 2048/d, as many K/V heads."""
    n, d = int(r["seq_len"]), int(r["head_dim"])
    return (int(r["batch"]) == 16384 // n and int(r["heads"]) == 2048 // d
            and r.get("heads_kv", r["heads"]) == r["heads"])


def ch09_table(dtype="bf16"):
    """{(d, causal, N): {impl: TFLOP/s}} of one dtype, the tour's shapes."""
    t = {}
    for r in read("ch09_vs_pytorch.csv"):
        if r["dtype"] == dtype and r["pass"] == "forward" and standard(r):
            t.setdefault((int(r["head_dim"]), int(r["causal"]), int(r["seq_len"])), {})[r["impl"]] = float(r["tflops"])
    return t


def cell(x, name):
    return f"{x[name]:.0f}" if name in x else "—"


def ch09_rows():
    """The lesson's measured table, row by row."""
    t = ch09_table()
    for d, c, n in SHAPES:
        x = t[(d, c, n)]
        cells = [cell(x, i) for i in STEPS + ["ch07_fastest", "torch_flash", "torch_cudnn"]]
        f = x["ch09_fastest"]
        yield (f"| {n} | {d} | {'yes' if c else 'no'} | " + " | ".join(cells) +
               f" | {f / x['torch_cudnn']:.2f}× | {f / x['torch_flash']:.2f}× |")


def ch09_extra_rows(dtype="bf16"):
    """The issue's other shapes (other B and H, grouped heads): fastest beside PyTorch's."""
    t = {}
    for r in read("ch09_vs_pytorch.csv"):
        if r["dtype"] == dtype and r["pass"] == "forward" and not standard(r):
            key = (r["batch"], r["heads"], r["heads_kv"], r["seq_len"], r["head_dim"], r["causal"])
            t.setdefault(key, {})[r["impl"]] = float(r["tflops"])
    for (b, h, hkv, n, d, c), x in t.items():
        f = x["ch09_fastest"]
        yield (f"| {b} | {h} | {hkv} | {n} | {d} | {'yes' if c == '1' else 'no'} | {f:.0f} | "
               f"{x['ch07_fastest']:.0f} | {x['torch_flash']:.0f} | {x['torch_cudnn']:.0f} | "
               f"{f / x['torch_cudnn']:.2f}× | {f / x['torch_flash']:.2f}× |")


def ch09_schedule_rows():
    """The case study's table of the persistent kernel's three tile schedules, each from its
    own run (ch09_schedules.csv): step 5 and cuDNN from the pairs' run."""
    t = {}
    for r in read("ch09_schedules.csv"):
        if r["dtype"] == "bf16":
            key = (r["batch"], r["heads"], r["heads_kv"], r["seq_len"], r["head_dim"], r["causal"])
            t.setdefault(key, {})[(r["schedule"], r["impl"])] = float(r["tflops"])
    for (b, h, hkv, n, d, c), x in t.items():
        cells = [x[("zigzag_pairs", "ch09_overlap")]] + [x[(s, "ch09_persistent")] for s in
                                                          ("round_robin", "counter", "zigzag_pairs")]
        cells.append(x[("zigzag_pairs", "torch_cudnn")])
        yield (f"| {b} | {h} | {hkv} | {n} | {d} | {'yes' if c == '1' else 'no'} | " +
               " | ".join(f"{v:.0f}" for v in cells) + " |")


HF_NAMES = {"llama_mha": "Llama", "llama_gqa": "Llama, grouped-query", "qwen2_gqa": "Qwen2, grouped-query",
            "gpt2": "GPT-2"}


def hf_step():
    """{model: {attention: row}} of hf_step_time.csv."""
    t = {}
    for r in read("hf_step_time.csv"):
        t.setdefault(r["model"], {})[r["attention"]] = r
    return t


def hf_rows():
    """docs/use_in_your_model.md's table of training-step times, row by row."""
    for model, x in hf_step().items():
        ms = [float(x[a]["ms"]) for a in ("tutorial", "torch_flash", "torch_cudnn")]
        r = x["tutorial"]
        yield (f"| {HF_NAMES[model]} | {r['layers']} | {r['batch']} × {r['seq_len']} | {r['heads']} / "
               f"{r['heads_kv']} | {r['head_dim']} | {ms[0]:.1f} | {ms[1]:.1f} | {ms[2]:.1f} | "
               f"{ms[0] / ms[1]:.2f}× | {ms[0] / ms[2]:.2f}× |")


def ch09_ratio(num, den, sizes, digits=2, dtype="bf16"):
    t = ch09_table(dtype)
    return span([t[(d, c, n)][num] / t[(d, c, n)][den] for d, c, n in SHAPES if n in sizes], digits)


# ---- chapter 10: ch10_vs_pytorch.csv, ch10_steps.csv, the tours ---------------------------

CH10 = "chapters/10_hopper_backward/README.md"
CH10_CASE = "chapters/10_hopper_backward/case_study.md"
CH10_COLUMNS = ("ch10_specialized", "ch10_bulk_dq", "ch10_deterministic", "ch10_overlap", "ch10_tall",
                "ch10_tall_bulk", "ch10_p_under_dp", "ch10_lean", "ch08_fastest", "torch_flash", "torch_cudnn")
# The run before every step built its wgmma descriptors once a product (steps 5 and 6 as they measured then).
CH10_BEFORE = "ch10_vs_pytorch_descriptors_per_step.csv"
# The latest H200 run of step 8 (with its unchecked atomics) beside cuDNN, and FlashAttention-3's orders tried on it.
LATEST = "ch10_dq_order.csv"


def ch10_table(name="ch10_vs_pytorch.csv", rows=None, field="tflops"):
    """{(B, H, N, d, causal): {impl: backward TFLOP/s (or `field`)}}, bf16, in the CSV's order;
    `rows` instead of the H200 file `name` where given."""
    t = {}
    for r in read(name) if rows is None else rows:
        if r["dtype"] == "bf16" and r["pass"] == "backward":
            key = (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), int(r["causal"]))
            t.setdefault(key, {})[r["impl"]] = float(r[field])
    return t


def ch10_fastest(x, d):
    """The H200 tables' best step: step 8 (lean, at both head dims), `fastest` when they were
    measured, read from its own column. (Step 9, `fastest` since, has run on H100s only:
    ch10_step9_claims.)"""
    return x["ch10_lean"]


H100 = os.path.join(ROOT, "plots", "results", "h100")


def read_h100(name):
    with open(os.path.join(H100, name), newline="") as f:
        return list(csv.DictReader(f))


def probe_tflops():
    """The H200's wgmma probe (probes.csv), the tensor cores' measured ceiling."""
    return probe("wgmma_m64n128k16_bf16")


def ch10_unchecked_gain():
    """Step 8 at d = 64 with its unchecked dQ atomics over step 8 without them, on the H100:
    the same shapes in ch10_unchecked_adds.csv and in ch10_atomics_ab.csv's tree of that commit."""
    before = {(r["seq_len"], r["causal"]): float(r["ms"]) for r in read_h100("ch10_atomics_ab.csv")
              if r["tree"] == "this" and r["variant"] == "lean" and r["head_dim"] == "64"}
    return [before[(r["seq_len"], r["causal"])] / float(r["ms"]) for r in read_h100("ch10_unchecked_adds.csv")
            if r["variant"] == "lean" and (r["seq_len"], r["causal"]) in before]


NUMBER_WORDS = {3: "three", 4: "four", 5: "five", 8: "eight", 10: "ten", 12: "twelve"}  # the counts the pages spell out; any other reads as digits
number_word = lambda n: NUMBER_WORDS.get(n, str(n))


def training_calls():
    """The H100's step-9 training.csv split by the machine that ran it: seed 1's rounds 1 and
    2 came from a second call (plots/results/h100/env.txt), the rest from the first."""
    rows = read_h100("training.csv")
    second = lambda r: r["seed"] == "1" and r["repeat"] in ("1", "2")
    return [r for r in rows if not second(r)], [r for r in rows if second(r)]


def median_steps(rows):
    """Each attention's median over its runs of their median step (steps 11 on), as
    plots/plot_training.py reports it."""
    _, step, of = training_runs(rows)
    return {a: statistics.median(of(a, step)) for a in ("flashtut", "sdpa_flash", "sdpa_cudnn")}


def training_ratio(rows, other="sdpa_cudnn"):
    """The tutorial's median step over `other`'s (median_steps)."""
    ms = median_steps(rows)
    return ms["flashtut"] / ms[other]


def ch10_h100_table(name):
    """{(B, H, N, d, causal): {impl: backward ms}}, bf16, from a file of plots/results/h100/."""
    return ch10_table(rows=read_h100(name), field="ms")


def ch10_persistent(keep, digits=2):
    """Step 9 over step 8 (speed) on the H100 run, over the shapes (B, H, N, d, causal) keep accepts."""
    return span([x["ch10_lean"] / x["ch10_persistent"] for k, x in ch10_h100_table("ch10_persistent.csv").items()
                 if keep(k)], digits)


COUNTER_RUNS = ("ch10_counter.csv", "ch10_counter_run3.csv")  # every shape, beside cuDNN
FASTEST_RUN = "ch10_fastest.csv"  # the fourth run, on another H100: the choice of `fastest`
LEVEL = 0.995  # step 9 over step 8 at or above this counts as level (rounds to 1.00 or more)


def ch10_counter(keep, digits=2, files=COUNTER_RUNS, num="ch10_lean", den="ch10_persistent"):
    """Step 9 taking key blocks from a counter on the H100: num's time over den's (by default
    step 9's speed over step 8's), over the runs `files` and the shapes (B, H, N, d, causal)
    keep accepts."""
    return span([x[num] / x[den] for f in files for k, x in ch10_h100_table(f).items()
                 if keep(k) and num in x and den in x], digits)


def ch10_counter_ms(impl, n, d, files):
    """impl's backward ms at N = n, d, without the mask, over the H100 runs `files`."""
    return [x[impl] for f in files for k, x in ch10_h100_table(f).items()
            if k[2] == n and k[3] == d and k[4] == 0 and impl in x]


def ch10_small_ms(name, n, d):
    """prepare_backward's and convert_dq's Nsight Compute times, and the main kernel's, at (N, d)."""
    rows = read_h100(name)
    ms = {r["kernel"]: float(r["measured_ms"]) for r in rows
          if r["chapter"] == "10" and r["variant"] == "fastest" and r["seq_len"] == str(n) and r["head_dim"] == str(d)}
    return ms["prepare_backward"], ms["convert_dq"], ms["specialized_backward"]


def ch10_block_fit():
    """Step 8 at d = 64 without the mask on the H100 at N = 1024, 4096, 16384 (the same 4,096
    key blocks, 8, 32, 128 query tiles each): the least-squares line of its time against the
    tiles a block over the waves of 132 SMs, and what the intercept leaves a block once the
    two small kernels (Nsight Compute, N = 4096) are taken out of it."""
    t = ch10_h100_table("ch10_vs_pytorch.csv")
    pts = sorted((k[2], x["ch10_lean"]) for k, x in t.items() if k[3] == 64 and k[4] == 0 and k[0] * k[2] == 16384)
    waves = -(-4096 // 132)
    xs = [waves * n / 128 for n, _ in pts]
    ys = [ms for _, ms in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
    intercept = my - slope * mx
    prep, conv, _ = ch10_small_ms("ch10_traffic_small_kernels.csv", 4096, 64)
    per_block = (intercept - prep - conv) / waves * 1e3
    tiles = 4096 // 128 * slope * 1e3
    return {"ms": ys, "slope": slope * 1e3, "intercept": intercept, "small": prep + conv, "block": per_block,
            "tiles": tiles, "share": per_block / (per_block + tiles) * 100}


def ch10_rows():
    """The lesson's measured table, row by row."""
    for (b, h, n, d, c), x in ch10_table().items():
        f = ch10_fastest(x, d)
        yield (f"| {b} | {h} | {n} | {d} | {'yes' if c else 'no'} | " +
               " | ".join(cell(x, i) for i in CH10_COLUMNS) +
               f" | {f / x['torch_cudnn']:.2f}× | {f / x['torch_flash']:.2f}× | {f / x['ch08_fastest']:.2f}× |")


def ch10_span(fn, keep, name="ch10_vs_pytorch.csv", digits=2, unit="×"):
    """The range of fn(x, d) over the rows whose (N, d) keep(n, d) accepts."""
    return span([fn(x, k[3]) for k, x in ch10_table(name).items() if keep(k[2], k[3])], digits, unit)


def ch10_tour_ratio(d):
    """fastest's tour rows with L and D read from device memory over those with L and D
    through the stage, shape by shape, at head dim d (the case study's second version)."""
    def rows(name):
        return {(r["seq_len"], r["causal"]): float(r["tflops"]) for r in read(name)
                if r["chapter"] == "10" and r["pass"] == "backward" and r["head_dim"] == str(d)}
    now, before = rows("ch10_tour_stats_global.csv"), rows("ch10_tour_stats_staged.csv")
    return [now[k] / before[k] for k in now if k in before]


def hf_gqa_claims():
    """docs/use_in_your_model.md: the training step with grouped-query K/V expanded before
    flashtut.attention's passes and unexpanded, on an H100 (hf_step_time_gqa_ab.csv, the mean
    of its rounds)."""
    runs = {}
    for r in read_h100("hf_step_time_gqa_ab.csv"):
        runs.setdefault((r["model"], r["attention"], r["kv"]), []).append(float(r["ms"]))
    ms = {k: statistics.mean(v) for k, v in runs.items()}
    step = lambda m: f"{ms[(m, 'tutorial', 'expanded')]:.1f} to {ms[(m, 'tutorial', 'unexpanded')]:.1f} ms"
    vs = lambda m, kv: f"{ms[(m, 'tutorial', kv)] / ms[(m, 'torch_cudnn', kv)]:.2f}×"
    return [("docs/use_in_your_model.md",
             f"the grouped-query Llama's step went from {step('llama_gqa')} with the tutorial's attention "
             f"({vs('llama_gqa', 'expanded')} → {vs('llama_gqa', 'unexpanded')} cuDNN's in the same process), "
             f"Qwen2's from {step('qwen2_gqa')} ({vs('qwen2_gqa', 'expanded')} → {vs('qwen2_gqa', 'unexpanded')}), "
             f"and the control's, Llama with 16 / 16 heads, from {step('llama_mha')}")]


def small_kernels_claims():
    """The case study's before and after of the two small kernels on the H100 (Nsight Compute,
    N = 4096): their times, and their share of the backward's three kernels."""
    b64, a64 = ch10_small_ms("ch10_traffic.csv", 4096, 64), ch10_small_ms("ch10_traffic_small_kernels.csv", 4096, 64)
    b128, a128 = ch10_small_ms("ch10_traffic.csv", 4096, 128), ch10_small_ms("ch10_traffic_small_kernels.csv", 4096, 128)
    share = lambda x: (x[0] + x[1]) / sum(x) * 100
    return [(CH10_CASE, f"`prepare_backward` {b64[0]:.3f} → {a64[0]:.3f} ms at d = 64 and {b128[0]:.3f} → "
                        f"{a128[0]:.3f} ms at d = 128, `convert_dq` {b64[1]:.3f} → {a64[1]:.3f} ms"),
            (CH10_CASE, f"At N = 4096 the two now take {share(a64):.1f}% (d = 64) and {share(a128):.1f}% (d = 128) of "
                        f"the backward there, down from {share(b64):.1f}% and {share(b128):.1f}%")]


def ch10_claims():
    long_ = lambda n, d: n >= 4096
    at = lambda dd: (lambda n, d: n >= 4096 and d == dd)

    def det(causal):  # step 4 over step 3 at N >= 4096, with or without the mask
        return span([x["ch10_deterministic"] / x["ch10_bulk_dq"] for k, x in ch10_table().items()
                     if k[2] >= 4096 and k[4] == causal])
    fast = ch10_fastest
    kernel_ms = {}
    dram = {}  # (N, d): measured and modelled DRAM bytes, reads and writes, over the pass's kernels
    for r in read("traffic.csv"):
        if r["chapter"] == "10" and r["variant"] == "fastest":
            kernel_ms.setdefault((r["seq_len"], r["head_dim"]), {})[r["kernel"]] = float(r["measured_ms"])
            x = dram.setdefault((int(r["seq_len"]), int(r["head_dim"])), [0.0, 0.0])
            x[0] += float(r["measured_read_bytes"]) + float(r["measured_write_bytes"])
            x[1] += float(r["model_read_bytes"]) + float(r["model_write_bytes"])
    small = lambda n: [(x["prepare_backward"] + x["convert_dq"]) / sum(x.values()) * 100
                       for (sn, _), x in kernel_ms.items() if sn == n]
    dram_ratio = {k: m / model for k, (m, model) in dram.items()}
    training = [(page, training_claim()) for page in ("README.md", CH10, "docs/mainpage.md")]
    fit = ch10_block_fit()
    return [(CH10, row) for row in ch10_rows()] + training + small_kernels_claims() + [
        (CH10, f"measured DRAM bytes are {span(dram_ratio.values())} the model's; the "
               f"{dram_ratio[(16384, 128)]:.2f} at N = 16384, d = 128"),
        (CH10_CASE, f"they take {span(small('4096'), 1, '%')} of the backward at N = 4096 and "
               f"{span(small('16384'), 1, '%')} at N = 16384, but {span(small('1024'), 1, '%')} at N = 1024"),
        (CH10, f"computes the same gradients {ch10_span(lambda x, d: x['torch_cudnn'] / x['ch08_fastest'], long_, digits=1)} "
               f"faster (`ch10_vs_pytorch.csv`, bf16, N ≥ 4096)"),
        (CH10, f"those ends cost {fit['block']:.1f} µs a block, {fit['share']:.0f}% of one at N = 4096"),
        (CH10_CASE, f"on the H100, {fit['ms'][0]:.2f}, {fit['ms'][1]:.2f} and {fit['ms'][2]:.2f} ms"),
        (CH10_CASE, f"has a slope of {fit['slope']:.2f} µs a tile and an intercept of {fit['intercept']:.2f} ms. The two "
                    f"small kernels take {fit['small']:.2f} ms of the intercept"),
        (CH10_CASE, f"which leaves {fit['block']:.1f} µs a block that does not grow with its tiles, against "
                    f"{fit['tiles']:.0f} µs of tiles at N = 4096"),
        (CH10, f"A fixed walk (`gridDim.x` apart) ran {ch10_persistent(lambda k: k[4] == 1)} step 8 under the mask"),
        (CH10_CASE, f"{ch10_counter(lambda k: k[2] == 1024)} step 8 at N = 1024 and "
                    f"{ch10_counter(lambda k: k[2] == 4096)} at 4096, causal or not; under the mask at N = 16384, "
                    f"{ch10_counter(lambda k: k[2] == 16384 and k[4] == 1 and k[3] == 64)} and "
                    f"{ch10_counter(lambda k: k[2] == 16384 and k[4] == 1 and k[3] == 128)} (d = 64, 128)"),
        (CH10_CASE, f"Against cuDNN at N = 4096 without the mask, "
                    f"{ch10_counter(lambda k: k[2] == 4096 and k[4] == 0, num='torch_cudnn')} (step 8: "
                    f"{ch10_counter(lambda k: k[2] == 4096 and k[4] == 0, num='torch_cudnn', den='ch10_lean')})"),
        (CH10_CASE, f"it measured {ch10_counter(lambda k: k[2] == 16384 and k[4] == 0, files=COUNTER_RUNS + ('ch10_counter_run2.csv',))} "
                    f"step 8."),
        (CH10_CASE, f"then {ch10_counter(lambda k: k[2] == 16384 and k[4] == 0 and k[3] == 128, files=('ch10_counter_alone.csv',))} and "
                    f"{ch10_counter(lambda k: k[2] == 16384 and k[4] == 0 and k[3] == 64, files=('ch10_counter_alone.csv',))}, "
                    f"and there step 8 itself took 14.23 and "
                    f"{ch10_counter_ms('ch10_lean', 16384, 64, ('ch10_counter_alone.csv',))[0]:.2f} ms at d = 64, against "
                    f"{span(ch10_counter_ms('ch10_lean', 16384, 64, COUNTER_RUNS + ('ch10_counter_run2.csv',)), 2, ' ms')} "
                    f"in the other three"),
        (CH10_CASE, f"Under the mask the prediction held at N ≤ 4096 "
                    f"({ch10_counter(lambda k: k[4] == 1 and k[2] in (1024, 4096))}, the top a little past its 1.06×)"),
        (CH10_CASE, "without the mask, " + ", ".join(
            f"{ch10_persistent(lambda k, n=n: k[4] == 0 and k[2] == n and k[3] == 64, 3)} and "
            f"{ch10_persistent(lambda k, n=n: k[4] == 0 and k[2] == n and k[3] == 128, 3)}"
            + (" step 8 at N = 1024 (d = 64, 128)" if n == 1024 else f" at N = {n}") for n in (1024, 4096, 16384))
            + f"; with it, {ch10_persistent(lambda k: k[4] == 1)}"),
        (CH10_CASE, f"dQ before dK {ch10_span(lambda x, d: x['ch10_dq_under_dk'] / x['ch10_lean'], at(64), LATEST, 3)} "
                    f"step 8's speed, the exponentials under dPᵀ "
                    f"{ch10_span(lambda x, d: x['ch10_exp_under_dp'] / x['ch10_lean'], at(64), LATEST, 3)}; at d = 128 they "
                    f"measured {ch10_span(lambda x, d: x['ch10_dq_under_dk'] / x['ch10_lean'], at(128), LATEST, 3)} and "
                    f"{ch10_span(lambda x, d: x['ch10_exp_under_dp'] / x['ch10_lean'], at(128), LATEST, 3)}"),
        (CH10, f"{ch10_span(lambda x, d: x['ch10_wgmma'] / x['ch08_fastest'], lambda n, d: True, 'ch10_steps.csv')} "
               f"chapter 08 on all six shapes"),
        (CH10, f"at d = 128, {ch10_span(lambda x, d: x['ch10_specialized'], at(128), digits=0, unit='')} TFLOP/s at "
               f"N ≥ 4096, **{ch10_span(lambda x, d: x['ch10_specialized'] / x['ch08_fastest'], at(128))} chapter 08**; "
               f"at d = 64, "
               f"{ch10_span(lambda x, d: x['ch10_specialized'], at(64), digits=0, unit='')} TFLOP/s, "
               f"**{ch10_span(lambda x, d: x['ch10_specialized'] / x['ch08_fastest'], at(64))} chapter 08**; "
               f"{ch10_span(lambda x, d: x['ch10_specialized'] / x['ch10_wgmma'], lambda n, d: True, 'ch10_steps.csv', 1)} "
               f"step 1"),
        (CH10, f"at d = 128, {ch10_span(lambda x, d: x['ch10_bulk_dq'], at(128), digits=0, unit='')} TFLOP/s at "
               f"N ≥ 4096, **{ch10_span(lambda x, d: x['ch10_bulk_dq'] / x['ch10_specialized'], at(128))} step 2** and "
               f"{ch10_span(lambda x, d: x['ch10_bulk_dq'] / x['ch08_fastest'], at(128))} chapter 08; at d = 64, "
               f"**{ch10_span(lambda x, d: x['ch10_bulk_dq'] / x['ch10_specialized'], at(64))} step 2**"),
        (CH10_CASE, f"step 2's atomics: {ch10_span(lambda x, d: x['ch10_bulk_dq_in_consumers'] / x['ch10_specialized'], lambda n, d: d == 128, 'ch10_steps.csv')} "
                    f"at d = 128"),
        (CH10_CASE, f"d = 64 ({ch10_span(lambda x, d: x['ch10_bulk_dq'] / x['ch10_specialized'], at(64))} step 2)"),
        (CH10_CASE, f"`fastest` at d = 64 measured {span(ch10_tour_ratio(64))} the staged version"),
        (CH10, f"non-causal, **{det(0)} step 3**; causal, **{det(1)} step 3**"),
        (CH10, f"**{ch10_span(lambda x, d: x['ch10_overlap'] / x['ch10_specialized'], at(64))} step 2** at d = 64, "
               f"N ≥ 4096"),
        (CH10, f"`tall` **{ch10_span(lambda x, d: x['ch10_tall'] / x['ch10_specialized'], at(64))} step 2**, `tall_bulk` "
               f"**{ch10_span(lambda x, d: x['ch10_tall_bulk'] / x['ch10_tall'], at(64))} `tall`**"),
        (CH10, f"**{ch10_span(lambda x, d: x['ch10_p_under_dp'] / x['ch10_bulk_dq'], at(128))} step 3** at d = 128 "
               f"(N ≥ 4096) and {ch10_span(lambda x, d: x['ch10_p_under_dp'] / x['ch10_bulk_dq'], at(64))} at d = 64"),
        (CH10, f"at d = 128, **{ch10_span(lambda x, d: x['ch10_lean'] / x['ch10_bulk_dq'], at(128))} step 3**; at d = 64, "
               f"**{ch10_span(lambda x, d: x['ch10_lean'] / x['ch10_tall'], at(64))} `tall`**, and the unchecked atomics "
               f"{span(ch10_unchecked_gain())} more"),
        (CH10, f"step 8 ran {ch10_span(lambda x, d: fast(x, d) / x['torch_flash'], at(128))} "
               f"FlashAttention-2 at d = 128 and {ch10_span(lambda x, d: fast(x, d) / x['torch_flash'], at(64))} at d = 64, "
               f"and {ch10_span(lambda x, d: fast(x, d) / x['torch_cudnn'], at(128))} and "
               f"{ch10_span(lambda x, d: fast(x, d) / x['torch_cudnn'], at(64))} cuDNN"),
        (CH10, f"On the H200, step 8 runs at up to {max(fast(x, k[3]) for k, x in ch10_table().items() if k[2] >= 4096) / probe_tflops() * 100:.0f}% "
               f"of the\n`wgmma` probe ({probe_tflops():.0f} TFLOP/s); cuDNN, at d = 128, at "
               f"{span([x['torch_cudnn'] / probe_tflops() * 100 for k, x in ch10_table().items() if k[2] >= 4096 and k[3] == 128], 0, '%')}"),
        ("README.md", f"fewer instructions between the products (the mask only on the tiles that need it, the softmax "
                      f"scale once on dK and dQ instead of on every dS) add "
                      f"{ch10_span(lambda x, d: x['ch10_lean'] / x['ch10_bulk_dq'], at(128))} at d = 128 and "
                      f"{ch10_span(lambda x, d: x['ch10_lean'] / x['ch10_tall'], at(64))} at d = 64"),
        ("README.md", f"alone are slower than chapter 08 "
                      f"({ch10_span(lambda x, d: x['ch10_wgmma'] / x['ch08_fastest'], lambda n, d: True, 'ch10_steps.csv')}: "
                      f"every copy, product and atomic waited for in turn)"),
        ("README.md", f"pass it ({ch10_span(lambda x, d: x['ch10_specialized'] / x['ch08_fastest'], at(128))} at d = 128, "
                      f"{ch10_span(lambda x, d: x['ch10_specialized'] / x['ch08_fastest'], at(64))} at d = 64)"),
        ("README.md", f"query tiles of 128 at d = 64 add "
                      f"{ch10_span(lambda x, d: x['ch10_tall'] / x['ch10_specialized'], at(64))} over step 2"),
        ("README.md", f"product, {ch10_span(lambda x, d: x['ch10_p_under_dp'] / x['ch10_bulk_dq'], at(128))} at d = 128"),
        ("README.md", f"runs (on an H100) {ch10_counter(lambda k: k[2] == 1024, files=COUNTER_RUNS + (FASTEST_RUN,))} "
                      f"step 8 at N = 1024 and "
                      f"{ch10_counter(lambda k: k[2] == 4096, files=COUNTER_RUNS + (FASTEST_RUN,))} at 4096, causal or "
                      f"not, and {ch10_counter(lambda k: k[2] == 16384, files=COUNTER_RUNS + (FASTEST_RUN,))} at 16384"),
        ("README.md", f"a fixed walk ran {ch10_persistent(lambda k: k[4] == 1)} step 8 under the mask"),
        ("docs/methodology.md", f"step 8 took "
                                f"{span(ch10_counter_ms('ch10_lean', 16384, 64, COUNTER_RUNS + ('ch10_counter_run2.csv',)), 2, ' ms')} "
                                f"at d = 64 in three runs where it followed cuDNN, and "
                                f"{ch10_counter_ms('ch10_lean', 16384, 64, ('ch10_counter_alone.csv',))[0]:.2f} ms in one"),
        ("docs/answers.md", f"at this shape it measured "
                            f"{ch10_counter(lambda k: k[2] == 16384 and k[4] == 1 and k[3] == 128)} step 8 on an H100"),
        ("README.md", f"cuDNN backward ({ch10_span(lambda x, d: fast(x, d) / x['torch_cudnn'], long_, LATEST)} in a "
                      f"later run with step 8's unchecked atomics; step 9, on an H100, "
                      f"{ch10_counter(lambda k: k[2] >= 4096, files=(FASTEST_RUN,), num='torch_cudnn')}; `fastest`"),
        *[(page, f"with step 8, {training_ratio(read_h100('training_step8.csv')):.3f}× cuDNN")
          for page in ("README.md", CH10, "docs/mainpage.md")],
        *[(page, training_claim(read("training.csv"))) for page in ("README.md", CH10, "docs/mainpage.md")],
        ("README.md", f"adds {ch10_span(lambda x, d: x['ch10_bulk_dq'] / x['ch10_specialized'], at(128))} at d = 128"),
        ("README.md", f"every run at {det(0)} step 3's speed without the mask and {det(1)} with it"),
        ("README.md", f"behind this tile's dQ add {ch10_span(lambda x, d: x['ch10_overlap'] / x['ch10_specialized'], at(64))} at d = 64"),
        ("README.md", f"N ≥ 4096 step 8 ran (H200) {ch10_span(lambda x, d: fast(x, d) / x['torch_flash'], at(128))} "
                      f"PyTorch's FlashAttention-2 backward at d = 128 and "
                      f"{ch10_span(lambda x, d: fast(x, d) / x['torch_flash'], at(64))} at d = 64, and "
                      f"{ch10_span(lambda x, d: fast(x, d) / x['torch_cudnn'], long_)} its cuDNN backward"),
        ("README.md", f"{ch10_span(lambda x, d: fast(x, d) / x['torch_flash'], at(128))} FlashAttention-2 at d = 128 and "
                      f"{ch10_span(lambda x, d: fast(x, d) / x['torch_flash'], at(64))} at d = 64 (N ≥ 4096), "
                      f"{ch10_span(lambda x, d: fast(x, d) / x['torch_cudnn'], long_)} cuDNN"),
    ]


def ch10_step9_claims():
    """Step 9 chosen as `fastest`: the fourth comparison run (ch10_fastest.csv), the chapter's
    program alternating steps 8 and 9 (ch10_counter_program.csv) and the SM clock sampled
    while it ran (ch10_clocks_n16384.csv), all on H100s."""
    one = lambda keep, **kw: ch10_counter(keep, files=(FASTEST_RUN,), **kw)
    program = {}
    for r in read_h100("ch10_counter_program.csv"):
        program.setdefault((r["run"], r["head_dim"]), {}).setdefault(r["variant"], []).append(float(r["ms"]))
    step9 = lambda d: [statistics.mean(x["lean"]) / statistics.mean(x["persistent"])
                       for (run, dd), x in program.items() if dd == d]
    busy = [r for r in read_h100("ch10_clocks_n16384.csv") if r["program_variant"] and float(r["power_w"]) > 300]
    mhz = [int(r["sm_mhz"]) for r in busy]
    mean = lambda v, f: statistics.mean(float(r[f]) for r in busy if r["program_variant"] == v)
    ratios = {k: x["ch10_lean"] / x["ch10_persistent"] for k, x in ch10_h100_table(FASTEST_RUN).items()
              if "ch10_persistent" in x}
    slower = {k: r for k, r in ratios.items() if r < LEVEL}
    return [
        (CH10, f"{ch10_counter(lambda k: k[2] == 1024, files=COUNTER_RUNS + (FASTEST_RUN,))} step 8 at\nN = 1024 and "
               f"{ch10_counter(lambda k: k[2] == 4096, files=COUNTER_RUNS + (FASTEST_RUN,))} at 4096, causal or not; "
               f"{ch10_counter(lambda k: k[2] == 16384, files=COUNTER_RUNS + (FASTEST_RUN,))} at 16384"),
        (CH10_CASE, f"{one(lambda k: k[2] == 1024)} step 8 at N = 1024 "
                    f"({one(lambda k: k[:2] == (8, 12))} at the training model's shape"),
        (CH10_CASE, f"{one(lambda k: k[2] == 4096)} at 4096, "
                    f"{one(lambda k: k[2] >= 16384 and k[4] == 1)} at 16384 and 32768 under the mask, and "
                    f"{one(lambda k: k[2] == 16384 and k[4] == 0 and k[3] == 64)} and "
                    f"{one(lambda k: k[2] == 16384 and k[4] == 0 and k[3] == 128)} at 16384 without it"),
        (CH10_CASE, f"step 9 at {span(step9('128'))} step 8 at d = 128 and {span(step9('64'))} at d = 64"),
        (CH10_CASE, f"both kernels ran between {min(mhz):,} and {max(mhz):,} MHz and averaged within "
                    f"{abs(mean('lean', 'sm_mhz') - mean('persistent', 'sm_mhz')):.0f} MHz of each other"),
        (CH10_CASE, f"level or ahead on {len(ratios) - len(slower)} of {len(ratios)}\nshapes "
                    f"({min(r for r in ratios.values() if r >= LEVEL):.3f}× at N = 2048, d = 128, causal) and behind on "
                    f"{number_word(len(slower))}, all at N = {', '.join(sorted({str(k[2]) for k in slower}))} "
                    f"({span(list(slower.values()))}:"),
        (CH10_CASE, "(step 9's two gave " + " and ".join(f"{training_ratio(part):.3f}×" for part in training_calls())
                    + ")"),
        (CH10_CASE, f"training step ran {training_ratio(read_h100('training.csv')):.3f}× cuDNN's on an H100, against "
                    f"{training_ratio(read_h100('training_step8.csv')):.3f}× with step 8"),
        ("docs/methodology.md", f"both drew over 500 W on average ({mean('lean', 'power_w'):.0f} and "
                                f"{mean('persistent', 'power_w'):.0f}) and ran between {min(mhz):,} and {max(mhz):,} MHz, "
                                f"averaging {mean('lean', 'sm_mhz'):,.0f} and {mean('persistent', 'sm_mhz'):,.0f}"),
    ]


# ---- training: training.csv (chapters 09-10; the H100's with step 9, the H200's before) ----


def training_runs(csv_rows):
    """Each run's final loss (the mean of its last 20 steps) and median step (steps 11 on),
    keyed (attention, seed, repeat), and `of`, which lists an attention's values."""
    runs = {}
    for r in csv_rows:
        runs.setdefault((r["attention"], r["seed"], r.get("repeat", "0")), []).append(
            (int(r["step"]), float(r["loss"]), float(r["ms"])))
    loss, step = {}, {}
    for key, rows in runs.items():
        rows.sort()
        loss[key] = sum(x[1] for x in rows[-20:]) / len(rows[-20:])
        step[key] = statistics.median(x[2] for x in rows[10:])
    of = lambda att, table, seed=None: [v for k, v in table.items() if k[0] == att and seed in (None, k[1])]
    return loss, step, of


def training_claim(rows=None):
    """The training run's sentence, from `rows` (by default the H100's training.csv, step 9 as
    chapter 10's `fastest`; read as plots/plot_training.py reads it, without matplotlib): the
    tutorial's final losses per seed (the mean of a run's last 20 steps), PyTorch's band over
    both backends, and each attention's median over its runs of their median step (steps 11
    on), with the tutorial's ratios to cuDNN and FlashAttention-2."""
    rows = read_h100("training.csv") if rows is None else rows
    loss, _, of = training_runs(rows)
    torch_losses = [v for k, v in loss.items() if k[0] != "flashtut"]
    s0, s1 = of("flashtut", loss, "0"), of("flashtut", loss, "1")
    t, fa2, cudnn = median_steps(rows).values()
    both = lambda xs: f"{min(xs):.4f}" if f"{min(xs):.4f}" == f"{max(xs):.4f}" else f"{min(xs):.4f}–{max(xs):.4f}"
    return (f"{number_word(len(s0) + len(s1))} final training losses ({both(s0)} "
            f"at seed 0, {both(s1)} at seed 1) against [{min(torch_losses):.4f}, "
            f"{max(torch_losses):.4f}] over {number_word(len(torch_losses))} of FlashAttention-2 and cuDNN. "
            f"Replayed as CUDA graphs, its step is {t:.2f} ms against cuDNN's {cudnn:.2f} and "
            f"FlashAttention-2's {fa2:.2f}: **{t / cudnn:.3f}×** and **{t / fa2:.3f}×**")


# ---- chapter 12: ring.csv ------------------------------------------------------------------

CH12 = "chapters/12_ring_attention/README.md"


def ch12_claims():
    """The lesson's table (ranks, pass, ms, TFLOP/s a GPU, one GPU's ms, efficiency) and the
    main page's efficiencies, from ring.csv."""
    rows = read("ring.csv")
    mask = lambda r: "causal" if r["causal"] == "1" else "none"
    # Both tables: the chunk-pair schedule's (ring.csv) and one call a visit's (ring_one_call.csv).
    out = [(CH12, f"| {int(r['seq_len']):,} | {mask(r)} | {r['ranks']} | {r['pass']} | {float(r['ms']):.1f} | "
                  f"{float(r['tflops_per_rank']):.0f} | {float(r['single_ms']):.1f} | {float(r['efficiency']):.2f} |")
           for r in rows + read("ring_one_call.csv")]
    eff = {(int(r["ranks"]), r["pass"], int(r["seq_len"]), int(r["causal"])): float(r["efficiency"]) for r in rows}
    pct = lambda ps, n: "–".join(dict.fromkeys(f"{round(eff[(2, ps, n, c)] * 100)}" for c in (1, 0)
                                               if (2, ps, n, c) in eff))
    two = lambda ps: span([v for k, v in eff.items() if k[0] == 2 and k[1] == ps], unit="")
    out.append(("README.md", f"{two('forward')} (forward) and {two('backward')} (backward) of one GPU's rate on "
                             f"two H200s"))
    out += [(CH12, f"At 131,072 tokens the forward keeps {pct('forward', 131072)}% of one GPU's rate on two"),
            (CH12, f"the backward {pct('backward', 131072)}%"),
            (CH12, f"the forward keeps {pct('forward', 262144)}% and the backward {pct('backward', 262144)}%"),
            (CH12, f"at 524,288 tokens {pct('forward', 524288)}% and {pct('backward', 524288)}%")]
    return out


# ---- chapter 06's second lesson: precision_vs_pytorch.csv ------------------------------

CH06 = "chapters/06_tensor_cores/README.md"


def sci(x):
    """0.0574 -> "5.7e-2", the chapter's style."""
    m, e = f"{float(x):.1e}".split("e")
    return f"{m}e{int(e)}"


def ch06_precision_claims():
    """The second lesson's table, its bullets and exercise 7's measured range; the identities
    the text states (the bf16 grid is PyTorch's three kernels at d = 64, warp_rows is
    grid_half, grid_f32 is PyTorch with float32 scores, chapter 07 within 1% of
    FlashAttention-2) are asserted."""
    prec = {(r["impl"], r["head_dim"], r["logits"], r["seq_len"]): r for r in read("precision_vs_pytorch.csv")}
    o = lambda i, d, s, n: float(prec[(i, str(d), str(s), str(n))]["o_rel_err"])
    lse = lambda i, d, s, n: float(prec[(i, str(d), str(s), str(n))]["lse_rel_err"])
    cols = ["ch06_grid_half", "torch_three_kernels", "ch06_grid_f32", "ch07", "torch_flash"]
    shapes = [(1, 64, 4096), (1, 128, 4096), (100, 64, 1024), (100, 64, 4096), (100, 128, 1024), (100, 128, 4096)]
    out = [(CH06, f"| {s} | {d} | {n} | " + " | ".join(f"{sci(o(i, d, s, n))} / {sci(lse(i, d, s, n))}" for i in cols)
            + " |") for s, d, n in shapes]
    out.append((CH06, f"at N = 2 still {sci(lse('ch06_grid_half', 64, 100, 2))} (d = 64) and "
                      f"{sci(lse('ch06_grid_half', 128, 100, 2))} (d = 128), against `grid_f32`'s "
                      f"{sci(lse('ch06_grid_f32', 64, 100, 2))} and {sci(lse('ch06_grid_f32', 128, 100, 2))}"))
    band = all(2 ** -8 / 12 ** .5 <= lse("ch06_grid_half", d, 100, n) <= 2 ** -7 / 12 ** .5
               for d in (64, 128) for n in (2, 64, 1024, 4096))
    r = [o("ch06_grid_half", d, 100, n) / o("torch_flash", d, 100, n) for d in (64, 128) for n in (1024, 4096)]
    out.append((CH06, f"Its O, N ≥ 1024: {min(r):.0f}–{max(r):.0f}× FlashAttention-2's error"))
    grids = ("1", "100"), ("2", "64", "1024", "4096"), ("o_rel_err", "lse_rel_err")
    same64 = all(prec[("ch06_grid_half", "64", s, n)][c] == prec[("torch_three_kernels", "64", s, n)][c]
                 for s in grids[0] for n in grids[1] for c in grids[2])
    warp = all(prec[("ch06_grid_half", d, s, n)][c] == prec[("ch06_warp_rows", d, s, n)][c]
               for d in ("64", "128") for s in grids[0] for n in grids[1] for c in grids[2])
    f32 = all(sci(o("ch06_grid_f32", d, s, n)) == sci(o("torch_float32_scores", d, s, n)) for s, d, n in shapes)
    ch07 = max(abs(o("ch07", d, s, n) / o("torch_flash", d, s, n) - 1) for s, d, n in shapes) < 0.01
    f = [o("ch06_grid_f32", d, s, n) / o("torch_flash", d, s, n) for s, d, n in shapes]
    out.append((CH06, f"at {min(f):.2f}–{max(f):.2f}× FlashAttention-2's O error"))
    sp = lambda v: f"{sci(min(v))} to {sci(max(v))}"
    out.append((CH06, f"measured {sp([o('ch06_grid_half', d, 100, 64) for d in (64, 128)])} and "
                      f"{sp([o('ch06_grid_half', d, 100, 4096) for d in (64, 128)])}"))
    for ok, what in ((band, "the bf16 grid's lse at logits ~100 in the predicted band"),
                     (same64, "grid_half printing PyTorch's three kernels' digits at d = 64"),
                     (warp, "warp_rows equal to grid_half"), (f32, "grid_f32 equal to PyTorch with float32 scores"),
                     (ch07, "chapter 07 within 1% of FlashAttention-2")):
        if not ok:  # a claim of the text's that the CSV no longer bears out: a quote it cannot contain
            out.append((CH06, f"[precision_vs_pytorch.csv no longer shows {what}]"))
    return out


# ---- chapter 11: decode.csv, ch11_decode_rounded_up.csv, decode_splits.csv, decode_vs_pytorch.csv ----

CH11 = "chapters/11_decoding/README.md"
CH11_CASE = "chapters/11_decoding/case_study.md"


def decode_times(name="decode.csv"):
    """{(B, H_kv, N_q, N_k): {variant: ms}} of chapter 11's program rows."""
    t = {}
    for r in read(name):
        key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
        t.setdefault(key, {})[r["variant"]] = float(r["ms"])
    return t


def of_read(t, key, variant):
    """The time stream_read takes to read the shape's K and V once over the variant's."""
    return t[key]["stream_read"] / t[key][variant]


def decode_times_by(name, column):
    """{value of `column`: {(B, H_kv, N_q, N_k): {variant: ms}}} of chapter 11's program rows,
    for a file of runs told apart by `column` (an A/B)."""
    t = {}
    for r in read(name):
        key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
        t.setdefault(r[column], {}).setdefault(key, {})[r["variant"]] = float(r["ms"])
    return t


def h100_by_setting(name):
    """{(B, H_kv, N_q, N_k): {(setting, variant): ms}} of one round of an A/B of chapter 11's
    program on an H100 (plots/results/h100/), its settings as the `setting` column names them."""
    t = {}
    for r in read_h100(name):
        key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
        t.setdefault(key, {})[(r["setting"], r["variant"])] = float(r["ms"])
    return t


def h100_ab(name):
    """{setting without its round: {(B, H_kv, N_q, N_k): {variant: mean ms of the rounds}}} of
    an A/B of chapter 11's program on an H100 (plots/results/h100/), its rounds told apart by
    the `setting` column's _round suffix."""
    runs = {}
    for r in read_h100(name):
        key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
        runs.setdefault((r["setting"].rsplit("_round", 1)[0], key, r["variant"]), []).append(float(r["ms"]))
    out = {}
    for (setting, key, variant), ms in runs.items():
        out.setdefault(setting, {}).setdefault(key, {})[variant] = statistics.mean(ms)
    return out


def h100_grid(name):
    """{(B, H_kv, N_q, N_k): {variant: ms}} of a run of chapter 11's program over a grid on an
    H100 (plots/results/h100/)."""
    g = {}
    for x in read_h100(name):
        g.setdefault((int(x["batch"]), int(x["heads_kv"]), int(x["seq_len"]), int(x["len_kv"])), {})[x["variant"]] = float(x["ms"])
    return g


def h100_pytorch(name, by=None):
    """{(B, H_kv, N_q, N_k): {impl: ms}} of the implementations that ran in a
    decode_vs_pytorch.py file on an H100; with `by` (a column, e.g. repeat), keyed by
    (that column's value, B, H_kv, N_q, N_k)."""
    pt = {}
    for r in read_h100(name):
        if r["status"] == "ok":
            key = (int(r["batch"]), int(r["heads_kv"]), int(r["len_q"]), int(r["len_kv"]))
            pt.setdefault((r[by],) + key if by else key, {})[r["impl"]] = float(r["ms"])
    return pt


def h100_graphs(name, scale=1, by=None):
    """{(B, H_kv, N_q, N_k): {(impl, timing): ms · scale}} of the rows that ran in a
    decode_vs_pytorch.py --graph file (decode_graphs.csv) on an H100; with `by` (a column,
    e.g. repeat), keyed by (that column's value, B, H_kv, N_q, N_k)."""
    g = {}
    for r in read_h100(name):
        if r["status"] == "ok":
            key = (int(r["batch"]), int(r["heads_kv"]), int(r["len_q"]), int(r["len_kv"]))
            g.setdefault((r[by],) + key if by else key, {})[(r["impl"], r["timing"])] = float(r["ms"]) * scale
    return g


def ch11_repeat_claims():
    """The case study's repeats on an H100: the program in six processes
    (ch11_process_repeats.csv) and decode_vs_pytorch --graph in three
    (ch11_decode_graphs_repeats.csv, its calls in ch11_decode_graphs_repeats_calls.csv), µs."""
    prog = {}
    for r in read_h100("ch11_process_repeats.csv"):
        key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]), r["variant"])
        prog.setdefault(key, []).append(float(r["ms"]) * 1000)
    graphs = h100_graphs("ch11_decode_graphs_repeats.csv", 1000, by="repeat")
    calls = h100_pytorch("ch11_decode_graphs_repeats_calls.csv", by="repeat")
    times = {}  # (B, H_kv, N_q, N_k, impl, timing): [µs of each repeat]
    for key, row in graphs.items():
        for (impl, timing), us_ in row.items():
            times.setdefault(key[1:] + (impl, timing), []).append(us_)
    for key, row in calls.items():
        for impl, ms in row.items():
            times.setdefault(key[1:] + (impl, "call"), []).append(ms * 1000)
    us = lambda xs, f=1: f"{min(xs):,.{f}f}–{max(xs):,.{f}f}"
    one, eight = (128, 1, 1, 8192), (16, 8, 1, 131072)
    t = lambda shape, impl, timing: times[shape + (impl, timing)]
    cudnn = [abs(x / c - 1) for key in {k[:4] for k in times} for timing in ("graph", "call_again")
             for c, x in zip(t(key, "torch_cudnn", "call"), t(key, "torch_cudnn", timing))]
    return [(CH11_CASE, f"did not move: {us(prog[one + ('fastest',)])} µs at B = 128 with 32 heads on one"),
            (CH11_CASE, f"the call took {us(t(one, 'ch11', 'call'))} µs before its capture, the replay "
                        f"{us(t(one, 'ch11', 'graph'))}, and the same call after it {us(t(one, 'ch11', 'call_again'))}"),
            (CH11_CASE, f"the replay took {us(t(eight, 'ch11', 'graph'))} µs against "
                        f"{us(t(eight, 'ch11', 'call'))} for the call, and {us(t(eight, 'ch11', 'call_again'))} after"),
            (CH11_CASE, f"back-to-back replays ran at the call's pace ({us(t(eight, 'ch11', 'loop_graph'))})"),
            (CH11_CASE, f"cuDNN's replay and second call were within {math.ceil(max(cudnn) * 100)}% of its call")]


def ch11_switch_claims():
    """The case study's graphs under the library's launch switches, on an H100
    (ch11_decode_graphs_switches.csv: decode_vs_pytorch --graph in one process per setting,
    the plain call's rows with timing `call`), µs."""
    times = {}  # (B, H_kv, N_q, N_k, timing): [µs under each setting]
    for key, row in h100_graphs("ch11_decode_graphs_switches.csv", 1000, by="setting").items():
        for timing in ("call", "graph"):
            times.setdefault(key[1:] + (timing,), []).append(row[("ch11", timing)])
    us = lambda xs: f"{min(xs):,.1f}–{max(xs):,.1f}"
    one, eight = (128, 1, 1, 8192), (16, 8, 1, 131072)
    slower = lambda shape: round((sum(times[shape + ("graph",)]) / sum(times[shape + ("call",)]) - 1) * 100)
    return [(CH11_CASE, f"the replay at B = 128 took {us(times[one + ('graph',)])} µs against "
                        f"{us(times[one + ('call',)])} for the call, and at 131,072 keys "
                        f"{us(times[eight + ('graph',)])} against {us(times[eight + ('call',)])}"),
            (CH11_CASE, f"The slowdown is a rate (about {slower(one)}% and {slower(eight)}% of each step")]


def ch11_merge_claims():
    """The merge's before and after (ch11_merge_ab.csv: the program from the code before the
    change, tree base, and after it, tree this): the case study's table and the lesson's
    sentence."""
    t = decode_times_by("ch11_merge_ab.csv", "tree")
    base, this = t["base"], t["this"]
    us = lambda tree, k: tree[k]["tensor_cores"] * 1000
    out = [(CH11_CASE, f"| {k[0]} | {k[1]} | {k[3]:,} | {us(base, k):.1f} | {us(this, k):.1f} | "
                       f"{us(base, k) / us(this, k):.2f} | {of_read(this, k, 'tensor_cores'):.2f} |")
           for k in this if "tensor_cores" in this[k]]
    mqa, gqa = (1, 1, 1, 32768), (1, 8, 1, 32768)
    out += [(CH11_CASE, f"The prediction held: {us(base, mqa):.1f} → {us(this, mqa):.1f} µs with 32 heads on one at "
                        f"32,768 keys, and {of_read(this, gqa, 'tensor_cores'):.2f} of the read with 32 on 8")]
    return out


def ch11_merge_block_claims():
    """The merge's second rewrite (a running maximum a thread, 8/4/2/1 rows a block) against
    the code before either, on an H100 (plots/results/h100/ch11_merge_batch_ab.csv, two rounds in
    opposite orders; the first form's in ch11_merge_ab_block_a_row.csv): each time the mean
    of its rounds, the read's the mean over both trees' runs; the case study's table, its
    first form's figures, and the lesson's sentence; and the comparison with cuDNN."""
    def means(name):
        runs = {}
        for r in read_h100(name):
            key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
            tree = "both" if r["variant"] == "stream_read" else r["tree"]
            runs.setdefault((tree, key, r["variant"]), []).append(float(r["ms"]) * 1000)
        return {k: statistics.mean(v) for k, v in runs.items()}
    m, first = means("ch11_merge_batch_ab.csv"), means("ch11_merge_ab_block_a_row.csv")
    frac = lambda t, k: m[("both", k, "stream_read")] / m[(t, k, "tensor_cores")]
    gain = lambda t, k: t[("base", k, "tensor_cores")] / t[("this", k, "tensor_cores")]
    shown = [(1, 1, 1, n) for n in (1024, 8192, 32768, 131072)] + [(1, 1, 4, 32768), (1, 8, 1, 32768),
                                                                    (16, 1, 1, 1024), (16, 1, 1, 32768), (16, 8, 1, 32768)]
    out = [(CH11_CASE, f"| {k[0]} | {k[1]} | {k[2]} | {k[3]:,} | {m[('base', k, 'tensor_cores')]:.1f} | "
                       f"{m[('this', k, 'tensor_cores')]:.1f} | {gain(m, k):.2f} | {frac('base', k):.2f} → {frac('this', k):.2f} |")
           for k in shown]
    a, b = (1, 1, 1, 32768), (1, 1, 1, 131072)
    out += [(CH11_CASE, f"{gain(first, a):.2f}× at 32,768 keys, but {gain(first, (1, 1, 1, 1024)):.2f}× at 1,024 and "
                        f"{gain(first, (16, 1, 1, 32768)):.2f}× at\nB = 16 with 32 heads on one"),
            (CH11_CASE, f"{m[('base', a, 'tensor_cores')]:.1f} → {m[('this', a, 'tensor_cores')]:.1f} µs at 32,768 keys"),
            (CH11, f"{gain(m, a):.2f}× at\n32,768 keys ({frac('base', a):.2f} → {frac('this', a):.2f} of the read) and "
                   f"{gain(m, b):.2f}× at 131,072 ({frac('base', b):.2f} → {frac('this', b):.2f})"),
            ("README.md", f"from {frac('base', a):.2f} to {frac('this', a):.2f} of the read at 32,768 keys and from "
                          f"{frac('base', b):.2f} to {frac('this', b):.2f} at 131,072")]
    pt = h100_pytorch("ch11_decode_vs_pytorch.csv")
    cudnn = lambda n: pt[(1, 1, 1, n)]["torch_cudnn"] / pt[(1, 1, 1, n)]["ch11"]
    out.append((CH11_CASE, f"is {cudnn(1024):.2f} (1k keys), {cudnn(8192):.2f} (8k), {cudnn(32768):.2f} (32k) and "
                           f"{cudnn(131072):.2f} (128k)"))
    return out


def ch11_wgmma_claims():
    """Step 6 on an H100 (plots/results/h100/): the lesson's table at N_k = 32768 and its
    spans over the grid, the kernels as they stand (ch11_grid_row32.csv: every variant, one
    process a shape); the pages through step 6's first form and its grid (ch11_wgmma_grid.csv),
    PyTorch beside it (ch11_decode_vs_pytorch_wgmma.csv); the
    case study's first form (ch11_wgmma_sweep.csv), stages, warpgroups, pages in order and
    table loads (each an A/B of two rounds, told apart by `setting`)."""
    def times(name):
        t = {}
        for r in read_h100(name):
            key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
            t.setdefault(key, {})[r["variant"]] = float(r["ms"])
        return t

    g, first = times("ch11_wgmma_grid.csv"), times("ch11_wgmma_sweep.csv")
    now = times("ch11_grid_row32.csv")
    rows = lambda k: 32 // k[1] * k[2]
    big = lambda k, t=g: k[3] >= 32768 and "stream_read" in t[k]
    gain = lambda t, pick: span([t[k]["tensor_cores"] / t[k]["wgmma"] for k in t if pick(k)])
    frac = lambda pick, v, t=g: span([of_read(t, k, v) for k in t if big(k, t) and pick(k)], unit="")
    paged = lambda pick: span([g[k]["contiguous"] / g[k][p] for k in g if big(k) and pick(k)
                               for p in ("paged_16", "paged_64", "paged_256")])
    out = [(CH11, f"| {k[0]} | {k[1]} | {k[2]} | {rows(k)} | " +
                  " | ".join(f"{of_read(now, k, v):.2f}" for v in ("tensor_cores", "wgmma", "fastest")) + " |")
           for k in [(1, 8, 4, 32768), (16, 8, 4, 32768), (1, 1, 1, 32768), (16, 1, 1, 32768), (128, 1, 1, 32768),
                     (1, 1, 4, 32768), (16, 1, 4, 32768), (128, 1, 4, 32768)]]
    mqa = (1, 1, 1, 32768)
    mqa_now = lambda q, v: frac(lambda k: k[1] == 1 and k[2] == q, v, now)  # 32 heads on one, q query rows
    out += [(CH11, f"`wgmma` ran {gain(now, lambda k: rows(k) == 128)} `tensor_cores` with 128 rows, "
                   f"{gain(now, lambda k: rows(k) == 32)} with 32, {gain(now, lambda k: rows(k) == 16)} with 16 and "
                   f"{gain(now, lambda k: rows(k) <= 4)} with one or four"),
            (CH11, f"128 rows ({frac(lambda k: rows(k) == 128, 'fastest', now)} of the read at N_k ≥ 32k, where step 5 "
                   f"read {frac(lambda k: rows(k) == 128, 'tensor_cores', now)})"),
            (CH11, f"({of_read(now, mqa, 'tensor_cores'):.2f} → {of_read(now, mqa, 'wgmma'):.2f} at B = 1)"),
            ("README.md", f"32 heads on one read at {mqa_now(1, 'fastest')} of the read with one row and "
                          f"{mqa_now(4, 'fastest')} with four at N_k ≥ 32k, where `mma.sync` gave "
                          f"{mqa_now(1, 'tensor_cores')} and {mqa_now(4, 'tensor_cores')}"),
            (CH11_CASE, f"step 5 read at {frac(lambda k: rows(k) == 128, 'tensor_cores')} of the read at every batch"),
            (CH11, f"rows each thread finding its own rows' pages had cost a third more instructions and\n"
                   f"{paged(lambda k: rows(k) == 128)}"),
            (CH11_CASE, f"With 128 rows it ran at {paged(lambda k: rows(k) == 128)} its contiguous"),
            (CH11_CASE, f"cache over the grid (`ch11_wgmma_grid.csv`), outside the chapter's 5%; with 32 rows "
                        f"{paged(lambda k: rows(k) == 32)}, with 16 or fewer {paged(lambda k: rows(k) <= 16)}"),
            (CH11_CASE, f"{gain(first, lambda k: rows(k) == 128)} with 128 rows, {gain(first, lambda k: rows(k) == 32)} "
                        f"with 32, {gain(first, lambda k: rows(k) == 16)} with 16 and {gain(first, lambda k: rows(k) == 4)} "
                        f"with 4"),
            (CH11_CASE, "reached only " + span([first[k]["stream_read"] / first[k]["wgmma"] for k in first
                                                 if rows(k) == 128 and k[0] >= 16 and k[3] >= 32768], unit="")
                        + " of the read at B ≥ 16")]
    ex = lambda q: (16, 1, q, 32768)
    out += [(CH11, f"step 6 gains {now[ex(1)]['tensor_cores'] / now[ex(1)]['wgmma']:.2f}× and "
                   f"{now[ex(4)]['tensor_cores'] / now[ex(4)]['wgmma']:.2f}×"),
            ("docs/answers.md", f"{now[ex(1)]['tensor_cores'] * 1e3:.1f} → {now[ex(1)]['wgmma'] * 1e3:.1f} µs with one row "
                                f"({now[ex(1)]['tensor_cores'] / now[ex(1)]['wgmma']:.2f}×, {of_read(now, ex(1), 'tensor_cores'):.2f} → "
                                f"{of_read(now, ex(1), 'wgmma'):.2f} of the read) and {now[ex(4)]['tensor_cores'] * 1e3:.1f} → "
                                f"{now[ex(4)]['wgmma'] * 1e3:.1f} µs with four ({now[ex(4)]['tensor_cores'] / now[ex(4)]['wgmma']:.2f}×, "
                                f"{of_read(now, ex(4), 'tensor_cores'):.2f} → {of_read(now, ex(4), 'wgmma'):.2f})")]
    w = h100_ab("ch11_wgmma_warpgroups.csv")
    one, two = w["one_warpgroup"], w["two_warpgroups"]
    rd = lambda k: statistics.mean([one[k]["stream_read"], two[k]["stream_read"]])
    out += [(CH11_CASE, f"| {k[0]} | {k[3]:,} | {one[k]['wgmma'] * 1e3:.1f} | {two[k]['wgmma'] * 1e3:.1f} | "
                        f"{one[k]['wgmma'] / two[k]['wgmma']:.2f} | {rd(k) / one[k]['wgmma']:.2f} → "
                        f"{rd(k) / two[k]['wgmma']:.2f} |") for k in one]
    st = h100_ab("ch11_wgmma_stages.csv")
    out.append((CH11_CASE, "(`ch11_wgmma_stages.csv`): " + span([st["two_stages"][k]["wgmma"] / st["three_stages"][k]["wgmma"]
                                                              for k in st["two_stages"]]) + "."))
    po = h100_ab("ch11_pages_in_order.csv")
    order = lambda s: span([po[s][k]["contiguous"] / po[s][k][p] for k in po[s] if k[1] == 1 and k[2] == 4
                            for p in ("paged_16", "paged_64", "paged_256")])
    out.append((CH11_CASE, f"{order('in_order')} the contiguous cache in order, {order('scattered')} scattered, with 128 rows"))
    tl = h100_ab("ch11_table_loads_ab.csv")
    a, b = tl["loads_beside_copies"], tl["loads_under_pv"]
    moved = lambda p, pick: span([a[k][p] / b[k][p] for k in a if pick(k)])
    wide = lambda k: k[1] == 1 and k[2] == 4
    out.append((CH11_CASE, f"{moved('paged_256', wide)} with 128 rows at pages of\n256, {moved('paged_64', wide)} at 64, "
                           f"but {moved('paged_16', wide)} at pages of 16 and {moved('paged_16', lambda k: True)} over all "
                           f"shapes"))
    rw = h100_ab("ch11_paged_rows_ab.csv")
    a, b = rw["offsets_per_thread"], rw["offsets_in_shared_memory"]
    two = lambda k: k[1] == 1 and k[2] == 4 and k[0] >= 16  # two warpgroups a block
    pages = ("paged_16", "paged_64", "paged_256")
    out.append((CH11_CASE, f"paged cache gained {span([a[k][p] / b[k][p] for k in a if two(k) for p in pages])} and ran at "
                           f"{span([b[k]['contiguous'] / b[k][p] for k in b if two(k) for p in pages])} its contiguous cache, "
                           f"where it had run\nat {span([a[k]['contiguous'] / a[k][p] for k in a if two(k) for p in pages])}"))
    out.append((CH11_CASE, f"With one warpgroup it gained "
                           f"{span([a[k][p] / b[k][p] for k in a if not two(k) for p in ('paged_64', 'paged_256')])} at pages "
                           f"of 64 and 256 tokens but\n{span([a[k]['paged_16'] / b[k]['paged_16'] for k in a if not two(k)])} "
                           f"at pages of 16"))
    first = h100_pytorch("ch11_decode_vs_pytorch_wgmma.csv")  # step 6's first form, decode_merge
    pt = h100_pytorch("ch11_decode_vs_pytorch_splits_with_keys.csv")  # the merges and splits as they stand
    ratio = lambda k, t=pt: min(v for i, v in t[k].items() if i.startswith("torch")) / t[k]["ch11"]
    below = sorted(ratio(k) for k in pt if ratio(k) < 1)
    mq = lambda pick: span([ratio(k) for k in pt if k[1] == 1 and k[2] == 1 and k[3] >= 32768 and pick(k[0])])
    four = lambda pick: span([ratio(k) for k in pt if k[2] == 4 and pick(k)])
    out += [(CH11, f"PyTorch's fastest backend on {len(pt) - len(below)} shapes, and {below[0]:.3f}–{below[-1]:.3f}× "
                   f"cuDNN on the other {len(below)}"),
            (CH11, f"(`ch11_decode_vs_pytorch_splits_with_keys.csv`, the whole grid, {len(pt)} shapes)"),
            (CH11, f"heads on one and one row, {mq(lambda b: b >= 16)} at B ≥ 16 and {mq(lambda b: b == 1)} at B = 1 "
                   f"from 32k keys; at 1k\nkeys and B = 1, {ratio((1, 1, 1, 1024)):.2f}× with 32 on one and "
                   f"{ratio((1, 8, 1, 1024)):.2f}× with 32 on 8, where step 6's first form ran\n"
                   f"{ratio((1, 1, 1, 1024), first):.2f}× and {ratio((1, 8, 1, 1024), first):.2f}×"),
            (CH11, f"{four(lambda k: k[0] >= 16 and k[1] == 32)} at B ≥ 16 with 32 on 32, "
                   f"{four(lambda k: not (k[0] >= 16 and k[1] == 32))} elsewhere.")]
    return out


def ch11_hybrid_claims():
    """Step 6's paged rows found once for two warpgroups, and the warpgroup rule by keys a
    split (plots/results/h100/): the A/B of the rows (ch11_paged_rows_hybrid.csv), one
    warpgroup against two (ch11_wgmma_warpgroups_hybrid.csv), the rule against the first
    one (ch11_wgmma_rule_ab.csv), the chapter's grid through fastest (ch11_grid_hybrid.csv)."""
    pages = ("paged_16", "paged_64", "paged_256")
    rows = lambda k: 32 // k[1] * k[2]
    # The heuristics as the library computed them when these files were measured, on 132 SMs
    # at d = 128 (one block a SM either way): the splits of a grid (at least 256 keys a split
    # then; step 6 now splits down to one tile, which changes no shape's warpgroups), a
    # split's keys in whole 128-key tiles.
    splits = lambda blocks, n: max(1, min(132 // blocks, (n + 255) // 256, 128))
    keys_two = lambda k: -(-(-(-k[3] // splits(k[0] * -(-rows(k) // 128), k[3]))) // 128) * 128
    two_first = lambda k: rows(k) > 64 and splits(k[0] * -(-rows(k) // 64), k[3]) <= 8  # the first rule
    two_now = lambda k: rows(k) > 64 and keys_two(k) >= 1024

    h = h100_ab("ch11_paged_rows_hybrid.csv")
    kv, sh = h["kvpages"], h["shared_rows_for_two_warpgroups"]
    wide = [k for k in kv if rows(k) == 128 and two_first(k)]  # two warpgroups in that run
    out = [(CH11_CASE, f"with two warpgroups {span([kv[k][p] / sh[k][p] for k in wide for p in pages])}, the paged "
                       f"cache at {span([sh[k]['contiguous'] / sh[k][p] for k in wide for p in pages])} its contiguous "
                       f"one where it had run at {span([kv[k]['contiguous'] / kv[k][p] for k in wide for p in pages])}; "
                       f"with one warpgroup {span([kv[k][p] / sh[k][p] for k in kv if k not in wide for p in pages])}, "
                       f"the same kernel")]

    w = h100_ab("ch11_wgmma_warpgroups_hybrid.csv")
    one, two = w["one_warpgroup"], w["two_warpgroups"]
    by = {}
    for k in one:
        by.setdefault(min(keys_two(k), 2048), []).append(k)
    ratio = lambda ks, v: span([one[k][v] / two[k][v] for k in ks], unit="")
    label = {256: "256", 512: "512", 1024: "1,024", 2048: "2,048–16,384"}
    out += [(CH11_CASE, f"| {label[n]} | {len(by[n])} | {ratio(by[n], 'wgmma')} | {ratio(by[n], 'paged_16')} |")
            for n in sorted(by)]
    out.append((CH11, f"Two warpgroups a block ran {ratio(by[2048], 'wgmma')}× one where their splits read 2,048 keys "
                      f"or more (presumably one's softmax under\nthe other's products), "
                      f"{ratio(by[256], 'wgmma')}× at 256"))

    r = h100_ab("ch11_wgmma_rule_ab.csv")
    first, now = r["splits_one_at_most_8"], r["keys_a_split_at_least_1024"]
    gain = lambda pick, vs: span([first[k][v] / now[k][v] for k in first if pick(k) for v in vs])
    to_one = lambda k: two_first(k) and not two_now(k)
    to_two = lambda k: two_now(k) and not two_first(k)
    out.append((CH11_CASE, f"opposite orders (`ch11_wgmma_rule_ab.csv`, {len(first)} shapes of 128 and 512 rows): "
                           f"{gain(to_one, ['fastest'])} where it now takes one warpgroup, {gain(to_two, ['fastest'])} "
                           f"where it now takes two (through pages {gain(to_two, pages)}), "
                           f"{gain(lambda k: not to_one(k) and not to_two(k), ['fastest'])} where both choose alike"))

    g = h100_grid("ch11_grid_hybrid.csv")
    paged = lambda pick: span([g[k]["contiguous"] / g[k][p] for k in g if k[3] >= 32768 and "paged_16" in g[k]
                               and pick(k) for p in pages])
    out += [(CH11, f"the paged cache ran at {paged(lambda k: rows(k) <= 16)} with up to 16 rows, "
                   f"{paged(lambda k: rows(k) == 32)} with 32 and {paged(lambda k: rows(k) == 128)} with 128 "
                   f"(`ch11_grid_hybrid.csv`)"),
            (CH11_CASE, f"the paged cache ran at {paged(lambda k: rows(k) == 128)} with 128 rows, "
                        f"{paged(lambda k: rows(k) == 32)} with 32 and {paged(lambda k: rows(k) <= 16)} with 16 or fewer"),
            (CH11_CASE, f"{paged(lambda k: rows(k) == 128 and k[0] == 1 and k[3] == 32768)} at 32k keys, where one "
                        f"warpgroup keeps `KvPages` (its grid 66 splits of 512 keys; two warpgroups' would have 256), and "
                        f"{g[(1, 1, 4, 131072)]['contiguous'] / g[(1, 1, 4, 131072)]['paged_16']:.2f}× at 128k keys through "
                        f"pages of 16 tokens on two warpgroups "
                        f"({g[(1, 1, 4, 131072)]['contiguous'] / g[(1, 1, 4, 131072)]['paged_64']:.2f}× and "
                        f"{g[(1, 1, 4, 131072)]['contiguous'] / g[(1, 1, 4, 131072)]['paged_256']:.2f}× at 64 and 256)")]
    return out


def ch11_short_cache_claims():
    """PyTorch beside step 6 at 1024 keys, three repeats each, with step 6's splits of 256 keys
    (ch11_short_caches_vs_pytorch_hybrid.csv) and of one tile (ch11_short_caches_vs_pytorch_tile.csv,
    an H100): the case study's sentence (the lesson's comes from ch11_cluster_claims)."""
    ratio = lambda x: min(v for i, v in x.items() if i.startswith("torch")) / x["ch11"]
    of = lambda pt, b, kv: [x for k, x in pt.items() if k[1:] == (b, kv, 1, 1024)]
    us = lambda xs, impl: span([x[impl] * 1000 for x in xs], digits=1, unit="")
    tile = h100_pytorch("ch11_short_caches_vs_pytorch_tile.csv", by="repeat")
    before = h100_pytorch("ch11_short_caches_vs_pytorch_hybrid.csv", by="repeat")
    mqa = of(tile, 1, 1)
    return [(CH11_CASE, f"runs): {span([ratio(x) for x in mqa])} at B = 1 with 32 heads on one and 1,024 keys, where 256 "
                        f"keys a split had given {span([ratio(x) for x in of(before, 1, 1)])} "
                        f"(`ch11_short_caches_vs_pytorch_hybrid.csv`): {us(mqa, 'ch11')} µs against cuDNN's "
                        f"{us(mqa, 'torch_cudnn')}")]


def ch11_cluster_claims():
    """Step 6's splits merged in a thread block cluster (plots/results/h100/): the first A/B
    (ch11_cluster_merge_ab.csv), the forced cluster against the workspace by a block's part
    (ch11_cluster_merge_rule_ab.csv), PyTorch beside the short caches
    (ch11_short_caches_vs_pytorch_cluster.csv), the kernels of a step (ch11_ncu_short.txt), and
    the grid on these kernels (ch11_grid_cluster.csv, ch11_decode_vs_pytorch_cluster.csv)."""
    first = h100_ab("ch11_cluster_merge_ab.csv")
    a, b = first["merged_in_cluster"], first["merged_by_decode_merge"]
    gain = lambda k: b[k]["fastest"] / a[k]["fastest"]
    out = [(CH11_CASE, f"opposite orders): {gain((1, 1, 1, 1024)):.2f}× with 32 heads on one and one query row "
                       f"({b[(1, 1, 1, 1024)]['fastest'] * 1000:.1f} → {a[(1, 1, 1, 1024)]['fastest'] * 1000:.1f} µs), "
                       f"{gain((1, 8, 4, 1024)):.2f}× with 32 on 8 and four rows, but {gain((1, 1, 4, 1024)):.2f}× with "
                       f"32 on one and four rows"),
           (CH11_CASE, f"B = 16 ran the workspace either way (16 clusters of 8, one more than fit), "
                       f"{span([gain(k) for k in a if k[0] == 16])}.")]

    t = {}
    for r in read_h100("ch11_cluster_merge_rule_ab.csv"):
        k = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]), int(r["head_dim"]))
        t.setdefault(r["setting"].rsplit("_round", 1)[0], {}).setdefault(k, {}).setdefault(r["variant"], []).append(
            float(r["ms"]))
    forced, workspace = t["cluster_forced"], t["workspace_and_decode_merge"]
    ratio = lambda k: statistics.mean(workspace[k]["fastest"]) / statistics.mean(forced[k]["fastest"])
    rows = lambda k: min(64, 32 // k[1] * k[2])  # one warpgroup a block at these lengths
    part = lambda k: rows(k) * k[4] * 4 // 1024  # KB of O in float32
    fits = [k for k in forced if k[0] * k[1] * -(-32 // k[1] * k[2] // 64) <= 15]  # clusters of 8 that run at once
    waves = [k for k in forced if k not in fits]
    keys = lambda k: "" if k[3] == 1024 else f" ({k[3]} keys, {k[3] // 128} splits)"
    for k in sorted(fits, key=lambda k: (part(k) > 16, -ratio(k))):
        out.append((CH11_CASE, f"| {k[0]}, {k[1]}, {k[2]}, {k[4]}{keys(k)} | {rows(k)} | {part(k)} KB | {ratio(k):.2f}× |"))
    small, large = [k for k in fits if part(k) <= 16], [k for k in fits if part(k) > 16]
    out += [(CH11_CASE, f"SMs idle: {span([ratio(k) for k in waves])} at B = 16 with 32 heads on one and at B = 2 "
                        f"with 32 on 8"),
            (CH11, f"Expected: 16 clusters, 15 fit; forced, {ratio((16, 1, 1, 1024, 128)):.2f}× the workspace"),
            ("docs/answers.md", f"{statistics.mean(forced[(16, 1, 1, 1024, 128)]['fastest']) * 1e3:.1f} µs forced "
                                f"against {statistics.mean(workspace[(16, 1, 1, 1024, 128)]['fastest']) * 1e3:.1f} through "
                                f"the workspace, {ratio((16, 1, 1, 1024, 128)):.2f}×"),
            ("docs/answers.md", f"At B = 1 (one cluster) the same merge gains {ratio((1, 1, 1, 1024, 128)):.2f}×."),
            (CH11, f"{span([ratio(k) for k in small])} where a block's part is at most 16 KB, "
                   f"{span([ratio(k) for k in large])} at 32 KB")]

    pt = h100_pytorch("ch11_short_caches_vs_pytorch_cluster.csv", by="repeat")
    of = lambda b, kv: [x for k, x in pt.items() if k[1:] == (b, kv, 1, 1024)]
    vs = lambda b, kv: span([min(v for i, v in x.items() if i.startswith("torch")) / x["ch11"] for x in of(b, kv)])
    us = lambda xs, impl: span([x[impl] * 1000 for x in xs], digits=1, unit="")
    out += [(CH11_CASE, f"at B = 1 with 32 heads on one, {vs(1, 1)} cuDNN ({us(of(1, 1), 'ch11')} µs against "
                        f"{us(of(1, 1), 'torch_cudnn')}), where one-tile splits through the workspace had given 0.93×; "
                        f"with 32 on 8, which step 5 runs through the workspace, {vs(1, 8)}; at B = 16, {vs(16, 8)} "
                        f"with 32 on 8 and {vs(16, 1)} with 32 on one (the workspace: 16 clusters)."),
            (CH11, f"{vs(1, 1)} cuDNN at B = 1 with 32 heads on one ({us(of(1, 1), 'ch11')} µs against "
                   f"{us(of(1, 1), 'torch_cudnn')}) and {vs(1, 8)} with 32 on 8 (step 5, through the workspace); at "
                   f"B = 16, {vs(16, 8)}")]

    with open(os.path.join(H100, "ch11_ncu_short.txt")) as f:
        lines = [l.split(" | ") for l in f if l.count(" | ") == 5 and l[0] == "B"]
    k_us = lambda shape, who: span([float(l[5]) for l in lines if l[0] == shape and who in l[1]], digits=1, unit="")
    one, eight = "B=1, 32 heads on 1, N_q=1", "B=1, 32 on 8, N_q=1"
    out.append((CH11_CASE, f"{k_us(one, 'fprop')} µs and {k_us(one, 'lean_reduction')} at B = 1 with 32 heads on "
                           f"one, where ours is one kernel of {k_us(one, 'decode_wgmma')} µs; with 32 on 8, "
                           f"{k_us(eight, 'fprop')} and {k_us(eight, 'lean_reduction')} against step 5's "
                           f"{k_us(eight, 'decode_mma')} and the merge's {k_us(eight, 'decode_merge')}. With four rows "
                           f"it runs one kernel, a `wgmma` forward of {k_us('B=1, 32 on 1, N_q=4', 'fprop')} µs."))

    g = h100_grid("ch11_grid_cluster.csv")
    long = [k for k in g if k[3] >= 32768 and "stream_read" in g[k]]
    read = lambda k: g[k]["stream_read"] / g[k]["fastest"]
    low = min(long, key=read)
    paged = [g[k]["contiguous"] / g[k][p] for k in long for p in ("paged_16", "paged_64", "paged_256")]
    torch_ratio = h100_pytorch("ch11_decode_vs_pytorch_cluster.csv")
    best = [min(v for i, v in x.items() if i.startswith("torch")) / x["ch11"] for k, x in torch_ratio.items()
            if k[3] >= 8192 and "ch11" in x]
    pages = ("paged_16", "paged_64", "paged_256")
    misses = [(k, p) for k in long for p in pages if g[k]["contiguous"] / g[k][p] < 0.95]
    assert all(k[1] == 1 and (p == "paged_16" or (k[0], k[3]) == (1, 32768)) for k, p in misses)
    out.append((CH11_CASE, f"at N_k ≥ 32k, {span([read(k) for k in long if k != low], unit='')} of the read but for "
                           f"B = 1 with 32 heads on one and four rows at 32k keys ({read(low):.2f}); the paged cache at "
                           f"{span(paged)} its contiguous one, below 0.95× only with 32 heads on one, through pages of "
                           f"16 tokens or at B = 1 and 32k keys "
                           f"(down to {min(g[k]['contiguous'] / g[k][p] for k, p in misses):.2f}×); from 8,192 keys, "
                           f"ours at no "
                           f"less than {min(best):.2f}× PyTorch's fastest backend."))
    return out


def ch11_wgmma_split_claims():
    """Step 6's splits at short caches (an H100): the forced sweep (ch11_wgmma_splits.csv) and
    the one-tile minimum against 256 keys (ch11_split_minimum_ab.csv), the case study's
    paragraph and decoding.cu's comment."""
    sw = h100_ab("ch11_wgmma_splits.csv")
    t = lambda n, k: sw[f"splits_{n}"][k]["fastest"]
    short = [(1, 1, 1, 1024), (1, 1, 4, 1024)]
    mid = [(1, 1, 1, 8192), (1, 1, 4, 8192)]
    # Forced counts past max_splits are clamped: at 8,192 keys `splits_66` ran 64 splits.
    out = [(CH11_CASE, f"8 splits took\n{span([t(8, k) * 1e3 for k in short], digits=1, unit='')} µs against the "
                       f"heuristic's 4 ({span([t('auto', k) * 1e3 for k in short], digits=1, unit='')} µs), "
                       f"{span([t('auto', k) / t(8, k) for k in short])}; at 8,192 keys 64 splits\nbeat its 32 by "
                       f"{span([t('auto', k) / t(66, k) for k in mid])}")]
    counts = [n for n in ("auto", 2, 4, 8, 12, 16, 24, 32, 48, 66, 96, 128)]
    rest = [k for k in sw["splits_auto"] if k[3] >= 32768 or k[0] == 16]
    worst = max(t("auto", k) / min(t(n, k) for n in counts) for k in rest)
    assert worst < 1.0105, f"the heuristic {worst:.3f}x the best forced count from 32k keys or at B = 16"
    m = h100_ab("ch11_split_minimum_ab.csv")
    a, b = m["min_256_keys"], m["min_one_tile"]
    wgmma = lambda k: 32 // k[1] * k[2] >= 16  # the shapes step 6 ran (fastest on Hopper then: from 16 rows)
    g = lambda pick: span([a[k]["fastest"] / b[k]["fastest"] for k in a if wgmma(k) and pick(k)])
    mqa1 = lambda k: k[0] == 1 and k[1] == 1
    out += [(CH11_CASE, f"{g(lambda k: mqa1(k) and k[3] <= 4096)} at B = 1 with 32 heads on\none from 1,024 to 4,096 "
                        f"keys, {g(lambda k: mqa1(k) and k[3] == 8192)} at 8,192, {g(lambda k: k[1] == 8)} with 32 on 8 "
                        f"and four rows at\n1,024, {g(lambda k: k[0] >= 16)} at B ≥ 16"),
            (CH11, f"1,024 keys, where 256 keys a split gave 4): {g(lambda k: mqa1(k) and k[3] <= 4096)} at B = 1 with "
                   f"32 heads on one up to 4,096 keys")]
    return out


def ch10_profile(who, d):
    """Nsight Compute's sections of one backward kernel on an H100
    (plots/results/h100/profiles/ch10_profile_{cudnn,persistent}_d{64,128}.txt): each stall
    reason's cycles a warp waits per instruction it issues, and the sections' figures."""
    out = {}
    with open(os.path.join(H100, "profiles", f"ch10_profile_{who}_d{d}.txt")) as f:
        for line in f:
            m = re.match(r"\s+smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio\s+inst\s+([\d.,]+)", line)
            if m:
                out[m.group(1)] = float(m.group(2).replace(",", ""))
            m = re.match(r"\s+(Issued Instructions|Duration|Issue Slots Busy|Executed Ipc Active|"
                         r"Warp Cycles Per Issued Instruction)\s+\S+\s+([\d.,]+)", line)
            if m:
                out[m.group(1)] = float(m.group(2).replace(",", ""))
    return out


def ch10_cudnn_kernel_claims():
    """cuDNN's backward kernel beside step 9 under Nsight Compute on an H100, B = 4, N = 4096,
    no mask: the launch figures (ch10_ncu_cudnn_launch.csv) and the stall reasons (profiles/),
    each reason's cycles a warp waits per issued instruction times the instructions issued
    (billions of warp-cycles), so that the two kernels compare although they issue different
    counts."""
    launch = {}
    for r in read_h100("ch10_ncu_cudnn_launch.csv"):
        if "bprop" in r["kernel"] or "specialized_backward" in r["kernel"]:
            launch.setdefault((r["source"], int(r["head_dim"])), []).append(r)
    first = lambda who, d, col: float(launch[(who, d)][0][col])
    ms = lambda who, d: statistics.mean(float(r["ns"]) for r in launch[(who, d)]) / 1e6
    out = []
    for d in (128, 64):
        c, o = ("cudnn", d), ("ours", d)
        out.append((CH10_CASE, f"| d = {d} | {ms(*c):.2f} ms | {ms(*o):.2f} ms | {ms(*c) / ms(*o):.2f}× | "
                               f"{first(*c, 'instructions') / 1e6:,.0f} M | {first(*o, 'instructions') / 1e6:,.0f} M | "
                               f"{first(*c, 'dram_bytes') / 1e6:,.0f} MB | {first(*o, 'dram_bytes') / 1e6:,.0f} MB | "
                               f"{first(*c, 'smem_dynamic_bytes') / 1024:.0f} KB | {first(*o, 'smem_dynamic_bytes') / 1024:.0f} KB |"))
        assert first(*c, "l2_reduction_sectors") == first(*o, "l2_reduction_sectors"), "dQ's reductions differ"
        assert first(*c, "grid") == first(*o, "grid") == 132 and first(*c, "block") == first(*o, "block") == 384
    reasons = [("barrier", "a barrier (ours: the consumers meeting)"), ("long_scoreboard", "long scoreboard"),
               ("wait", "a fixed-latency wait"), ("mio_throttle", "MIO throttle (shared memory, special functions)"),
               ("lg_throttle", "LG throttle (global and local memory)")]
    p = {(w, d): ch10_profile(w, d) for w in ("cudnn", "persistent") for d in (128, 64)}
    cyc = lambda w, d, k: p[(w, d)][k] * p[(w, d)]["Issued Instructions"] / 1e9
    for k, name in reasons:
        out.append((CH10_CASE, f"| {name} | {cyc('cudnn', 128, k):.2f} | {cyc('persistent', 128, k):.2f} | "
                               f"{cyc('cudnn', 64, k):.2f} | {cyc('persistent', 64, k):.2f} |"))
    tot = lambda w, d: p[(w, d)]["Warp Cycles Per Issued Instruction"] * p[(w, d)]["Issued Instructions"] / 1e9
    out.append((CH10_CASE, f"| all reasons | {tot('cudnn', 128):.2f} | {tot('persistent', 128):.2f} | "
                           f"{tot('cudnn', 64):.2f} | {tot('persistent', 64):.2f} |"))
    more = lambda d: first("cudnn", d, "instructions") / first("ours", d, "instructions")
    out += [(CH10_CASE, f"cuDNN executes {more(128):.2f}× and\n{more(64):.2f}× step 9's instructions"),
            (CH10_CASE, f"({first('cudnn', 128, 'l2_reduction_sectors'):,.0f} at both d;"),
            (CH10_CASE, f"384 threads (three warpgroups), {first('cudnn', 128, 'registers'):.0f} registers a thread")]
    assert all(abs(first("cudnn", d, "dram_bytes") / first("ours", d, "dram_bytes") - 1) < 0.01 for d in (64, 128))
    assert first("cudnn", 64, "registers") == first("cudnn", 128, "registers")
    ipc = lambda w, d: p[(w, d)]["Executed Ipc Active"]
    out.append((CH10_CASE, f"{ipc('cudnn', 128):.2f} instructions a cycle an SM against {ipc('persistent', 128):.2f} at "
                           f"d = 128 and {ipc('cudnn', 64):.2f} against {ipc('persistent', 64):.2f} at d = 64"))
    return out


def ab_runs(name):
    """An A/B file of plots/results/h100 (the chapter's program run from several libraries,
    `build` and `round` columns) as {((B, H, N, d, causal), variant): {(build, round): ms}}."""
    t = {}
    for r in read_h100(name):
        k = (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), int(r["causal"]))
        t.setdefault((k, r["variant"]), {})[(r["build"], r["round"])] = float(r["ms"])
    return t


def variant_rounds(rows):
    """An A/B file of two variants timed in one process a shape (`variant` and `round` columns)
    as {(B, H, N, d, causal): {round: {variant: ms}}}."""
    t = {}
    for r in rows:
        k = (int(r["batch"]), int(r["heads"]), int(r["seq_len"]), int(r["head_dim"]), int(r["causal"]))
        t.setdefault(k, {}).setdefault(r["round"], {})[r["variant"]] = float(r["ms"])
    return t


def source_page(folder, name):
    """Nsight Compute's source page profiles/NAME under FOLDER, read as scripts/stall_phases.py
    reads it: (opcode, executed, samples, {reason: samples}, text) an instruction."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import stall_phases
    return stall_phases.read_rows(os.path.join(folder, "profiles", name))


def ch10_wide_claims():
    """Step 8's wider shared-memory accesses at d = 128 (H100): the A/B against the kernels
    before (ch10_wide_shared_ab.csv), each half alone (ch10_wide_shared_split.csv), Nsight
    Compute before and after (profiles/ch10_profile_persistent{,_wide}_d128.txt), where the
    MIO-throttle samples sat before (profiles/source_10_lean_d128.csv.gz)."""
    ab = ab_runs("ch10_wide_shared_ab.csv")
    gain = lambda key: [ab[key][("before", i)] / ab[key][("paired_stmatrix", i)] for i in "12"]
    pick = lambda keep: [g for key in ab if keep(key[0]) for g in gain(key)]
    out = []
    for k in sorted({key[0] for key in ab}, key=lambda k: (-k[3], k[2], k[4])):
        out.append((CH10_CASE, f"| {k[0]}, {k[1]}, {k[2]:,}, {k[3]} | {'yes' if k[4] else 'no'} | "
                               f"{span(gain((k, 'lean')))} | {span(gain((k, 'persistent')))} |"))
    at_4096 = lambda v: [g for key in ab if key[1] == v and key[0][3] == 128 and key[0][2] == 4096 for g in gain(key)]
    out.append((CH10, f"step 9 {span(at_4096('persistent'))}, step 8 {span(at_4096('lean'))} at d = 128;\n"
                      f"{span(pick(lambda k: k[3] == 64))} at d = 64"))
    assert span(pick(lambda k: k[2] == 16384)) == "0.99–1.01×", "level at 16,384"
    split = ab_runs("ch10_wide_shared_split.csv")
    alone = lambda halves, d: span([x[("paired_stmatrix_d128_only", i)] / x[(half, i)] for (k, v), x in split.items()
                                    for half in halves if k[3] == d and k[2] == 4096 for i in "12"])
    out.append((CH10_CASE, f"the paired loads alone ran {alone(['paired_only'], 64)} and `stmatrix` alone "
                           f"{alone(['stmatrix_only'], 64)} the speed of neither. At d = 128 each half alone ran "
                           f"{alone(['paired_only', 'stmatrix_only'], 128)} the speed of both"))
    before, after, cudnn = (ch10_profile(w, 128) for w in ("persistent", "persistent_wide", "cudnn"))
    cyc = lambda p, k: p[k] * p["Issued Instructions"] / 1e9
    fewer = round(100 * (1 - after["Issued Instructions"] / before["Issued Instructions"]))
    times = round(cyc(before, "mio_throttle") / cyc(cudnn, "mio_throttle"))
    out += [(CH10_CASE, f"{cyc(after, 'mio_throttle'):.2f} billion warp-cycles of MIO throttle against "
                        f"{cyc(before, 'mio_throttle'):.2f} before, and {after['Issued Instructions'] / 1e6:.0f} M "
                        f"instructions issued against {before['Issued Instructions'] / 1e6:.0f} M: the queue stayed as "
                        f"full, and the gain fits the instructions ({fewer}% fewer)"),
            (CH10, f"MIO queue (shared\nmemory, exponentials) {number_word(times)} times as long as cuDNN"),
            (CH10, f"The queue stayed full; {fewer}%\nfewer instructions fit the gain.")]
    # Where the MIO-throttle samples sat, step 8 before the change (its source page).
    mio = {}
    for op, _, _, reasons, text in source_page(H100, "source_10_lean_d128.csv.gz"):
        name = text.split()[0] if text else ""
        if op == "HGMMA":
            name = "dQ HGMMA" if "tnspA" in text else ("S dP HGMMA" if "64x64" in text else "dV dK HGMMA")
        mio[name] = mio.get(name, 0.0) + reasons["mio"]
    total = sum(mio.values())
    pct = lambda op, digits=0: f"{100 * mio[op] / total:.{digits}f}%"
    out += [(CH10_CASE, f"| Sᵀ's and dPᵀ's `HGMMA` (m64n64k16) | {pct('S dP HGMMA')} |"),
            (CH10_CASE, f"| dQ's `HGMMA` (m64n64k16, both operands transposed) | {pct('dQ HGMMA')} |"),
            (CH10_CASE, f"| the exponentials (`MUFU.EX2`) | {pct('MUFU.EX2')} |"),
            (CH10_CASE, f"| dQ's share into its buffer (`STS.64`) | {pct('STS.64')} |"),
            (CH10_CASE, f"| dSᵀ's 32-bit stores (`STS`) | {pct('STS')} |"),
            (CH10_CASE, f"| L and D (`LDS`) | {pct('LDS', 1)} |")]
    return out


def ch10_meeting_claims():
    """Four changes aimed at step 9's meetings and dQ's adds (H100), each a library timed
    against the chapter's code in two rounds (ch10_second_meeting_ab.csv,
    ch10_dq_adder_stages_ab.csv), and where step 9's stall samples sit at d = 64
    (profiles/source_10_persistent_d64.csv.gz; the L2's share from its details page)."""
    changes = [("ch10_second_meeting_ab.csv", "two_ds_buffers", 64, "second meeting gone, two dSᵀ buffers"),
               ("ch10_second_meeting_ab.csv", "ds_free_barrier", 64, "second meeting as an mbarrier"),
               ("ch10_second_meeting_ab.csv", "ds_free_barrier", 128, "second meeting as an mbarrier"),
               ("ch10_second_meeting_ab.csv", "four_wide_adds", 64, "adds four floats wide"),
               ("ch10_second_meeting_ab.csv", "two_ds_buffers_four_wide", 64, "both (two buffers, four wide)"),
               ("ch10_dq_adder_stages_ab.csv", "other_dq_adder", 64, "the other adder (`bulk_dq`)"),
               ("ch10_dq_adder_stages_ab.csv", "other_dq_adder", 128, "the other adder (atomics)"),
               ("ch10_dq_adder_stages_ab.csv", "three_stages", 64, "a third stage")]
    out, step9 = [], []
    for name, build, d, label in changes:
        ab = ab_runs(name)
        gain = lambda v: [x[("before", i)] / x[(build, i)] for (k, var), x in ab.items()
                          if var == v and k[3] == d for i in "12" if (build, i) in x]
        assert len(gain("persistent")) >= 6, (build, d)
        step9 += gain("persistent")
        out.append((CH10_CASE, f"| {label} | {d} | {span(gain('lean'))} | {span(gain('persistent'))} |"))
    out.append((CH10, f"the copy engine's adds and a third stage ran {span(step9)} step 9"))
    rows = source_page(H100, "source_10_persistent_d64.csv.gz")
    total = sum(r[2] for r in rows)
    tile = max(r[1] for r in rows if r[0] == "HGMMA")  # a consumer warp's instructions, once a tile
    share = lambda idx: sum(rows[i][2] for i in idx) / total
    pct = lambda x, digits=0: f"{100 * x:.{digits}f}%"
    meet = [i for i, r in enumerate(rows) if r[4].startswith("BAR.SYNC") and r[1] == tile]
    waits = [i for i, r in enumerate(rows) if "DEPBAR" in r[4] and r[1] == tile]
    tries = [i for i, r in enumerate(rows) if "TRYWAIT" in r[4]]
    stage = [i for i in tries if rows[i][1] == tile]              # a consumer's, once a tile
    # The producer's wait for a free stage: its one warp's spin, the most sampled of the rest.
    producer = [max((i for i in tries if i not in stage), key=lambda i: rows[i + 1][2])]
    assert len(meet) == 2 and len(waits) == 2 and len(stage) == 1 and len(producer) == 1
    # The first non-tensor-core instruction of a tile with more than 3% of the samples: the
    # register the last atomic's address was in, written again.
    reuse = [i for i, r in enumerate(rows) if r[1] == tile and r[0] not in ("HGMMA", "WARPGROUP", "BRA")
             and r[2] / total > 0.03]
    assert len(reuse) == 1 and rows[reuse[0]][3]["long_sb"] > 0.9 * rows[reuse[0]][2]
    adds = share([i for i, r in enumerate(rows) if r[0] == "REDG"])
    second = share(range(meet[1] + 1, meet[1] + 4))  # the loop's closing branch waits for it
    out += [(CH10_CASE, f"| the atomics (`REDG.E.ADD.F32x2`), waiting on the queue into L2 | {pct(adds)} |"),
            (CH10_CASE, f"| the top of the next tile, writing a register the last atomic has not yet read | "
                        f"{pct(share(reuse), 1)} |"),
            (CH10_CASE, f"| the second meeting, after the adds | {pct(second, 1)} |"),
            (CH10_CASE, f"| the first meeting, before dQ's product | {pct(share([meet[0] + 1]), 1)} |"),
            (CH10_CASE, f"| the waits for the products (Sᵀ and dPᵀ; dV, dK and dQ) | {pct(share(waits))} |"),
            (CH10_CASE, f"| a consumer's wait for its stage | {pct(share([stage[0] + 1]), 1)} |"),
            (CH10_CASE, f"| the producer's one warp, waiting for a free stage (idle by design) | "
                        f"{pct(share([producer[0] + 1]), 1)} |")]
    quarter = adds + share(reuse) + second
    assert 0.23 < quarter < 0.27, quarter
    with open(os.path.join(H100, "profiles", "ch10_profile_persistent_d64_source.txt"), encoding="utf-8") as f:
        l2 = re.search(r"L2 Cache Throughput\s+%\s+([\d.]+)", f.read()).group(1)
    out += [(CH10_CASE, f"L2 is the busiest unit, at\n{float(l2):.0f}% of its peak"),
            (CH10, f"with L2 at {float(l2):.0f}% of its peak")]
    return out


def ch10_dk_last_claims():
    """dk_last (dK's product after dQ's) against step 10 (H100): both variants in one process a
    shape, the order swapped between two rounds (ch10_dk_last_ab.csv); both loops' instruction
    counts at d = 128 (ch10_loop_counts_d128.csv) and the tensor pipe's share of the cycles
    (profiles/ch10_profile_{tile_dq_d128,cudnn_d128_details}.txt)."""
    t = variant_rounds(read_h100("ch10_dk_last_ab.csv"))
    gain = lambda keep: [x["tile_dq"] / x["dk_last"] for k, rounds in t.items() if keep(k) for x in rounds.values()]
    out = [(CH10_CASE, f"{span(gain(lambda k: k[:4] == (4, 16, 4096, 128) and not k[4]))} at B = 4, N = 4096, "
                       f"d = 128\nwithout the mask"),
           (CH10_CASE, f"{span(gain(lambda k: k[:4] == (4, 16, 4096, 128) and k[4]))} there under the mask, "
                       f"{span(gain(lambda k: k[2] == 16384 and k[3] == 128 and not k[4]))} at\nN = 16,384 without it, "
                       f"{span(gain(lambda k: k[2] == 16384 and k[3] == 128 and k[4]))} with it; "
                       f"{span(gain(lambda k: k[3] == 64))} at d = 64")]
    counts = {(r["kernel"], r["opcode"], int(r["times_executed"])): int(r["instructions"])
              for r in read_h100("ch10_loop_counts_d128.csv")}
    every, half = 1048576, 524288
    assert every == 64 * 32 * 64 * 8  # heads x key blocks x query tiles x consumer warps
    c = lambda op, n=every: counts.get(("cudnn", op, n), 0)
    assert (c("HGMMA.64x64x16.F32.BF16"), c("HGMMA.64x128x16.F32.BF16"), c("MUFU.EX2"), c("LDS.64"),
            c("STSM.16.M88.4"), c("BAR.SYNC.DEFER_BLOCKING")) == (16, 8, 32, 16, 4, 1)
    assert (c("HGMMA.64x128x16.F32.BF16", half), c("STS.128", half), c("BAR.SYNC.DEFER_BLOCKING", half)) == (8, 16, 2)
    assert counts[("tile_dq", "BAR.SYNC.DEFER_BLOCKING", every)] == 2
    out.append((CH10_CASE, "each instruction of either\nkernel's loop runs 1,048,576 times"))
    pipe = {}
    for kernel, name in (("tile_dq", "ch10_profile_tile_dq_d128.txt"), ("cudnn", "ch10_profile_cudnn_d128_details.txt")):
        with open(os.path.join(H100, "profiles", name), encoding="utf-8") as f:
            text = f.read()
        pipe[kernel] = (float(re.search(r"SM Busy\s+%\s+([\d.]+)", text).group(1)),
                        float(re.search(r"Executed Ipc Active\s+inst/cycle\s+([\d.]+)", text).group(1)))
    out.append((CH10_CASE, f"busy {pipe['tile_dq'][0]:.1f}% of the\ncycles in step 10 and {pipe['cudnn'][0]:.1f}% in "
                           f"cuDNN; step 10 issued {pipe['tile_dq'][1]:.2f} instructions a cycle, cuDNN "
                           f"{pipe['cudnn'][1]:.2f}"))
    return out


def ch10_dq_turns_claims():
    """Step 11's first run against step 10 on the H200 (its dQ misplaced by the conversion, a
    kernel of its own): both in one process a shape, two rounds (ch10_dq_turns_first_run_ab.csv)."""
    t = variant_rounds(read("ch10_dq_turns_first_run_ab.csv"))
    gain = lambda keep: [x["tile_dq"] / x["dq_turns"] for k, rounds in t.items() if keep(k) for x in rounds.values()]
    late = lambda k: k[2] == 16384 and k[4]
    assert len([k for k in t if not late(k)]) == 7
    return [(CH10_CASE, f"step 11\nran {span(gain(lambda k: not late(k)))} step 10 at B = 4, N = 4096 and on five more "
                        f"shapes from N = 1024 to 32,768,\nand {span(gain(late))} at N = 16,384 under the mask")]


def fastest_table_rows(vs, rev, tflops):
    """The lesson's appendix tables of `fastest` beside chapter 08, step 10 and PyTorch: a row a
    shape, TFLOP/s from `tflops`, the ratios of times from `vs` and, last, `rev` (ours in the
    reverse order)."""
    out = []
    for k, x in vs.items():
        tf = lambda i: f"{tflops[k][i]:.0f}"
        f = x["ch10_fastest"]
        out.append((CH10, f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {'yes' if k[4] else 'no'} | {tf('ch08_fastest')} | "
                          f"{tf('ch10_tile_dq')} | {tf('ch10_fastest')} | {tf('torch_flash')} | {tf('torch_cudnn')} | "
                          f"{x['torch_cudnn'] / f:.2f}× | {x['torch_flash'] / f:.2f}× | {x['ch08_fastest'] / f:.2f}× | "
                          f"{rev[k]['torch_cudnn'] / rev[k]['ch10_fastest']:.2f}× |"))
    return out


def ch08_over_ch05_claims():
    """Chapter 08's `fastest` over chapter 05's float32 flash backward at N = 16384 (tour.csv):
    the lesson's four speed-ups and the methodology page's."""
    ms = {(r["chapter"], r["head_dim"], r["causal"]): float(r["ms"]) for r in read("tour.csv")
          if r["seq_len"] == "16384" and (r["chapter"], r["variant"]) in (("05", "flash"), ("08", "fastest"))}
    up = lambda d, c: f"{ms[('05', d, c)] / ms[('08', d, c)]:.1f}×"
    return [("chapters/08_tensor_core_backward/README.md",
             f"`fastest` is {up('64', '0')} (d = 64) and {up('128', '0')} (d = 128)\n  non-causal, "
             f"{up('64', '1')} and {up('128', '1')} causal (`tour.csv`)"),
            ("docs/methodology.md", f"quotes to {up('64', '0')}, {up('128', '0')}, {up('64', '1')} and {up('128', '1')}.")]


def ch10_fastest_h200_claims():
    """`fastest` (step 11 at d = 128, step 10 at d = 64) on the H200 beside chapter 08, step 10
    and PyTorch, PyTorch's first (ch10_fastest_vs_pytorch.csv) and ours in the reverse order
    (ch10_fastest_vs_pytorch_reverse.csv): the appendix's table, the lesson's and the README's
    ratios."""
    vs = ch10_table(name="ch10_fastest_vs_pytorch.csv", field="ms")
    rev = ch10_table(name="ch10_fastest_vs_pytorch_reverse.csv", field="ms")
    tflops = ch10_table(name="ch10_fastest_vs_pytorch.csv")
    assert all(k[2] >= 4096 for k in vs) and all(x["ch10_fastest"] < x["ch08_fastest"] for x in vs.values())
    ratio = lambda t, d=None, ref="torch_cudnn": span([x[ref] / x["ch10_fastest"] for k, x in t.items()
                                                      if d in (None, k[3])])
    out = fastest_table_rows(vs, rev, tflops)
    best = lambda d: max(v["ch10_fastest"] for k, v in tflops.items() if k[3] == d)
    rate = lambda n, d: [v["ch10_fastest"] for k, v in tflops.items() if k[2] == n and k[3] == d]
    rates = lambda n, d: f"{min(rate(n, d)):.0f}–{max(rate(n, d)):.0f}"
    out.append((CH10, f"{rates(16384, 64)} and {rates(16384, 128)} here, the "
                      f"{tflops[(1, 16, 16384, 128, 0)]['ch10_fastest']:.0f} without the mask past the 575 of its\n"
                      f"best case; at N = 4096, d = 64 ({rates(4096, 64)}) they do not"))
    assert min(rate(16384, 64)) > 474 and min(rate(16384, 128)) > 561 and min(rate(4096, 64)) < 474
    return out + [
        (CH10, f"runs at {ratio(vs, 128)} cuDNN at d = 128 and {ratio(vs, 64)} at d = 64 on the H200"),
        (CH10, f"`fastest` ran {ratio(vs, 128)} cuDNN at d = 128 and\n{ratio(vs, 64)} at d = 64, "
               f"{ratio(vs, ref='torch_flash')} FlashAttention-2 and {ratio(vs, ref='ch08_fastest')} chapter 08, "
               f"up to {best(128):.0f}\nTFLOP/s at d = 128 and {best(64):.0f} at d = 64"),
        (CH10, f"`ch10_fastest_vs_pytorch_reverse.csv`: {ratio(rev, 128)} cuDNN at d = 128 and {ratio(rev, 64)} at d = 64)"),
        ("README.md", f"`fastest` (step 11 at d = 128, step 10 at d = 64), {ratio(vs)} cuDNN on the H200 "
                      f"({ratio(rev)} with ours in the reverse order)"),
        ("README.md", f"On the H200 `fastest` runs {ratio(vs, 128)} cuDNN at d = 128 and {ratio(vs, 64)} at d = 64"),
        ("docs/use_in_your_model.md", f"({ratio(vs, 128)} on the H200: the lesson))"),
    ]


def ch10_fastest_h100_claims():
    """`fastest` (step 11 at d = 128, step 10 at d = 64) on an H100: steps 10 and 11 in the
    chapter's program, two rounds (ch10_dq_turns_ab.csv); the two beside PyTorch, PyTorch's
    first (ch10_dq_turns_vs_pytorch.csv) and ours in the reverse order
    (ch10_dq_turns_vs_pytorch_reverse.csv); and `fastest` itself beside chapter 08, step 10 and
    PyTorch in the same two orders (ch10_fastest_vs_pytorch{,_reverse}.csv)."""
    t = variant_rounds(read_h100("ch10_dq_turns_ab.csv"))
    gain = span([x["tile_dq"] / x["dq_turns"] for rounds in t.values() for x in rounds.values()])
    assert len(t) == 8 and all(k[3] == 128 for k in t)
    of = lambda t, d, impl, ref="torch_cudnn": span([x[ref] / x[impl] for k, x in t.items() if k[3] == d])
    # Steps 10 and 11 in one run (the case study).
    turns = ch10_h100_table("ch10_dq_turns_vs_pytorch.csv")
    turns_rev = ch10_h100_table("ch10_dq_turns_vs_pytorch_reverse.csv")
    d128 = [x for k, x in ch10_table(rows=read_h100("ch10_dq_turns_vs_pytorch.csv")).items() if k[3] == 128]
    # `fastest` in one run beside chapter 08 (the lesson, README.md).
    vs = ch10_h100_table("ch10_fastest_vs_pytorch.csv")
    rev = ch10_h100_table("ch10_fastest_vs_pytorch_reverse.csv")
    tflops = ch10_table(rows=read_h100("ch10_fastest_vs_pytorch.csv"))
    assert all(k[2] >= 4096 for k in vs) and all(x["ch10_fastest"] < x["ch08_fastest"] for x in vs.values())
    out = fastest_table_rows(vs, rev, tflops)
    fast = lambda d: of(vs, d, "ch10_fastest")
    # The same two runs on another H100 machine (the appendix's last paragraph).
    vs2 = ch10_h100_table("ch10_fastest_vs_pytorch_run2.csv")
    rev2 = ch10_h100_table("ch10_fastest_vs_pytorch_reverse_run2.csv")
    assert vs2.keys() == vs.keys() and all(x["ch10_fastest"] < x["ch08_fastest"] for x in vs2.values())
    out.append((CH10, f"`fastest` at {span([x['torch_cudnn'] / x['ch10_fastest'] for x in vs2.values()])} cuDNN, "
                      f"{span([x['torch_cudnn'] / x['ch10_fastest'] for x in rev2.values()])} with ours reversed, and "
                      f"{span([x['torch_flash'] / x['ch10_fastest'] for x in vs2.values()])}\nFlashAttention-2"))
    out += [(CH10, f"**{gain} step 10**"),
            (CH10_CASE, f"timed step 11 at **{gain} step 10** a round"),
            ("README.md", f"`fastest`, on an H100, {fast(128)} at d = 128 and {fast(64)} at d = 64): not memory"),
            ("README.md", f"adds {gain} at\n  d = 128 (step 11, on an H100"),
            ("docs/use_in_your_model.md", f"step 11, `fastest` at d = 128 since, {fast(128)} ("),
            *ch10_training_step10_claims(),
            (CH10_CASE, f"it ran {of(turns, 128, 'ch10_dq_turns')} cuDNN at the\nfour d = 128 shapes with N ≥ 4096, "
                        f"{min(x['ch10_dq_turns'] for x in d128):.0f}–{max(x['ch10_dq_turns'] for x in d128):.0f} "
                        f"TFLOP/s, where step 10 ran {of(turns, 128, 'ch10_tile_dq')}; with the two in the reverse order, step 11\n"
                        f"first (`ch10_dq_turns_vs_pytorch_reverse.csv`), {of(turns_rev, 128, 'ch10_dq_turns')}")]
    return out


def ch10_turns_profile_claims():
    """Steps 10 and 11 under Nsight Compute, one launch each, in that order
    (profiles/ch10_profile_turns_d128.txt, H100), beside cuDNN's kernel
    (profiles/ch10_profile_cudnn_d128_details.txt)."""
    with open(os.path.join(H100, "profiles", "ch10_profile_turns_d128.txt"), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(H100, "profiles", "ch10_profile_cudnn_d128_details.txt"), encoding="utf-8") as f:
        cudnn = f.read()
    grab = lambda pattern, t=text: [float(x.replace(",", "")) for x in re.findall(pattern, t)]
    busy, ipc = grab(r"SM Busy\s+%\s+([\d.]+)"), grab(r"Executed Ipc Active\s+inst/cycle\s+([\d.]+)")
    cycles = grab(r"Warp Cycles Per Issued Instruction\s+cycle\s+([\d.]+)")
    inst = grab(r"Executed Instructions\s+inst\s+([\d,]+)")
    ms = grab(r"Duration\s+ms\s+([\d.]+)")
    assert len(busy) == len(ipc) == len(cycles) == len(inst) == len(ms) == 2
    (b10, b11), (i10, i11), (c10, c11), (n10, n11), (t10, t11) = busy, ipc, cycles, inst, ms
    cb, ci = grab(r"SM Busy\s+%\s+([\d.]+)", cudnn)[0], grab(r"Executed Ipc Active\s+inst/cycle\s+([\d.]+)", cudnn)[0]
    assert b11 > cb > b10 and ci > i11
    return [(CH10_CASE, f"the tensor pipe was\nbusy {b11:.1f}% of the cycles in step 11 against {b10:.1f}% in step 10, "
                        f"past the {cb:.1f}% of cuDNN's\nkernel in the profile above; a scheduler issued {i11:.2f} "
                        f"instructions a cycle against {i10:.2f}; a\nwarp waited {c11:.2f} cycles between its "
                        f"instructions against {c10:.2f}; and the kernel executed\n{n11 / 1e6:.1f} million instructions "
                        f"against {n10 / 1e6:.1f} million ({(1 - n11 / n10) * 100:.1f}% fewer"),
            (CH10_CASE, f"It took {t11:.2f} ms\nagainst {t10:.2f} under the profiler, {t10 / t11:.2f}×"),
            (CH10_CASE, f"cuDNN still issues more\ninstructions a cycle ({ci:.2f})"),
            (CH10, f"pipe is busy {b11:.0f}% of cycles in step 11, {b10:.0f}% in step 10, {cb:.0f}% in cuDNN's")]


def ch10_training_step10_claims():
    """The small GPT trained with step 10 at its d = 64 on an H100, two calls of one run of each
    attention and seed (training_step10.csv, training_step10_run2.csv), beside every PyTorch run
    of those and of step 9's file (training.csv)."""
    files = ["training_step10.csv", "training_step10_run2.csv"]
    ms = [median_steps(read_h100(f)) for f in files]
    ours = {seed: [v for f in files for k, v in training_runs(read_h100(f))[0].items() if k[0] == "flashtut" and k[1] == seed]
            for seed in "01"}
    torch = {seed: [v for f in files + ["training.csv"] for k, v in training_runs(read_h100(f))[0].items()
                    if k[0] != "flashtut" and k[1] == seed] for seed in "01"}
    above = [x - max(torch[seed]) for seed in "01" for x in ours[seed] if x > max(torch[seed])]
    assert len(above) == 3 and len(torch["0"]) + len(torch["1"]) == 18
    step9 = {k: v for k, v in training_runs(read_h100("training.csv"))[0].items() if k[0] == "flashtut"}
    assert len(step9) == 5 and all(min(torch[k[1]]) <= v <= max(torch[k[1]]) for k, v in step9.items())  # "all lay inside"
    f4 = lambda v: " and ".join(f"{x:.4f}" for x in v)
    return [(CH10, f"its step took {ms[0]['flashtut']:.2f} and {ms[1]['flashtut']:.2f} ms against\ncuDNN's "
                   f"{ms[0]['sdpa_cudnn']:.2f} and {ms[1]['sdpa_cudnn']:.2f}: **{ms[0]['flashtut'] / ms[0]['sdpa_cudnn']:.3f}×** "
                   f"both times, and **{ms[0]['flashtut'] / ms[0]['sdpa_flash']:.3f}×** and "
                   f"**{ms[1]['flashtut'] / ms[1]['sdpa_flash']:.3f}×** FlashAttention-2's"),
            (CH10, f"Its final training losses, {f4(ours['0'])} at seed 0, {f4(ours['1'])} at seed 1, lie at the\n"
                   f"top of PyTorch's eighteen runs on H100s in these three files ({min(torch['0']):.4f}–{max(torch['0']):.4f} "
                   f"at seed 0,\n{min(torch['1']):.4f}–{max(torch['1']):.4f} at seed 1), and three of the four just above it, "
                   f"by {min(above):.4f}–{max(above):.4f}"),
            ("README.md", f"with\n  step 10 (two runs a side), {ms[0]['flashtut'] / ms[0]['sdpa_cudnn']:.3f}×, its losses at the top "
                          f"of PyTorch's runs, three of four just above them (by {min(above):.4f}–{max(above):.4f})")]


def ch11_b1_rows128_claims():
    """Chapter 11 at B = 1, 32 heads on one, four rows, 32k keys: the split count and warpgroups
    forced around the chapter's choice, two rounds (ch11_b1_mqa_rows128_sweep.csv), and each
    kernel under Nsight Compute (ch11_ncu_b1_mqa_rows128.txt)."""
    t = {}
    for r in read_h100("ch11_b1_mqa_rows128_sweep.csv"):
        if r["variant"] in ("fastest", "contiguous", "stream_read"):
            key = r["variant"] if r["variant"] == "stream_read" else "ours"
            t.setdefault((r["forced_warpgroups"], r["forced_splits"], key), []).append(1000 * float(r["ms"]))
    us = lambda xs: f"{min(xs):.1f}–{max(xs):.1f} µs"
    chosen = t[("auto", "auto", "ours")]
    # Every other grid (the choice is one warpgroup and 66 splits, which forcing either repeats).
    others = [min(v) for (wg, sp, key), v in t.items()
              if key == "ours" and not (wg in ("auto", "1") and sp in ("auto", "66"))]
    assert max(chosen) < min(others)  # the chapter's own choice is the sweep's fastest
    split33 = [x for (wg, sp, key), v in t.items() if key == "ours" and sp == "33" for x in v]
    reads = [x for (wg, sp, key), v in t.items() if key == "stream_read" for x in v]
    with open(os.path.join(H100, "ch11_ncu_b1_mqa_rows128.txt"), encoding="utf-8") as f:
        durations = [float(x) for x in re.findall(r"Duration\s+us\s+([\d.]+)", f.read())]
    decode, merge = [durations[0], durations[2]], durations[1]
    return [(CH11_CASE, f"The chapter's\nchoice, one warpgroup and 66 splits of 512 keys, ran {us(chosen)}, the fastest of the\nsweep; "
                        f"the next, two warpgroups with their own choice of splits, {us(t[('2', 'auto', 'ours')])}; "
                        f"33 splits,\n{us(split33)}. The streaming read of the same bytes took {us(reads)}"),
            (CH11_CASE, f"the decode kernel takes {min(decode):.1f}–{max(decode):.1f} µs and the merge {merge:.1f} µs")]


def ch10_tile_dq_claims():
    """Step 10 against step 9 (H100): libraries with dQ's accumulator in tiles at d = 128
    (tiles_d128) and at both d (tiles_both) timed against step 9's (before) in one process, two
    rounds in opposite orders (ch10_tile_dq_ab.csv)."""
    ab = ab_runs("ch10_tile_dq_ab.csv")
    after = lambda k: "tiles_d128" if k[3] == 128 else "tiles_both"
    gain = lambda k: [ab[(k, "persistent")][("before", i)] / ab[(k, "persistent")][(after(k), i)] for i in "12"]
    shapes = sorted({k for k, v in ab if v == "persistent"}, key=lambda k: (-k[3], k[2], k[4]))
    pick = lambda keep: [g for k in shapes if keep(k) for g in gain(k)]
    out = [(CH10_CASE, f"| {k[0]}, {k[1]}, {k[2]:,}, {k[3]} | {'yes' if k[4] else 'no'} | {span(gain(k))} |")
           for k in shapes]
    long_ = lambda d: pick(lambda k: k[3] == d and k[2] >= 4096)
    short = lambda d: pick(lambda k: k[3] == d and k[2] == 1024)
    out += [(CH10, f"{span(long_(128))} step 9 at d = 128 and {span(long_(64))} at\n"
                   f"d = 64 from N = 4096; {span(short(128))} and {span(short(64))} at N = 1024 under "
                   f"the mask"),
            (CH10_CASE, f"held at d = 128 without the\nmask from N = 4096, fell short under it "
                        f"({span(pick(lambda k: k[3] == 128 and k[2] >= 4096 and k[4]))})"),
            (CH10_CASE, f"d = 128 is level ({span(short(128))})"),
            ("README.md", f"adds {span(long_(128))} at d = 128 and\n  {span(long_(64))} at d = 64 from N = 4096 (step 10)")]
    assert min(long_(128)) > 1 and min(long_(64)) > 1.1
    return out


def ch10_tile_dq_vs_pytorch_claims():
    """Step 10 (and step 9) beside PyTorch on an H100: PyTorch's first, then ours
    (ch10_tile_dq_vs_pytorch.csv), and ours in the reverse order (ch10_tile_dq_vs_pytorch_reverse.csv)."""
    vs = ch10_h100_table("ch10_tile_dq_vs_pytorch.csv")
    rev = ch10_h100_table("ch10_tile_dq_vs_pytorch_reverse.csv")
    tflops = ch10_table(rows=read_h100("ch10_tile_dq_vs_pytorch.csv"))
    out = []
    for k, x in vs.items():
        tf = lambda i: tflops[k][i]
        out.append((CH10, f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {'yes' if k[4] else 'no'} | {tf('ch10_persistent'):.0f} | "
                          f"{tf('ch10_tile_dq'):.0f} | {tf('torch_flash'):.0f} | {tf('torch_cudnn'):.0f} | "
                          f"{x['torch_cudnn'] / x['ch10_persistent']:.2f}× | {x['torch_cudnn'] / x['ch10_tile_dq']:.2f}× | "
                          f"{x['torch_flash'] / x['ch10_tile_dq']:.2f}× | "
                          f"{rev[k]['torch_cudnn'] / rev[k]['ch10_tile_dq']:.2f}× |"))
    of = lambda t, impl, d, ref="torch_cudnn": span([x[ref] / x[impl] for k, x in t.items() if k[3] == d])
    fa2 = span([x["torch_flash"] / x["ch10_tile_dq"] for x in vs.values()])
    assert all(k[2] >= 4096 for k in vs)
    out += [(CH10, f"step 10 ran {of(vs, 'ch10_tile_dq', 128)} cuDNN at d = 128 and\n{of(vs, 'ch10_tile_dq', 64)} at "
                   f"d = 64, {fa2} FlashAttention-2, where step 9 ran {of(vs, 'ch10_persistent', 128)} and\n"
                   f"{of(vs, 'ch10_persistent', 64)}; with ours reversed (`--order reverse`), "
                   f"{of(rev, 'ch10_tile_dq', 128)} and {of(rev, 'ch10_tile_dq', 64)}"),
            ("docs/use_in_your_model.md", f"step 10 {of(vs, 'ch10_tile_dq', 128)}, and step 11")]
    return out


def ch10_wide_vs_pytorch_claims():
    """Steps 8 and 9, with the wider accesses, beside PyTorch on an H100: in the registry's
    order (ch10_wide_vs_pytorch.csv) and in the reverse one (ch10_wide_vs_pytorch_reverse.csv)."""
    out = []
    vs = ch10_h100_table("ch10_wide_vs_pytorch.csv")
    tflops = ch10_table(rows=read_h100("ch10_wide_vs_pytorch.csv"))
    for k, x in vs.items():
        tf = lambda i: tflops[k][i]
        out.append((CH10, f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {'yes' if k[4] else 'no'} | {tf('ch10_lean'):.0f} | "
                          f"{tf('ch10_persistent'):.0f} | {tf('torch_flash'):.0f} | {tf('torch_cudnn'):.0f} | "
                          f"{x['torch_cudnn'] / x['ch10_lean']:.2f}× | {x['torch_cudnn'] / x['ch10_persistent']:.2f}× | "
                          f"{x['torch_flash'] / x['ch10_persistent']:.2f}× |"))
    vs_of = lambda impl, d, ref="torch_cudnn": span([x[ref] / x[impl] for k, x in vs.items()
                                                    if k[3] == d and k[2] >= 4096])
    base = vs[(4, 16, 4096, 128, 0)]  # N = 4096, d = 128, no mask
    fa2 = span([x["torch_flash"] / x[i] for x in vs.values() for i in ("ch10_lean", "ch10_persistent")])
    out += [(CH10, f"step 9 ran {vs_of('ch10_persistent', 128)} cuDNN\nat d = 128 and {vs_of('ch10_persistent', 64)} at "
                   f"d = 64, step 8 {vs_of('ch10_lean', 128)} and {vs_of('ch10_lean', 64)}, both {fa2}\nFlashAttention-2"),
            (CH10_CASE, f"d = 128 (step 9 at {base['torch_cudnn'] / base['ch10_persistent']:.2f}× "
                        f"at N = 4096 without the mask,\n`ch10_wide_vs_pytorch.csv`)"),
            ("docs/use_in_your_model.md", f"step 9 {vs_of('ch10_persistent', 128)} on an H100")]
    # The reverse order (step 9 right after PyTorch's, then step 8), four shapes without the mask.
    rev = ch10_h100_table("ch10_wide_vs_pytorch_reverse.csv")
    shape = lambda n, d: (1 if n == 16384 else 4, 16 if d == 128 else 32, n, d, 0)  # the runs' shapes
    vs_cudnn = lambda n, d: rev[shape(n, d)]["torch_cudnn"] / rev[shape(n, d)]["ch10_persistent"]
    # A kernel run third (step 9 in the forward order, step 8 in the reverse) over the same run second.
    third = lambda impl, d, late, early: late[shape(16384, d)][impl] / early[shape(16384, d)][impl]
    fast = rev[shape(16384, 128)]
    out += [(CH10_CASE, f"gave step 9 {vs_cudnn(16384, 128):.2f}× cuDNN at N = 16384, d = 128 "
                        f"({fast['ch10_persistent']:.2f} against {fast['torch_cudnn']:.2f}\nms)"),
            (CH10_CASE, f"and {vs_cudnn(16384, 64):.2f}× at d = 64; at\nN = 4096, {vs_cudnn(4096, 128):.2f}× and "
                        f"{vs_cudnn(4096, 64):.2f}× (d = 128, 64)"),
            (CH10_CASE, f"step 9 took {third('ch10_persistent', 128, vs, rev):.2f}× and\n"
                        f"{third('ch10_persistent', 64, vs, rev):.2f}× as long at N = 16384 (d = 128, 64) and step 8 "
                        f"{third('ch10_lean', 128, rev, vs):.2f}× and {third('ch10_lean', 64, rev, vs):.2f}×"),
            (CH10, f"step 9 ran\n{vs_cudnn(16384, 128):.2f}× cuDNN at N = 16384, d = 128")]
    return out


def ch11_rows_claims():
    """Step 6 forced against step 5 where a key/value head has fewer than 16 rows (H100:
    ch11_wgmma_four_rows_ab.csv against the rule of the time, step 5 at these shapes;
    ch11_wgmma_rows_ab.csv against step 5 forced), by the cache's bytes (K and V, d = 128, bf16)."""
    four, rows = h100_ab("ch11_wgmma_four_rows_ab.csv"), h100_ab("ch11_wgmma_rows_ab.csv")
    gain = {}
    for s6, s5 in ((four["step6_forced"], four["rule"]), (rows["step6_forced"], rows["step5_forced"])):
        for k in s6:
            gain[k] = s5[k]["fastest"] / s6[k]["fastest"]
    n_rows = lambda k: 32 // k[1] * k[2]
    mb = lambda k: 2 * k[0] * k[1] * k[3] * 128 * 2 / 2 ** 20
    pick = lambda r, short: [g for k, g in gain.items() if n_rows(k) in r and (mb(k) <= 32) == short]
    paged = {}
    for s6, s5 in ((four["step6_forced"], four["rule"]), (rows["step6_forced"], rows["step5_forced"])):
        for k in s6:
            paged[k] = s5[k]["paged_16"] / s6[k]["paged_16"]
    table = [(CH11_CASE, f"| {k[0]} | {k[1]} | {k[2]} | {k[3]:,} | {n_rows(k)} | {mb(k):,.0f} MB | {gain[k]:.2f}× | "
                         f"{paged[k]:.2f}× |")
             for k in sorted(gain, key=lambda k: (n_rows(k), mb(k), k))]
    # Step 6 forced beside PyTorch, 32 heads on 8, one row, 1,024 keys (two repeats).
    pt = h100_pytorch("ch11_short_caches_vs_pytorch_step6.csv", by="repeat")
    of = lambda b: [x for k, x in pt.items() if k[1:] == (b, 8, 1, 1024)]
    vs = lambda b: span([x["torch_cudnn"] / x["ch11"] for x in of(b)])
    assert all(min(v for i, v in x.items() if i.startswith("torch")) == x["torch_cudnn"] for x in of(1) + of(16))
    us = lambda b, impl: span([x[impl] * 1000 for x in of(b)], digits=1, unit="")
    size = lambda keys: f"{min(mb(k) for k in keys):,.0f}–{max(mb(k) for k in keys):,.0f} MB"
    few = [k for k in gain if n_rows(k) < 4]
    assert size([k for k in gain if n_rows(k) >= 4 and mb(k) > 32]) == "64–4,096 MB", "the prose's 64 MB to 4 GB"
    return table + [
            (CH11, f"step 6 ran {span(pick((4,), True))} with four rows and {span(pick((8,), True))} with eight on "
                   f"caches of {size([k for k in gain if n_rows(k) >= 4 and mb(k) <= 32])}"),
            (CH11, f"that is {vs(1)} cuDNN ({us(1, 'ch11')} µs against {us(1, 'torch_cudnn')},"),
            (CH11, f"step 5) step 6 forced gave {vs(16)} cuDNN, as step 5's"),
            (CH11, f"{span(pick((4, 8), False))} on caches of 64 MB to 4 GB, and {span([g for k, g in gain.items() if n_rows(k) < 4])} with one "
                   f"or two rows ({size(few)})")]


def ch10_reverse_claims():
    """Step 9 before step 8 in each shape (ch10_order_reverse.csv, an H100): the case study's
    paragraph."""
    t = {}
    for r in read_h100("ch10_order_reverse.csv"):
        if r["pass"] == "backward":
            t.setdefault((int(r["seq_len"]), int(r["head_dim"]), int(r["causal"])), {})[r["impl"]] = float(r["ms"])
    over8 = lambda k: t[k]["ch10_lean"] / t[k]["ch10_persistent"]
    cudnn = lambda k: t[k]["torch_cudnn"] / t[k]["ch10_persistent"]
    return [(CH10_CASE, f"step 9 ran\n{over8((16384, 64, 0)):.2f}× step 8 at N = 16384, d = 64 without the mask "
                        f"({t[(16384, 64, 0)]['ch10_persistent']:.2f} against {t[(16384, 64, 0)]['ch10_lean']:.2f} ms), "
                        f"{over8((16384, 128, 0)):.2f}× at\nd = 128, {span([over8((16384, d, 1)) for d in (64, 128)])} "
                        f"under the mask, and {span([over8((4096, d, 0)) for d in (64, 128)])} at N = 4096"),
            (CH10_CASE, f"Against cuDNN, step 9 first: {cudnn((16384, 64, 0)):.2f}× and {cudnn((16384, 128, 0)):.2f}× at "
                        f"N = 16384 without the mask (d = 64, 128),\n"
                        f"{span([cudnn((16384, d, 1)) for d in (64, 128)])} under it, and {cudnn((4096, 64, 0)):.2f}× "
                        f"and {cudnn((4096, 128, 0)):.2f}× at N = 4096 without the mask")]


def ch11_row_tile_claims():
    """The case study's table of one row tile against two (ch11_row_tiles.csv)."""
    t = decode_times_by("ch11_row_tiles.csv", "setting")
    one, two = t["FT_CH11_ROW_TILES=1"], t["two tiles over 16 rows"]
    us = lambda tree, k: tree[k]["tensor_cores"] * 1000
    return [(CH11_CASE, f"| {k[0]} | {k[1]} | {k[2]} | {k[3]:,} | {us(one, k):.1f} | {us(two, k):.1f} | "
                        f"{us(one, k) / us(two, k):.2f} | {of_read(one, k, 'tensor_cores'):.2f} → "
                        f"{of_read(two, k, 'tensor_cores'):.2f} |")
            for k in one if k[1] == 1]


def ch10_stall_claims():
    """The case study's per-instruction waits (profiles/source_10_*.csv.gz, Nsight Compute's
    source pages, read as scripts/stall_phases.py reads them)."""
    def page_of(name):
        rows = source_page(RESULTS, name)
        total = sum(r[2] for r in rows)
        loop = max(r[1] for r in rows if r[0] == "HGMMA")  # a consumer warp's products, every tile
        in_loop = lambda r: abs(r[1] - loop) <= 0.1 * loop
        pct = lambda x: 100.0 * x / total
        waits = [pct(r[2]) for r in rows if r[0] == "WARPGROUP" and "DEPBAR" in r[4] and in_loop(r) and pct(r[2]) > 1]
        return rows, pct, in_loop, waits, pct(sum(r[2] for r in rows if in_loop(r)))
    b_rows, b_pct, b_loop, b_waits, b_share = page_of("source_10_bulk_dq_d128.csv.gz")
    t_rows, t_pct, t_loop, t_waits, t_share = page_of("source_10_tall_d64.csv.gz")
    dq_empty = max(b_pct(r[2]) for r in b_rows if r[0] == "BRA" and b_loop(r))
    reds = [i for i, r in enumerate(t_rows) if r[0] == "REDG"]
    after = {j for i in reds for j in range(i + 1, min(len(t_rows), i + 6))}
    red_wait = t_pct(sum(t_rows[j][3]["long_sb"] for j in after))
    issue = max(t_pct(r[2]) for r in t_rows if r[0] == "HGMMA" and t_loop(r))

    def meetings(rows, pct):  # a named barrier's waits land on the two instructions after it
        at = [i for i, r in enumerate(rows) if r[4].startswith("BAR.SYNC") and not r[4].endswith(" 0x0")]
        return pct(sum(rows[j][3]["barrier"] for i in at for j in (i + 1, i + 2)))
    consumer = lambda share, *parts: sum(parts) / share * 100
    return [
        (CH10_CASE, f"({b_share:.0f}% of step 3's samples, {t_share:.0f}% of step 6's)"),
        (CH10_CASE, f"{b_waits[0]:.1f}% of all samples wait for Sᵀ and dPᵀ, {b_waits[1]:.1f}% for dV, dK and dQ "
                    f"(step 3); {t_waits[0]:.1f}% and {t_waits[1]:.1f}% (step 6), with {issue:.1f}% more at dQ's first `HGMMA`"),
        (CH10_CASE, f"hold {meetings(b_rows, b_pct):.1f}% (step 3) and {meetings(t_rows, t_pct):.1f}% (step 6)"),
        (CH10_CASE, f"{dq_empty:.1f}% of all samples: the try-wait loop on `dq_empty`"),
        (CH10_CASE, f"sixteen `REDG.E.ADD.F32x2`, {red_wait:.1f}% in the five after each"),
        (CH10_CASE, f"So about {consumer(b_share, dq_empty):.0f}% (step 3) and {consumer(t_share, red_wait):.0f}% (step 6)"),
        (CH10_CASE, f"and {span([consumer(b_share, *b_waits), consumer(t_share, *t_waits, issue)], 0, '%')} to waiting "
                    f"for products"),
    ]


def ch10_walk_claims():
    """Step 9's fixed walk: its speed over step 8's in the H200 run of ch10_pingpong.csv, and
    scripts/wave_schedule.py's count of the same (the case study's table, row by row)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import wave_schedule

    x = ch10_table("ch10_pingpong.csv", field="ms")
    measured = lambda k: x[k]["ch10_lean"] / x[k]["ch10_persistent"]

    def counted(b, h, n, d):
        blocks = [t + 1 for _ in range(b * h) for t in wave_schedule.tile_lengths(n, d, True)]
        return wave_schedule.makespan(blocks, 132) / wave_schedule.fixed_walk(blocks, 132), blocks

    # The causal rows at the comparison's shapes (B·N = 16384, H·d = 2048) and N = 32768.
    table = sorted((k for k in x if k[4] == 1 and ((k[0] * k[2], k[1] * k[3]) == (16384, 2048) or k[2] == 32768)),
                   key=lambda k: (k[3], k[2]))
    rows = [(CH10_CASE, f"| {n} | {d} | {h} | {counted(b, h, n, d)[0]:.3f} | {measured((b, h, n, d, c)):.3f} |")
            for b, h, n, d, c in table]
    ratio, blocks = counted(1, 16, 16384, 128)
    walk0 = sum(blocks[0::132])
    nc = lambda n, d: measured(next(k for k in x if k[2] == n and k[3] == d and k[4] == 0))
    return rows + [
        (CH10_CASE, f"SM 0 walks key blocks 0, 4, 8, …, 60 of the heads in turn, one long block of every head "
                    f"({blocks[0] - 1} down to {blocks[60] - 1} query tiles): "
                    f"{walk0:,} query tiles, where the grid order ends after {wave_schedule.makespan(blocks, 132):,.0f}. "
                    f"The count gives {ratio:.3f}; the H200 measured {measured((1, 16, 16384, 128, 1)):.3f}"),
        (CH10_CASE, f"At the longest sequences the GPU lost more than the count says, "
                    f"{span([counted(*k[:4])[0] - measured(k) for k in table if k[2] == 16384], unit='')} at N = 16384 "
                    f"and {span([counted(*k[:4])[0] - measured(k) for k in table if k[2] == 32768], unit='')} at "
                    f"N = 32768"),
        (CH10_CASE, f"N = 16384 at d = 64 also lost without the mask ({nc(16384, 64):.3f})"),
        (CH10_CASE, f"without the mask {nc(1024, 64):.3f}× and {nc(1024, 128):.3f}× at N = 1024, {nc(4096, 64):.3f}× "
                    f"and {nc(4096, 128):.3f}× at 4096, {nc(16384, 64):.3f}× and {nc(16384, 128):.3f}× at 16384; with "
                    f"it, {span([measured(k) for k in x if k[4] == 1])}"),
        (CH10_CASE, f"up to the {span([nc(n, d) for n in (1024, 4096) for d in (64, 128)])} it gains without the mask "
                    f"at N ≤ 4096"),
    ]


def ch10_lean_claims():
    """The case study's and the lesson's counts for step 8: instructions a tile and where the
    samples sit (the source pages of steps 3 and 6 on the H200, of step 8 on the H100), the
    atomics' A/B and step 8's traffic on the H100."""
    def page_of(folder, name):
        rows = source_page(folder, name)
        total = sum(r[2] for r in rows)
        loop = max(r[1] for r in rows if r[0] == "HGMMA")
        in_loop = [r for r in rows if abs(r[1] - loop) <= 0.02 * loop]
        pct = lambda x: 100.0 * x / total
        waits = sum(r[2] for r in in_loop if r[0] == "WARPGROUP" and "DEPBAR" in r[4])
        return in_loop, pct, len(in_loop), pct(waits)
    _, _, n3, w3 = page_of(RESULTS, "source_10_bulk_dq_d128.csv.gz")
    _, _, n6, w6 = page_of(RESULTS, "source_10_tall_d64.csv.gz")
    l128, p128, n8, w8 = page_of(H100, "source_10_lean_d128.csv.gz")
    l64, p64, m8, v8 = page_of(H100, "source_10_lean_d64.csv.gz")
    rows128 = source_page(H100, "source_10_lean_d128.csv.gz")
    loop128 = max(r[1] for r in rows128 if r[0] == "HGMMA")
    dq_empty = max(p128(r[2]) for r in rows128 if r[0] == "BRA" and abs(r[1] - loop128) <= 0.1 * loop128)
    wide = p64(sum(r[2] for r in l64 if r[4].startswith("IMAD.WIDE")))
    ab = {}
    for r in read_h100("ch10_atomics_ab.csv"):
        ab.setdefault((r["variant"], r["head_dim"], r["seq_len"], r["causal"]), {})[r["tree"]] = float(r["ms"])
    gain = lambda v, d: [x["base"] / x["this"] for k, x in ab.items() if k[0] == v and k[1] == d]
    dram = {}
    for r in read_h100("ch10_traffic.csv"):
        if r["variant"] == "fastest":
            x = dram.setdefault((int(r["seq_len"]), int(r["head_dim"])), [0.0, 0.0])
            x[0] += float(r["measured_read_bytes"]) + float(r["measured_write_bytes"])
            x[1] += float(r["model_read_bytes"]) + float(r["model_write_bytes"])
    ratio = {k: m / model for k, (m, model) in dram.items()}
    first = {(r["seq_len"], r["causal"]): float(r["ms"]) for r in read_h100("ch10_atomics_ab.csv")
             if r["tree"] == "this" and r["variant"] == "tall"}
    tall_drift = max(abs(first[(r["seq_len"], r["causal"])] / float(r["ms"]) - 1)
                     for r in read_h100("ch10_unchecked_adds.csv")
                     if r["variant"] == "tall" and (r["seq_len"], r["causal"]) in first)
    now, before = ch10_table(), ch10_table(CH10_BEFORE)
    ratios = lambda impl, keep: [now[k][impl] / before[k][impl] for k in now if k in before and keep(k)
                                 and impl in now[k] and impl in before[k]]
    between = lambda impl, d: span(ratios(impl, lambda k: k[2] >= 4096 and k[3] == d))
    moved = max(abs(r - 1) * 100 for impl in ("ch08_fastest", "torch_flash", "torch_cudnn")
                for r in ratios(impl, lambda k: k[2] >= 4096))
    return [
        (CH10, f"executes {n3} instructions a query tile beside its 32 `wgmma` in step 3 at d = 128, "
               f"{n6:,} in step 6 at d = 64"),
        (CH10, f"executes {n8} instructions a tile at d = 128 and {m8} at d = 64 (descriptors included: the "
               f"case study), and the `wgmma` waits hold {w8:.0f}% and {v8:.0f}% of all samples, up from {w3:.0f}% "
               f"and {w6:.0f}%"),
        (CH10, f"Beside the `wgmma` waits (step 8), {dq_empty:.0f}% of step 8's samples at d = 128 wait on a dQ buffer"),
        (CH10_CASE, f"{n3} in step 3 at d = 128 and {n6:,} in step 6 at d = 64"),
        (CH10_CASE, f"count {n8} instructions a tile at d = 128 and {m8} at d = 64"),
        (CH10_CASE, f"hold {w8:.1f}% of all samples at d = 128 and {v8:.1f}% at d = 64, against {w3:.1f}% and "
                    f"{w6:.1f}% in steps 3 and 6"),
        (CH10_CASE, f"the `dq_empty` try-wait still holds {dq_empty:.1f}%; at d = 64 the instructions that computed "
                    f"the atomics' addresses held {wide:.1f}%"),
        (CH10_CASE, f"steps 2 and 6 measured {span(gain('specialized', '64') + gain('tall', '64'))} at d = 64 and step 2 "
                    f"{span(gain('specialized', '128'))} at d = 128, where step 3, which has no atomics, moved "
                    f"{span(gain('bulk_dq', '128'))}"),
        (CH10_CASE, f"{span(ch10_unchecked_gain())} step 8 at d = 64 on the H100"),
        (CH10_CASE, f"in which `tall`, unchanged between them, measured within {math.ceil(tall_drift * 100):.0f}% of itself"),
        (CH10_CASE, f"measured DRAM bytes {span(ratio.values())} the model's, the {ratio[(16384, 128)]:.2f} at "
                    f"N = 16384, d = 128"),
        (CH10_CASE, f"chapter 08 and PyTorch's backends moved by {moved:.0f}% or less, has step 3 at d = 128 "
                    f"{between('ch10_bulk_dq', 128)} faster, step 2 at d = 64 {between('ch10_specialized', 64)}, and `tall` "
                    f"{between('ch10_tall', 64)}"),
    ]


def ch11_grid_merge_claims():
    """The merge after a grid barrier on an H100: its A/B (ch11_grid_merge_ab_rows*.csv, the
    settings FT_CH11_GRID_MERGE=0 and =1 in one process, four rows in two rounds of opposite
    orders), the launch probe (launch_probe.csv) and the whole grid with the rule
    (ch11_grid_grid_merge.csv)."""
    off, on = "FT_CH11_GRID_MERGE=0", "FT_CH11_GRID_MERGE=1"
    rounds = {4: [h100_by_setting("ch11_grid_merge_ab_rows4.csv"), h100_by_setting("ch11_grid_merge_ab_rows4_reverse.csv")],
              1: [h100_by_setting("ch11_grid_merge_ab_rows1.csv")]}
    speed = lambda t, k, v="fastest": t[k][(off, v)] / t[k][(on, v)]
    frac = lambda ts, k, s: statistics.mean(t[k][(s, "stream_read")] / t[k][(s, "fastest")] for t in ts)
    out = []
    for k in [(1, 1, 4, 8192), (1, 1, 4, 32768), (1, 1, 4, 131072), (1, 8, 4, 8192), (1, 1, 1, 32768),
              (1, 1, 4, 1024), (16, 1, 4, 32768), (16, 1, 4, 1024)]:
        ts = rounds[k[2]]
        out.append((CH11_CASE, ", ".join(f"{speed(t, k):.2f}×" for t in ts) +
                    f" | {frac(ts, k, off):.2f} → {frac(ts, k, on):.2f} |"))
    # The rule's shapes: B = 1, no block merging two rows (at 1,024 keys blocks merge rows, or
    # the cluster merges: left out); where blocks merge rows in turn: B = 16 and B = 1 at 1,024
    # keys with four rows.
    rule = lambda k: k[0] == 1 and k[3] >= 8192
    turns = lambda k: (k[0] == 16 and k[1] == 1) or k == (1, 1, 4, 1024)
    picks = lambda pick, v="fastest": span([speed(t, k, v) for ts in rounds.values() for t in ts for k in t if pick(k)])
    out += [(CH11_CASE, f"Over every shape at B = 1 where no block merges two rows, {picks(rule)} (through pages of 16,\n"
                        f"{picks(rule, 'paged_16')}); where blocks merge rows one after another, {picks(turns)}"),
            (CH11, f"{picks(rule)} the step with `decode_merge` at B = 1"),
            (CH11, f"({frac(rounds[4], (1, 1, 4, 32768), off):.2f} → {frac(rounds[4], (1, 1, 4, 32768), on):.2f} of the read)"),
            (CH11, f"rows in turn it lost, {picks(turns)}")]
    again = h100_by_setting("ch11_grid_merge_rule_rows4.csv")[(1, 1, 4, 32768)]  # "built": the rule, the default
    of = lambda s: again[(s, "stream_read")] / again[(s, "fastest")]
    out.append((CH11_CASE, f"four rows, 32k keys, {of(off):.2f} → {of('built'):.2f} of the read"))
    lp = {r["launch"]: float(r["median_us"]) for r in read_h100("launch_probe.csv")}
    out += [(CH11_CASE, f"one kernel {lp['one_kernel']:.2f} µs, two kernels {lp['two_kernels']:.2f} (a second kernel\n"
                        f"adds {lp['two_kernels'] - lp['one_kernel']:.1f} µs), one kernel launched cooperatively "
                        f"{lp['cooperative']:.2f}"),
            (CH11_CASE, f"{lp['cooperative_sync']:.2f} (the barrier: {lp['cooperative_sync'] - lp['cooperative']:.2f} µs)")]
    g = {}
    for r in read_h100("ch11_grid_grid_merge.csv"):
        g.setdefault((int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"])), {})[r["variant"]] = float(r["ms"])
    long_ = [k for k in g if k[3] >= 32768 and "stream_read" in g[k]]
    mqa1 = lambda k: k[0] == 1 and k[1] == 1
    rd = lambda pick: span([of_read(g, k, "fastest") for k in long_ if pick(k)], unit="")
    pg = lambda pick: span([g[k]["contiguous"] / g[k][p] for k in long_ if pick(k) for p in ("paged_16", "paged_64", "paged_256")])
    out += [(CH11_CASE, f"{rd(lambda k: True)} of the read; below 0.85 only B = 1 with 32 heads on one"),
            (CH11_CASE, f"query row and with four); every other layout {rd(lambda k: not mqa1(k))}. The paged cache ran at "
                        f"{pg(lambda k: True)}"),
            (CH11_CASE, f"four rows); every other shape {pg(lambda k: not mqa1(k))}.")]
    return out


def ch11_graph_claims():
    """Step 6 at short caches in CUDA graphs and Python loops, on an H100
    (ch11_decode_graphs_short.csv, its plain calls in ch11_decode_graphs_short_calls.csv, µs)."""
    g, c = h100_graphs("ch11_decode_graphs_short.csv", 1000), h100_pytorch("ch11_decode_graphs_short_calls.csv")
    row = lambda impl, k: " / ".join(f"{x:.1f}" for x in [c[k][impl] * 1000] +
                                     [g[k][(impl, t)] for t in ("graph", "loop", "loop_graph")])
    table = [(1, 1), (1, 8), (1, 32), (16, 1), (16, 8)]
    out = [(CH11_CASE, f"| {b}, {kv}, 1,024 | {row('ch11', (b, kv, 1, 1024))} | {row('torch_cudnn', (b, kv, 1, 1024))} |")
           for b, kv in table]
    launches = [(b, kv, 1, 1024) for b, kv in table if (b, kv) != (16, 8)]
    us = lambda impl, ks, t: span([g[k][(impl, t)] for k in ks], digits=1, unit="")
    calls = span([c[k]["ch11"] * 1000 for k in launches], digits=1, unit="")
    pace = span([g[(b, kv, 1, 1024)][("torch_cudnn", "loop_graph")] / g[(b, kv, 1, 1024)][("ch11", "loop_graph")]
                 for b, kv in table])
    bytes_ = (16, 8, 1, 1024)
    rows4 = [(1, 1, 4, 1024), (1, 8, 4, 1024), (16, 1, 4, 1024)]  # grouped: cuDNN alone takes the mask
    cost = span([c[(b, kv, 4, 1024)]["torch_cudnn"] / c[(b, kv, 1, 1024)]["torch_cudnn"]
                 for b in (1, 16) for kv in (1, 8)], digits=1)
    out += [(CH11_CASE, f"still takes {us('ch11', launches, 'loop')} µs where one call's GPU time is\n{calls}"),
            (CH11_CASE, f"loop: {us('torch_cudnn', launches, 'loop')} µs)"),
            (CH11_CASE, f"ours ran at {pace} cuDNN's\npace"),
            (CH11_CASE, f"{us('ch11', launches, 'loop_graph')} µs a step against "
                        f"{us('torch_cudnn', launches, 'loop_graph')} where the launches decide, and\n"
                        f"{g[bytes_][('ch11', 'loop_graph')]:.1f} against {g[bytes_][('torch_cudnn', 'loop_graph')]:.1f}"),
            (CH11_CASE, f"a step costs it {cost} its\none-row time"),
            (CH11_CASE, f"our graph loop took {us('ch11', rows4, 'loop_graph')} µs a step against its\n"
                        f"{us('torch_cudnn', rows4, 'loop_graph')}.")]
    return out


def ch11_slice_claims():
    """The grid's merge in slices of a row's columns, on an H100: the first form and the rule,
    each against whole rows (FT_CH11_GRID_MERGE_SLICES=1) in one process, two rounds
    (ch11_grid_merge_slices_first_ab*.csv, ch11_grid_merge_slices_ab*.csv)."""
    whole = "FT_CH11_GRID_MERGE_SLICES=1"
    rule = ("built", "FT_CH11_GRID_MERGE_SLICES=")  # the form as built, and its rule named after the others
    first = [h100_by_setting("ch11_grid_merge_slices_first_ab.csv"), h100_by_setting("ch11_grid_merge_slices_first_ab_reverse.csv")]
    now = [h100_by_setting("ch11_grid_merge_slices_ab.csv"), h100_by_setting("ch11_grid_merge_slices_ab_reverse.csv")]
    speed = lambda ts, k, settings=rule: span([t[k][(whole, "fastest")] / t[k][(s, "fastest")]
                                              for t in ts for s in settings if (s, "fastest") in t[k]])
    frac = lambda ts, k, s: statistics.mean(t[k][(s, "stream_read")] / t[k][(s, "fastest")] for t in ts)
    aimed = [(1, 1, 1, 32768), (1, 1, 1, 131072)]
    others = span([t[k][(whole, "fastest")] / t[k][(s, "fastest")] for t in now for k in t if k not in aimed
                   for s in rule if (s, "fastest") in t[k]])
    mqa32 = (1, 1, 1, 32768)
    return [(CH11_CASE, f"one query row, against whole rows in one process): {speed(first, mqa32)} at 32,768\nkeys and "
                        f"{speed(first, (1, 1, 1, 131072))} at 131,072, but {speed(first, (1, 1, 1, 8192))} at 8,192 keys"),
            (CH11_CASE, f"{speed(first, (1, 8, 1, 8192))} with 32 heads on 8 at 8,192 (16 splits)"),
            (CH11_CASE, f"the step ran at {speed(now, (1, 1, 1, 8192), ('FT_CH11_GRID_MERGE_SLICES=4',))}."),
            (CH11_CASE, f"with 32 heads on one and one query row, {speed(now, mqa32)} at 32,768 keys "
                        f"({frac(now, mqa32, whole):.2f} → {frac(now, mqa32, 'built'):.2f} of the read)\nand "
                        f"{speed(now, (1, 1, 1, 131072))} at 131,072; every other shape runs the kernel it ran before, "
                        f"at {others},"),
            (CH11, f"slices of its columns, a block a slice: {speed(now, mqa32)} at one query row, 32k keys")] + \
        ch11_slice_grid_claims()


def ch11_slice_grid_claims():
    """The chapter's whole grid with the slices' rule on an H100 (ch11_grid_slices.csv), beside
    the whole grid before them (ch11_grid_grid_merge.csv)."""
    g, before = h100_grid("ch11_grid_slices.csv"), h100_grid("ch11_grid_grid_merge.csv")
    long_ = [k for k in g if k[3] >= 32768 and "stream_read" in g[k]]
    mqa1 = lambda k: k[0] == 1 and k[1] == 1
    rd = lambda pick: span([of_read(g, k, "fastest") for k in long_ if pick(k)], unit="")
    worst = min(long_, key=lambda k: of_read(g, k, "fastest") if not mqa1(k) else 2)
    pages = ("paged_16", "paged_64", "paged_256")
    pg = lambda pick, ps=pages: span([g[k]["contiguous"] / g[k][p] for k in long_ if pick(k) for p in ps])
    one = (1, 1, 1, 32768)
    return [(CH11_CASE, f"`fastest` read at {rd(lambda k: True)} of the\nread; below 0.85 only B = 1 with 32 heads on one, "
                        f"four query rows, 32k keys ({of_read(g, (1, 1, 4, 32768), 'fastest'):.2f})"),
            (CH11_CASE, f"{of_read(before, one, 'fastest'):.2f} in the whole grid before the slices, read at "
                        f"{of_read(g, one, 'fastest'):.2f}."),
            (CH11_CASE, f"Every other layout ran at {rd(lambda k: not mqa1(k))}, the {of_read(g, worst, 'fastest'):.2f} at "
                        f"B = {worst[0]} with 32 heads on {({1: 'one'}).get(worst[1], worst[1])}"),
            (CH11_CASE, f"contiguous cache, read at {g[worst]['stream_read'] / g[worst]['contiguous']:.2f}. The paged cache "
                        f"ran at {pg(lambda k: True)} its contiguous one"),
            (CH11_CASE, f"({pg(lambda k: mqa1(k) and k[3] == 32768)} at 32k keys, "
                        f"{pg(lambda k: mqa1(k) and k[3] == 131072)} at 128k);\n"
                        f"every other shape {pg(lambda k: not mqa1(k))}.")]


def ch11_empty_split_claims():
    """The splits past the keys, kept (FT_CH11_EMPTY_SPLITS=1) and dropped, four query rows, on
    an H100, two rounds (ch11_empty_splits_ab.csv, _reverse)."""
    keep, drop = "FT_CH11_EMPTY_SPLITS=1", ("built", "FT_CH11_EMPTY_SPLITS=")
    ts = [h100_by_setting(name) for name in ("ch11_empty_splits_ab.csv", "ch11_empty_splits_ab_reverse.csv")]
    speed = lambda ks: span([t[k][(keep, "fastest")] / t[k][(s, "fastest")] for t in ts for k in ks for s in drop
                             if (s, "fastest") in t[k]])
    frac = lambda k, ss: span([t[k][(s, "stream_read")] / t[k][(s, "fastest")] for t in ts for s in ss
                               if (s, "fastest") in t[k]], unit="")
    aimed = [(1, 1, 4, 32768), (1, 1, 4, 8192)]
    k32 = aimed[0]
    return [(CH11_CASE, f"at 32,768 keys\n{speed([k32])} ({frac(k32, (keep,))} of the read kept, {frac(k32, drop)} dropped); "
                        f"at 8,192 keys {speed([aimed[1]])}"),
            (CH11_CASE, f"which had no empty split,\n{speed([k for k in ts[0] if k not in aimed])}."),
            (CH11, f"whole tiles leaves past the keys are dropped: {speed([k32])} at four query rows, 32k keys")]


def ch11_table_claims():
    """The block-table entries two tiles ahead in shared memory against the registers a tile
    ahead (FT_CH11_TABLE_IN_REGISTERS=1), on an H100: four query rows in two rounds, one row
    in one (ch11_table_in_shared_ab_rows4.csv, _rows4_reverse, _rows1)."""
    reg, shared = "FT_CH11_TABLE_IN_REGISTERS=1", ("built", "FT_CH11_TABLE_IN_REGISTERS=")
    ts4 = [h100_by_setting(f"ch11_table_in_shared_ab_rows4{r}.csv") for r in ("", "_reverse")]
    ts1 = [h100_by_setting("ch11_table_in_shared_ab_rows1.csv")]
    paged = ("paged_16", "paged_64", "paged_256")
    k32, k1, k8 = (1, 1, 4, 32768), (1, 1, 4, 1024), (1, 1, 4, 8192)
    us = lambda v: "–".join(f"{f(t[k32][(reg, x)] for t in ts4 for x in v) * 1000:.1f}" for f in (min, max))
    of = lambda ks: span([t[k][(reg, "contiguous")] / t[k][(reg, x)] for t in ts4 for k in ks for x in paged])
    gain = lambda pairs: span([t[k][(reg, x)] / t[k][(s, x)] for t, k in pairs for x in paged for s in shared
                               if (s, x) in t[k]])
    at = lambda k: [(t, k) for t in ts4]
    rest = [(t, k) for t in ts4 + ts1 for k in t if k not in (k32, k1, k8)]
    return [(CH11_CASE, f"a step whatever the page size: four query rows, 32k keys, {us(paged)} µs against "
                        f"{us(('contiguous',))}\n({of([k32])}), and {of([k1, k8])} at 1k and 8k keys"),
            (CH11_CASE, f"{gain(at(k32))} at 32k keys with four rows, {gain(at(k1))}\n  at 1k and {gain(at(k8))} at 8k; "
                        f"every other shape {gain(rest)}.")]


def ch11_length_first_claims():
    """A paged block's first table entries loaded after the sequence's length
    (FT_CH11_LENGTH_FIRST=1) and beside it, on an H100, two rounds at one and at four query
    rows (ch11_length_first_ab_rows1.csv, _rows4, _reverse twins); and the whole grid with the
    change (ch11_grid_length_first.csv)."""
    old, new = "FT_CH11_LENGTH_FIRST=1", ("built", "FT_CH11_LENGTH_FIRST=")
    t1, t4 = ([h100_by_setting(f"ch11_length_first_ab_rows{q}{r}.csv") for r in ("", "_reverse")] for q in (1, 4))
    paged = ("paged_16", "paged_64", "paged_256")
    gain = lambda ts, pick, vs=paged: span([t[k][(old, x)] / t[k][(s, x)] for t in ts for k in t if pick(k)
                                            for x in vs for s in new if (s, x) in t[k]])
    of = lambda ts, pick, ss: span([t[k][(s, "contiguous")] / t[k][(s, x)] for t in ts for k in t if pick(k)
                                    for x in paged for s in ss if (s, x) in t[k]])
    us = lambda x: "–".join(f"{f(t[k][(s, x)] for t in t4 for k in t if k == (1, 1, 4, 32768) for s in new if (s, x) in t[k]) * 1000:.1f}"
                            for f in (min, max))
    mqa = lambda *ns: lambda k: k[:2] == (1, 1) and k[3] in ns
    out = [(CH11_CASE, f"one and at four query rows). At B = 1 with 32 heads on one: {gain(t1, mqa(1024))} at 1k keys and\n"
                       f"{gain(t1, mqa(8192))} at 8k with one row ({gain(t4, mqa(1024))} and {gain(t4, mqa(8192))} with four), "
                       f"{gain(t1, mqa(32768))} at 32k with\none row"),
           (CH11_CASE, f"there went from {of(t1, mqa(32768), (old,))} to\n{of(t1, mqa(32768), new)} at 32k keys, and from "
                       f"{of(t1, mqa(1024, 8192), (old,))} to {of(t1, mqa(1024, 8192), new)} at 1k and 8k"),
           (CH11_CASE, f"32k keys, {gain(t4, mqa(32768), paged[1:])} through pages of 64 and 256 tokens but "
                       f"{gain(t4, mqa(32768), paged[:1])} through pages of 16,\nwhere the paged step stays at "
                       f"{us('paged_16')} µs against {us('contiguous')}"),
           (CH11_CASE, f"At 128k keys {gain(t1 + t4, mqa(131072))}; at B = 1 with 32 heads on 8,\n"
                       f"{gain(t1 + t4, lambda k: k[:2] == (1, 8) and k[3] == 8192)} at 8k keys. At B ≥ 16 with one row and 1k keys, "
                       f"{gain(t1, lambda k: k[0] >= 16 and k[3] == 1024)}"),
           (CH11_CASE, f"with four rows {gain(t4, lambda k: k[0] >= 16 and k[3] == 1024)}, and from 8k keys\n"
                       f"{gain(t1 + t4, lambda k: k[0] >= 16 and k[3] >= 8192)}."),
           (CH11, f"(up to the split's end within N_k) instead of after it: at B = 1 with 32 heads on one and\n"
                  f"one query row, {gain(t1, mqa(1024, 8192, 32768))} from 1k to 32k keys, the paged cache then at "
                  f"{of(t1, mqa(32768), new)} its\ncontiguous one at 32k"),
           (CH11, f"then the copies; paged\n    rows {gain(t1, mqa(8192))} faster without"),
           ("docs/answers.md", f"the paged rows {gain(t1, mqa(8192))} faster without `FT_CH11_LENGTH_FIRST=1`, the paged "
                               f"cache\nthen at {of(t1, mqa(8192), new)} the contiguous one. From 8k keys at B ≥ 16 with one row"),
           ("docs/answers.md", f"the same round trip is lost in the stream ({gain(t1, lambda k: k[0] >= 16 and k[3] >= 8192)})")]
    g = h100_grid("ch11_grid_length_first.csv")
    long_ = [k for k, v in g.items() if k[3] >= 32768 and "stream_read" in v]
    frac = lambda k: g[k]["stream_read"] / g[k]["fastest"]
    pg = lambda ks, vs=paged: span([g[k]["contiguous"] / g[k][x] for k in ks for x in vs], unit="")
    b1 = [k for k in long_ if k[:3] == (1, 1, 4)]
    out += [(CH11_CASE, f"`fastest` read at {span([frac(k) for k in long_], unit='')} of the read,\nthe lowest B = 1 with 32 heads "
                        f"on one and four query rows at 32k keys ({frac((1, 1, 4, 32768)):.3f}), then "
                        f"{frac((128, 1, 4, 131072)):.2f} at"),
            (CH11_CASE, f"The paged cache ran at {pg([k for k in long_ if k not in b1])}× its\ncontiguous one, except at B = 1 with "
                        f"32 heads on one and four rows ({pg(b1)}×): through pages\nof 16 tokens "
                        f"{pg([(1, 1, 4, 32768)], paged[:1])}× at 32k keys and {pg([(1, 1, 4, 131072)], paged[:1])}× at 128k, and "
                        f"{pg([(1, 1, 4, 32768)], paged[1:2])}× through pages of 64 at 32k.")]
    return out


def ch11_grid_row32_claims():
    """The whole grid on an H100 with the pool's rows in 32 bits (ch11_grid_row32.csv): the
    fraction of the read at N_k >= 32k, and the paged cache against the contiguous one, up to
    32 rows a key/value head and at 128 (32 heads on one, four query rows)."""
    g = h100_grid("ch11_grid_row32.csv")
    paged = ("paged_16", "paged_64", "paged_256")
    long_ = [k for k, v in g.items() if k[3] >= 32768 and "stream_read" in v]
    frac = lambda k: g[k]["stream_read"] / g[k]["fastest"]
    pg = lambda ks, vs=paged: span([g[k]["contiguous"] / g[k][x] for k in ks for x in vs if x in g[k]])
    r128 = [k for k in long_ if k[1:3] == (1, 4)]
    fewer = [k for k in long_ if k not in r128]
    low = (1, 1, 4, 32768)
    rest = min(frac(k) for k in long_ if k != low)
    small_b = [k for k in r128 if k[0] <= 16 and "paged_16" in g[k]]
    return [
        (CH11, f"from 32k keys B = 1 with 32 heads on one\nand four query rows reads at {frac(low):.3f} of the read, every "
               f"other layout at {rest:.2f} or more; the paged cache\nruns at {pg(fewer)} the contiguous one up to 32 "
               f"rows a key/value head, {pg(r128)} at 128 (pages of\n16: {pg(small_b, paged[:1])} at B ≤ 16)"),
        (CH11_CASE, f"at N_k ≥ 32k `fastest` read at {span([frac(k) for k in long_], unit='')} of the read, the lowest again "
                    f"B = 1 with 32\nheads on one and four rows at 32k keys ({frac(low):.3f}), then {rest:.2f} with one row. "
                    f"The paged cache ran at\n{pg(fewer)} its contiguous one up to 32 rows a key/value head; at 128, {pg(r128)}, "
                    f"through pages of\n16 {pg(small_b, paged[:1])} at B = 1 and 16."),
        (CH11, f"Through pages: {pg(fewer)} the contiguous cache up to 32 rows, {pg(r128)} at 128 "
               f"(`ch11_grid_row32.csv`)")]


def ch11_graph_row32_claims():
    """The whole grid in CUDA graphs on an H100 with the kernels as they stand
    (ch11_decode_graphs_row32.csv, its plain calls in ch11_decode_graphs_row32_calls.csv):
    graph loops at short caches against cuDNN's, replays against calls, and the calls that
    moved from the two runs before (ch11_decode_vs_pytorch_runner.csv, _row32.csv)."""
    g, calls = h100_graphs("ch11_decode_graphs_row32.csv"), h100_pytorch("ch11_decode_graphs_row32_calls.csv")
    short = [(b, kv, 1, 1024) for b, kv in [(1, 1), (1, 8), (1, 32), (16, 1)]]  # the launches decide
    loop = lambda impl: span([g[k][(impl, "loop_graph")] * 1000 for k in short], digits=1, unit="")
    pace = span([g[k][("torch_cudnn", "loop_graph")] / g[k][("ch11", "loop_graph")] for k in short])
    replay = lambda impl: [g[k][(impl, "graph")] / calls[k][impl] for k in g if (impl, "graph") in g[k]]
    count = lambda xs, pick: sum(1 for x in xs if pick(x))
    same = lambda x: abs(x - 1) <= 0.05
    ours, cudnn, fa2 = replay("ch11"), replay("torch_cudnn"), replay("torch_flash")
    slow = lambda xs: span([x for x in xs if x > 1.05])
    before = [h100_pytorch(f) for f in ("ch11_decode_vs_pytorch_runner.csv", "ch11_decode_vs_pytorch_row32.csv")]
    moved = lambda k: (f"{calls[k]['ch11'] * 1000:.1f}", span([b[k]["ch11"] * 1000 for b in before], digits=1, unit=""),
                       f"{min(x for i, x in calls[k].items() if i.startswith('torch')) / calls[k]['ch11']:.2f}×")
    mqa8k, mqa32k = moved((128, 1, 1, 8192)), moved((16, 1, 1, 32768))
    at_least = count([min(x for i, x in v.items() if i.startswith("torch")) / v["ch11"] for v in calls.values()],
                     lambda x: x >= 1)
    return [(CH11_CASE, f"row our graph loop took {loop('ch11')} µs a step against cuDNN's {loop('torch_cudnn')}, "
                        f"{pace} its pace"),
            (CH11_CASE, f"within 5% of its call on {count(cudnn, same)} shapes and faster on the other "
                        f"{count(cudnn, lambda x: x < 0.95)}"),
            (CH11_CASE, f"call on {count(ours, same)} shapes, faster on {count(ours, lambda x: x < 0.95)} and "
                        f"{slow(ours)} slower on {count(ours, lambda x: x > 1.05)}"),
            (CH11_CASE, f"backend ran {slow(fa2)} slower on {count(fa2, lambda x: x > 1.05)}"),
            (CH11_CASE, f"ours took {mqa8k[0]} µs, where the two runs before took {mqa8k[1]}"),
            (CH11_CASE, f"{mqa8k[2]} PyTorch's fastest backend there"),
            (CH11_CASE, f"{mqa32k[0]} µs against {mqa32k[1]} ({mqa32k[2]})"),
            (CH11_CASE, f"as fast as PyTorch's fastest on {at_least} of the {len(calls)} shapes")]


def ch11_third_stage_claims():
    """A third K/V stage for step 6 (three_stages) against two (two_stages), the two programs
    in turn on each shape, on an H100, two rounds in opposite orders (ch11_third_stage_ab.csv
    and its _reverse twin, d = 128), and one at d = 64 (ch11_third_stage_ab_d64.csv)."""
    ts = [h100_by_setting(f"ch11_third_stage_ab{r}.csv") for r in ("", "_reverse")]
    d64 = [h100_by_setting("ch11_third_stage_ab_d64.csv")]
    paged = ("paged_16", "paged_64", "paged_256")
    gain = lambda keys, vs, tt=ts: span([t[k][("two_stages", x)] / t[k][("three_stages", x)] for t in tt for k in keys
                                         for x in vs])
    of = lambda key, s, a, b: span([t[key][(s, a)] / t[key][(s, b)] for t in ts], unit="")
    keys = list(ts[0])
    at = (1, 1, 4, 32768)
    one_wg = [k for k in keys if k[1:3] == (1, 4) and k[0] == 1 and k[3] <= 32768]  # splits of 1-4 tiles
    two_wg = [k for k in keys if k[1:3] == (1, 4) and k not in one_wg]
    two_wg64 = [k for k in d64[0] if k[1:3] == (1, 4) and (k[0] >= 16 or k[3] >= 131072)]
    fewer = [k for k in keys if k[1:3] in ((1, 1), (8, 4))]  # 32 rows (32 on one, a row) and 16 (32 on 8, four)
    step5 = [k for k in keys if k[1:3] == (8, 1)]  # four rows a key/value head, caches over 32 MB
    every = ("fastest", "contiguous") + paged
    return [(CH11_CASE, f"with one warpgroup (B = 1 up to 32k keys: a split is one tile at 1k and 8k keys,\nfour at "
                        f"32k), {gain(one_wg, ('fastest', 'contiguous'))} for the contiguous cache: at 32k keys `fastest` went from "
                        f"{of(at, 'two_stages', 'stream_read', 'fastest')} of\nthe read to {of(at, 'three_stages', 'stream_read', 'fastest')}, "
                        f"but pages of 16 ran {gain([at], paged[:1])} the two-stage program there, and fell\nfrom "
                        f"{of(at, 'two_stages', 'contiguous', 'paged_16')}× to {of(at, 'three_stages', 'contiguous', 'paged_16')}× "
                        f"their contiguous cache. Where two warpgroups run a split (B ≥ 16, or 128k\nkeys: eight tiles a split or "
                        f"more), "
                        f"{gain(two_wg, ('fastest', 'contiguous'))} for the contiguous cache and {gain(two_wg, paged)} through pages; "
                        f"at d = 64, where\nonly two warpgroups got the third stage, {gain(two_wg64, paged, d64)} through pages. "
                        f"With 16 or 32\nrows a key/value head (one warpgroup): {gain(fewer, every)}; with 32 heads on 8 and one "
                        f"row, which\nstep 5 runs, unchanged: {gain(step5, every)}, the noise between the two programs."),
            (CH11, f"ran {gain(two_wg, ('fastest', 'contiguous') + paged)} where two warpgroups run a split (B ≥ 16,\nor "
                   f"128k keys) and {gain([at], ('fastest', 'contiguous'))} with one at B = 1 and 32k keys, its pages of 16 "
                   f"{gain([at], paged[:1])}")]


def ch11_row32_claims():
    """The pool's rows counted in 32 bits (row32) against 64 (row64), each program in turn on
    each shape, on an H100, two rounds in opposite orders (ch11_paged_row32_ab.csv and its
    _reverse twin)."""
    ts = [h100_by_setting(f"ch11_paged_row32_ab{r}.csv") for r in ("", "_reverse")]
    paged = ("paged_16", "paged_64", "paged_256")
    at, long_ = (1, 1, 4, 32768), (1, 1, 4, 131072)
    gain = lambda keys, vs, digits=2: span([t[k][("row64", x)] / t[k][("row32", x)] for t in ts for k in keys
                                            for x in vs], digits)
    of = lambda key, s, x: span([t[key][(s, "contiguous")] / t[key][(s, x)] for t in ts])
    rest = [k for k in ts[0] if k not in (at, long_)]
    return [(CH11_CASE, f"shape {gain([at], paged[:1], 3)} through pages of 16, {gain([at], paged[1:2], 3)} through pages "
                        f"of 64 and {gain([at], paged[2:], 3)}\n  through 256; pages of 16 against the contiguous cache went "
                        f"from {of(at, 'row64', 'paged_16')} to {of(at, 'row32', 'paged_16')},\n  pages of 256 from "
                        f"{of(at, 'row64', 'paged_256')} to {of(at, 'row32', 'paged_256')}. At 128k keys with four rows, "
                        f"no change ({gain([long_], paged[:1])}\n  through pages of 16, which stay at "
                        f"{of(long_, 'row32', 'paged_16')} their contiguous cache)"),
            (CH11_CASE, f"Every other shape measured\n  {gain(rest, paged)}."),
            (CH11, f"with four rows at 32k keys, {gain([at], paged)} through every page\nsize, pages of 16 at "
                   f"{of(at, 'row32', 'paged_16')} their contiguous cache (from {of(at, 'row64', 'paged_16')}; same section).")]


def ch11_flashinfer_h100_claims():
    """The kernels beside FlashInfer 0.6 on an H100, N_k >= 32k, as the H200's sentence counts
    them (ch11_decode_vs_pytorch_flashinfer.csv)."""
    ms = h100_pytorch("ch11_decode_vs_pytorch_flashinfer.csv")
    fi = lambda pick: span([min(v for i, v in x.items() if i.startswith("flashinfer")) / x["ch11"]
                            for k, x in ms.items() if pick(k) and k[3] >= 32768
                            and any(i.startswith("flashinfer") for i in x)])
    return [(CH11, f"{fi(lambda k: k[1:3] == (32, 1))} with 32 on 32, {fi(lambda k: k[1:3] == (8, 1))} with 32 on 8, "
                   f"{fi(lambda k: k[2] == 4)} with four rows")]


def ch11_short_split_claims():
    """The case study's forced splits at short caches (ch11_short_splits.csv, µs)."""
    t = {}
    for r in read("ch11_short_splits.csv"):
        t.setdefault((int(r["batch"]), int(r["heads_kv"]), int(r["len_kv"])), {})[r["splits"]] = float(r["ms"]) * 1000
    rows = [(CH11_CASE, f"| {b}, {kv}, {n:,} | " + " | ".join(f"{x[s]:.1f}" for s in ("auto", "1", "2", "4", "8")) + " |")
            for (b, kv, n), x in t.items()]
    gain = [t[k]["auto"] / t[k]["8"] for k in ((1, 1, 1024), (1, 8, 1024))]
    return rows + [(CH11_CASE, f"8 splits took {span(gain)} off the heuristic's time"),
                   (CH11_CASE, f"8 splits made the step {t[(16, 1, 1024)]['8'] / t[(16, 1, 1024)]['auto']:.2f}× slower")]


def ch11_claims():
    """The lesson's step table (at N_k = 32768), the waves, the sweep, the predictions'
    outcomes, the regime paragraph and the comparison with PyTorch."""
    t, before = decode_times(), decode_times("ch11_decode_rounded_up.csv")
    steps = ("one_block", "split_kv", "grouped", "batched_v", "tensor_cores")
    out = []
    for b, kv, nq in ((1, 32, 1), (16, 32, 1), (128, 32, 1), (1, 8, 1), (16, 8, 1), (1, 1, 1), (16, 1, 1),
                      (1, 32, 4), (16, 32, 4), (16, 8, 4)):
        key = (b, kv, nq, 32768)
        out.append((CH11, f"| {b} | {kv} | {nq} | {32 // kv * nq} | " +
                          " | ".join(f"{of_read(t, key, v):.2f}" for v in steps) + " |"))
    gbps = {(int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"])): float(r["gbps"])
            for r in read("decode.csv") if r["variant"] == "stream_read"}
    small = (1, 8, 1, 32768)
    out += [(CH11, f"up to {max(gbps.values()) / 1000:.2f} TB/s on the H200"),
            (CH11, f"{t[small]['stream_read'] * 1000:.0f} µs: {gbps[small] / 1000:.1f} TB/s")]
    mha = lambda n: (1, 32, 1, n)
    out += [(CH11, f"{of_read(before, mha(32768), 'batched_v'):.2f} of the read at 32k keys"),
            (CH11, f"runs at {of_read(t, mha(32768), 'batched_v'):.2f} of the read; at 128k keys "
                   f"{of_read(before, mha(131072), 'batched_v'):.2f} became {of_read(t, mha(131072), 'batched_v'):.2f}")]
    sweep = {r["splits"]: float(r["ms"]) for r in read("decode_splits.csv")
             if r["variant"] == "batched_v" and (r["batch"], r["heads_kv"], r["len_kv"]) == ("1", "8", "32768")}
    mid = [sweep[k] for k in ("64", "auto")]
    out += [(CH11, f"({min(mid):.3f}–{max(mid):.3f} ms), while 32 splits take {sweep['32'] / min(mid):.2f}× as long "
                   f"and 128 take {sweep['128'] / min(mid):.2f}×")]
    big = [of_read(t, k, "one_block") for k in t if k[1] == 32 and k[2] == 1 and k[0] >= 16 and k[3] == 32768]
    out += [(CH11, f"ran at {of_read(t, mha(32768), 'one_block'):.2f} of the read at B = 1"),
            (CH11, f"at {span(big, unit='')} where the grid is large"),
            (CH11, f"filled the GPU at B = 1 ({of_read(t, mha(32768), 'split_kv'):.2f})")]
    g = lambda key: t[key]["split_kv"] / t[key]["grouped"]
    out += [(CH11, f"{g((16, 8, 1, 32768)):.1f}× step 2 at B = 16 with 32 heads on 8"),
            (CH11, f"with 32 on 1 it gained {g((16, 1, 1, 32768)):.0f}×")]
    bv = lambda key: t[key]["grouped"] / t[key]["batched_v"]
    k16 = (16, 32, 1, 8192)
    out += [(CH11, f"gained {bv(k16):.2f}× over step 3 at B = 16, 8192 keys, 32 heads on 32 "
                   f"({of_read(t, k16, 'grouped'):.2f} → {of_read(t, k16, 'batched_v'):.2f})"),
            (CH11, f"{bv(mha(131072)):.2f}× at B = 1, 128k keys"),
            (CH11, f"batched_v about {bv(k16):.1f}× faster at B = 16 and {bv(mha(131072)):.2f}× at B = 1"),
            ("docs/answers.md", f"batched_v at {bv(k16):.2f}× grouped for B = 16, N_k = 8192 and "
                                f"{bv(mha(131072)):.2f}× for B = 1")]
    # The paged cache: on step 4's kernel (ch11_paged_batched_v.csv), then on step 5's with a
    # division a row (ch11_paged_division.csv) and with a shift (ch11_paged.csv, the tree's).
    def paged(name, pick=lambda k: True):
        pg = decode_times(name)
        return span([pg[k]["contiguous"] / pg[k][p] for k in pg if pick(k) and "contiguous" in pg[k]
                     for p in ("paged_16", "paged_64", "paged_256") if p in pg[k]])
    grid_paged = lambda pick: span([x["contiguous"] / x[p] for k, x in t.items() if "contiguous" in x and
                                    k[3] >= 32768 and pick(k) for p in ("paged_16", "paged_64", "paged_256")])
    out += [(CH11, f"{grid_paged(lambda k: k[1] > 1)} at N_k ≥ 32k with 8 or 32 key/value heads, "
                   f"{grid_paged(lambda k: k[1] == 1)} with 32 on one")]
    out += [(CH11, f"the paged cache ran at {paged('ch11_paged_batched_v.csv')} the contiguous one"),
            (CH11, f"made it {paged('ch11_paged_division.csv', lambda k: k[0] >= 16 and k[3] >= 8192)} (the GPU"),
            (CH11, f"{paged('ch11_paged.csv', lambda k: k[1] > 1)} its contiguous cache with 8 or 32"),
            (CH11, f"{paged('ch11_paged.csv', lambda k: k[1] == 1)} with 32 heads on one"),
            (CH11, f"{paged('ch11_paged_division.csv', lambda k: k[0] >= 16 and k[3] >= 8192)} at B ≥ 16 "
                   f"(`ch11_paged_division.csv`, measured on an earlier form). (Medium, an hour.)"),
            ("docs/answers.md", f"{paged('ch11_paged_division.csv', lambda k: k[0] >= 16 and k[3] >= 8192)} its "
                                f"contiguous cache at B ≥ 16, pages of 16, 64 and 256 alike; with the shift and the "
                                f"mask, {paged('ch11_paged.csv', lambda k: k[1] > 1)} with 8 or 32"),
            ("README.md", f"the paged cache at {paged('ch11_paged.csv', lambda k: k[1] > 1)} the contiguous one")]
    # Step 5's copies: offsets between the cp.async statements (the first form, its grid) or
    # all found first (six shapes; the grid's form now); and the paged cache read by that kernel
    # with the table entries found in front of the copies.
    cp = {}
    for r in read("ch11_tensor_cores_copies.csv"):
        key = (int(r["batch"]), int(r["heads_kv"]), int(r["seq_len"]), int(r["len_kv"]))
        cp.setdefault(r["copy"], {}).setdefault(key, {})[r["variant"]] = float(r["ms"])
    first = cp["offsets_first"]
    full = [of_read(first, k, "tensor_cores") for k in first if k[0] >= 16 and k[1] > 1]
    between = span([of_read(cp['offsets_between_copies'], k, 'tensor_cores') for k in first if k[0] >= 16 and k[1] > 1],
                   unit='')
    out += [(CH11, f"read at {between} of the read where this form reads at {span(full, unit='')}"),
            (CH11_CASE, f"form read at {span(full, unit='')} of the read at B ≥ 16 with 8 or 32 key/value heads, "
                        f"where the first gave {span([of_read(cp['offsets_between_copies'], k, 'tensor_cores') for k in first if k[0] >= 16 and k[1] > 1], unit='')}")]
    rows = lambda k: 32 // k[1] * k[2]
    long_ = [k for k in t if k[3] >= 32768]
    rd = lambda pick, v="fastest": span([of_read(t, k, v) for k in long_ if pick(rows(k))], unit="")
    tcp_first = [first[k]["contiguous"] / first[k][p] for k in first for p in ("paged_16", "paged_64", "paged_256")]
    out += [(CH11_CASE, f"| entries loaded in front of each tile's copies | {span(tcp_first)} |"),
            (CH11_CASE, f"| entries a tile ahead, t / page_size and t % page_size a row | "
                        f"{paged('ch11_paged_division.csv', lambda k: k[0] >= 16 and k[3] >= 8192)} at B ≥ 16 |"),
            (CH11_CASE, f"| entries a tile ahead, a shift and a mask | {paged('ch11_paged.csv', lambda k: k[1] > 1)} "
                        f"with 8 or 32 key/value heads |"),
            (CH11_CASE, f"With 32 heads on one it is {paged('ch11_paged.csv', lambda k: k[1] == 1)}"),
            (CH11_CASE, f"The grid measures {rd(lambda r: r == 32)} of the read for these shapes"),
            (CH11_CASE, f"(4 rows, one block a head) reach {span([of_read(t, k, 'fastest') for k in long_ if k[1] == 8 and k[2] == 1], unit='')}")]
    st = {}
    for r in read("ch11_stages.csv"):
        if r["variant"] == "tensor_cores":
            st.setdefault((r["batch"], r["heads_kv"], r["seq_len"], r["len_kv"]), {})[r["stages"]] = float(r["ms"])
    three = span([x["2"] / x["3"] for x in st.values()])
    out += [(CH11, f"changed nothing ({three},"), (CH11_CASE, f"on twelve shapes (`ch11_stages.csv`): {three} the two-stage kernel")]
    # 64-key block tiles, three blocks a SM, beside the 128-key tile (an H100): tensor_cores' speed.
    tk = {}
    for r in read_h100("ch11_tile_keys.csv"):
        if r["variant"] == "tensor_cores":
            tk.setdefault((int(r["batch"]), int(r["heads_kv"]), int(r["len_kv"])), {})[r["setting"]] = float(r["ms"])
    speed = {k: x["built"] / x["FT_CH11_TILE_KEYS=64"] for k, x in tk.items()}
    two_tiles = [(16, 1, 32768), (128, 1, 8192), (128, 1, 32768)]  # the same 128-key kernel in both runs
    vs = {(int(r["batch"]), int(r["heads_kv"]), int(r["len_kv"]), r["impl"], r["setting"]): float(r["ms"])
          for r in read_h100("ch11_tile_keys_vs_pytorch.csv") if r["status"] == "ok"}
    cudnn = [f"{vs[(128, 1, 1024, 'torch_cudnn', s)] / vs[(128, 1, 1024, 'ch11', s)]:.2f}"
             for s in ("built", "FT_CH11_TILE_KEYS=64")]
    out += [(CH11_CASE, f"B = 128 with 32 heads on one and 1k keys: {speed[(128, 1, 1024)]:.2f}× "
                        f"(cuDNN's time over ours from {cudnn[0]} to {cudnn[1]}"),
            (CH11_CASE, f"in both runs, at {span([speed[k] for k in two_tiles])}. On the other ten the 64-key tile ran at "
                        f"{span([v for k, v in speed.items() if k != (128, 1, 1024) and k not in two_tiles])} the 128-key"),
            (CH11_CASE, f"{span([v for k, v in speed.items() if k[:2] == (1, 1)])} at B = 1 with 32 heads on one")]
    out += [(CH11, f"batched_v read {rd(lambda r: r == 1, 'batched_v')} of it with one row"),
            (CH11, f"{rd(lambda r: r == 4, 'batched_v')} with four"),
            (CH11, f"and {max(of_read(t, k, 'batched_v') for k in long_ if rows(k) >= 16):.2f} or less with 16 or more"),
            (CH11, f"more than the {probe('ffma_f32'):.1f} TFLOP/s the H200's FFMA probe measures"),
            (CH11, f"`tensor_cores` reads at {rd(lambda r: r in (1, 4))} of the read with one or four rows"),
            (CH11, f"{rd(lambda r: r == 16)} with 16"),
            (CH11, f"at N_k ≥ 32k, {span([of_read(t, k, 'fastest') for k in long_ if k[0] >= 16 and rows(k) <= 16], unit='')} at B ≥ 16"),
            ("README.md", f"({span([of_read(t, k, 'fastest') for k in long_ if k[0] >= 16 and rows(k) <= 4], unit='')} at B ≥ 16); the paged cache"),
            (CH11, f"{rd(lambda r: r == 32)} with 32"),
            (CH11, f"{rd(lambda r: r == 128)} with 128"),
            (CH11, f"590 TFLOP/s of products at the read's speed ({rd(lambda r: r == 128)} measured)"),
            ("docs/answers.md", f"`decode.csv` has it at {rd(lambda r: r == 128)} of the read")]
    ms = {}
    def vs_times(name):
        ms = {}
        for r in read(name):
            if r["ms"]:
                ms.setdefault((int(r["batch"]), int(r["heads_kv"]), int(r["len_q"]), int(r["len_kv"])), {})[r["impl"]] = \
                    float(r["ms"])
        return ms
    # decode_vs_pytorch.csv: every shape, with FlashInfer, the tree's row-tile rule and early merge.
    ms = vs_times("decode_vs_pytorch.csv")
    theirs = lambda x, who: min((v for i, v in x.items() if i.startswith(who)), default=None)
    ratio = lambda times, who, pick: span([theirs(x, who) / x["ch11"] for k, x in times.items()
                                          if pick(k) and k[3] >= 32768 and "ch11" in x and theirs(x, who)])
    vs = lambda kv, nq: ratio(ms, "torch_", lambda k: k[1:3] == (kv, nq))
    vsb = lambda kv, nq, big, times=ms: ratio(times, "torch_", lambda k: k[1:3] == (kv, nq) and (k[0] >= 16) == big)
    fi = lambda kv, nq: ratio(ms, "flashinfer", lambda k: k[1:3] == (kv, nq))
    fi4 = ratio(ms, "flashinfer", lambda k: k[2] == 4)
    out += [(CH11, f"at B ≥ 16, one query row, {vsb(32, 1, True)} the fastest PyTorch backend with 32 heads on 32"),
            (CH11, f"{vsb(8, 1, True)} with 32 on 8 and {vsb(1, 1, True)} with 32 on 1"),
            (CH11, f"with four rows {vs(32, 4)}, {vs(8, 4)} and {vs(1, 4)}"),
            (CH11, f"B = 1, one row: {vsb(32, 1, False)}, {vsb(8, 1, False)}, and {vsb(1, 1, False)} with 32 on 1"),
            (CH11, f"Against FlashInfer's fastest: {fi(32, 1)} with 32 on 32, {fi(8, 1)} with 32 on 8, {fi4} with "
                   f"four rows")]
    one_row = span([of_read(t, k, "fastest") for k in long_ if rows(k) <= 4], unit="")
    out += [("README.md", f"{one_row} of a plain read of the cache at N_k ≥ 32k with up to four query rows a "
                          f"key/value head"),
            ("README.md", f"decodes at {one_row} of that read's speed at N_k ≥ 32k"),
            ("README.md", f"32 heads on one: {span([of_read(t, k, 'fastest') for k in long_ if rows(k) >= 32], unit='')} "
                          f"of the read")]
    cudnn4 = [(int(r["batch"]), int(r["heads_kv"]), float(r["gbps"])) for r in read("decode_vs_pytorch.csv")
              if r["impl"] == "torch_cudnn" and r["len_q"] == "4" and int(r["len_kv"]) >= 32768 and r["gbps"]]
    out += [(CH11, f"cuDNN reads the cache at {max(g for _, _, g in cudnn4) / 1000:.1f} TB/s at best, and at "
                   f"{max(g for b, kv, g in cudnn4 if kv < 32 or b == 1) / 1000:.2f} TB/s or less with grouped heads")]
    short = mha(1024)
    out += [(CH11, f"the read itself takes {t[short]['stream_read'] * 1000:.1f} µs, `batched_v` "
                   f"{t[short]['batched_v'] * 1000:.1f} µs and `tensor_cores` {t[short]['tensor_cores'] * 1000:.1f} µs")]
    return out


def probe(name):
    return next(float(r["rate"]) for r in read("probes.csv") if r["probe"] == name)


def ncu_value(path, label):
    """A value of a Nsight Compute section line ("Duration  us  840.67"), in microseconds for a
    duration."""
    with open(os.path.join(ROOT, "plots", "results", "h200", "profiles", path), encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if line.strip().startswith(label) and len(parts) >= 3:
                unit, value = parts[-2], float(parts[-1])
                return value * {"ms": 1000.0, "us": 1.0, "ns": 1e-3}.get(unit, 1.0)
    raise ValueError(f"{path}: no {label}")


def ncu_stalls(path, k=2):
    """The k largest stall reasons, as 'wait 1.35, barrier 1.11' (cycles per issued instruction)."""
    stalls = []
    with open(os.path.join(ROOT, "plots", "results", "h200", "profiles", path), encoding="utf-8") as fh:
        for line in fh:
            m = re.search(r"issue_stalled_(\w+?)_per_issue_active\.ratio\s+\S+\s+([\d.]+)", line)
            if m and m.group(1) != "selected":
                stalls.append((float(m.group(2)), m.group(1)))
    return ", ".join(f"{name} {v:.2f}" for v, name in sorted(stalls, reverse=True)[:k])


NCU_STEPS = [("wgmma", 128), ("tma", 128), ("warp_specialized", 128), ("pingpong", 128), ("overlap", 128),
             ("persistent", 128), ("overlap", 64), ("wide", 64), ("wide_persistent", 64)]


def ch09_ncu_rows():
    """Nsight Compute on every step, B = 4, N = 4096, H = 2048/d, bf16, non-causal."""
    for variant, d in NCU_STEPS:
        path = f"profile_ch09_{variant}_d{d}.txt"
        us = ncu_value(path, "Duration")
        tflops = 4 * 4 * (2048 // d) * 4096 * 4096 * d / (us * 1e-6) / 1e12
        sm = ncu_value(path, "Compute (SM) Throughput")
        yield (f"| {variant} | {d} | {us:.0f} | {tflops:.0f} | {tflops / probe('wgmma_m64n128k16_bf16'):.0%} | "
               f"{sm:.0f}% | {ncu_stalls(path)} |")


# ---- tables whose cells come from a CSV, compared at the precision each cell is printed ---

def table(path, header):
    """The rows (lists of cells, ** and ` stripped) of the Markdown table under `header`."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = lines.index(header) + 2  # the header, then the |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip().replace("**", "").replace("`", "") for c in line.strip("|").split("|")])
    return rows


def printed_as(cell, value):
    """`value` written the way `cell` is (its decimals, its unit), e.g. 1.2345 -> "1.23×"."""
    core = cell.rstrip("×% GBs").strip()
    unit = cell[len(core):] if cell.startswith(core) else ""
    decimals = len(core.split(".")[1]) if "." in core else 0
    return f"{value:.{decimals}f}{unit}"


FIX = False  # --fix: write the CSVs' values into the tables instead of reporting them


def check_table(path, header, keys, row_of, columns):
    """Each row of the table: its key cells (N, d, causal as written) pick a CSV row with
    row_of(*keys); each value cell is compared, at its own precision, to its column's
    function of that row. Returns the mismatches (with --fix: rewrites them, returns none)."""
    bad, fixed = [], {}
    for cells in table(path, header):
        source = row_of(*cells[:keys])
        for i, fn in columns.items():
            if fn is None:
                continue
            want = printed_as(cells[i], fn(source))
            if want != cells[i]:
                bad.append(f"{path}: row {' | '.join(cells[:keys])}, column {i + 1}: "
                           f"the page says {cells[i]}, the CSV gives {want}")
                fixed.setdefault(tuple(cells[:keys]), []).append((i, cells[i], want))
    if FIX and fixed:
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        start = lines.index(header) + 2
        for j in range(start, len(lines)):
            if not lines[j].startswith("|"):
                break
            parts = lines[j].split("|")  # "", cell 1, ..., ""
            key = tuple(c.strip().replace("**", "").replace("`", "") for c in parts[1:1 + keys])
            for i, old, new in fixed.get(key, []):
                parts[i + 1] = parts[i + 1].replace(old, new, 1)
            lines[j] = "|".join(parts)
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines))
        return []
    return bad


def tour_row(chapter, variant):
    rows = {(r["chapter"], r["variant"], r["seq_len"], r["head_dim"], r["causal"]): r
            for r in read("tour.csv") if r["pass"] == "forward"}
    return lambda n, d, c: rows[(chapter, variant, n, d, "1" if c == "yes" else "0")]


def vs_row(impl, pass_="forward"):
    rows = {}
    for r in read("vs_pytorch.csv"):
        if r["dtype"] == "bf16" and r["pass"] == pass_:
            rows.setdefault((r["seq_len"], r["head_dim"], r["causal"]), {})[r["impl"]] = float(r["tflops"])
    return lambda n, d, c: dict(rows[(n, d, "1" if c == "yes" else "0")], ours=impl)


def f(col):
    return lambda r: float(r[col])


TOUR_COLUMNS = {3: f("ms"), 4: f("tflops"), 5: f("gbps"), 6: f("speedup_vs_ch01")}
VS_COLUMNS = {3: lambda x: x[x["ours"]], 4: lambda x: x["torch_flash"],
              5: lambda x: x[x["ours"]] / x["torch_flash"], 6: lambda x: x["torch_cudnn"],
              7: lambda x: x[x["ours"]] / x["torch_cudnn"]}


def ch04_row():
    """Chapter 04's `simple` and `fast` (tour.csv) beside PyTorch's float32 memory-efficient
    forward (anchors.csv)."""
    simple, fast = tour_row("04", "simple"), tour_row("04", "fast")
    mem = {(a["N"], a["d"], a["causal"] == "True"): float(a["fwd_tflops"]) for a in read("anchors.csv")
           if a["backend"] == "mem_efficient" and a["dtype"] == "float32"}
    return lambda n, d, c: {"simple": simple(n, d, c), "fast": fast(n, d, c), "torch": mem[(n, d, c == "yes")]}


CH04_COLUMNS = {3: lambda x: float(x["simple"]["ms"]), 4: lambda x: float(x["simple"]["tflops"]),
                5: lambda x: float(x["fast"]["ms"]), 6: lambda x: float(x["fast"]["tflops"]),
                7: lambda x: x["torch"], 8: lambda x: float(x["fast"]["tflops"]) / x["torch"],
                9: lambda x: float(x["fast"]["speedup_vs_ch01"])}


def ch05_table():
    """Chapter 05's steps: rows by variant, columns by shape (chapters.csv, backward ms); a
    variant chapters.csv does not have (flash_sync, an experiment's build) is not checked."""
    ms = {(r["variant"], r["seq_len"], r["head_dim"], r["causal"]): float(r["ms"])
          for r in read("chapters.csv") if r["chapter"] == "05" and r["pass"] == "backward"}
    shapes = [("4096", "64", "0"), ("16384", "64", "0"), ("16384", "128", "0"), ("16384", "128", "1")]
    bad = []
    path = "chapters/05_backward/README.md"
    for cells in table(path, "| variant | what changes | N = 4096, d = 64 | N = 16384, d = 64 | "
                             "N = 16384, d = 128 | same, causal |"):
        for i, shape in enumerate(shapes, 2):
            if (cells[0],) + shape in ms:
                want = printed_as(cells[i], ms[(cells[0],) + shape])
                if want != cells[i]:
                    bad.append(f"{path}: {cells[0]} at N, d, causal = {shape}: the page says "
                               f"{cells[i]}, chapters.csv gives {want}")
    return bad


def ch06_table():
    """Chapter 06 against PyTorch's three kernels (vs_pytorch.csv): "ms (TFLOP/s)" cells."""
    t = {}
    for r in read("vs_pytorch.csv"):
        if r["dtype"] == "bf16" and r["pass"] == "forward":
            t[(r["impl"], r["seq_len"], r["head_dim"], r["causal"])] = (float(r["ms"]), float(r["tflops"]))
    bad, fixes = [], []
    path = "chapters/06_tensor_cores/README.md"
    header = "| N | d | causal | ch06 ms (TFLOP/s) | predicted | PyTorch 3 kernels ms (TFLOP/s) | ratio |"
    for cells in table(path, header):
        key = (cells[0], cells[1], "1" if cells[2] == "yes" else "0")
        ours, torch = t[("ch06_warp_rows",) + key], t[("torch_naive",) + key]
        for i, (ms, tf) in ((3, ours), (5, torch)):
            ms_text, tf_text = cells[i].split(" (")
            want = f"{printed_as(ms_text, ms)} ({printed_as(tf_text.rstrip(')'), tf)})"
            if want != cells[i]:
                bad.append(f"{path}: row {' | '.join(cells[:3])}: the page says {cells[i]}, "
                           f"vs_pytorch.csv gives {want}")
                fixes.append((cells[:3], cells[i], want))
        want = printed_as(cells[6], torch[0] / ours[0])
        if want != cells[6]:
            bad.append(f"{path}: row {' | '.join(cells[:3])}: ratio {cells[6]}, vs_pytorch.csv gives {want}")
            fixes.append((cells[:3], cells[6], want))
    if FIX and fixes:
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            text = fh.read()
        for key, old, new in fixes:
            row = "| " + " | ".join(key) + " | "
            at = text.index(row, text.index(header))
            end = text.index("\n", at)
            text = text[:at] + text[at:end].replace(old, new, 1) + text[end:]
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as fh:
            fh.write(text)
        return []
    return bad


def reading_times():
    """The instructors' page's reading times: each README's words (as `wc -w` counts them)
    and the minutes at 100 words a minute."""
    path = "docs/instructors.md"
    header = "| chapter | README words | read (estimate) | exercises (estimate) |"
    bad, fixes = [], []
    for cells in table(path, header):
        name = cells[0]
        readme = "README.md" if name.startswith("main page") else \
            next(os.path.join("chapters", d, "README.md") for d in sorted(os.listdir(os.path.join(ROOT, "chapters")))
                 if d[:2] == name[:2])
        with open(os.path.join(ROOT, readme), encoding="utf-8") as fh:
            words = len(fh.read().split())
        want_words, want_min = f"{words:,}", f"{round(words / 100)} min"
        if cells[1] != want_words:
            bad.append(f"{path}: {name}: {cells[1]} words, {readme} has {want_words}")
            fixes.append((cells[1], want_words))
        got_min = cells[2].split(",")[0]
        if got_min != want_min:
            bad.append(f"{path}: {name}: {got_min}, {want_words} words at 100 a minute is {want_min}")
            fixes.append((got_min, want_min))
        if FIX and fixes:
            with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
                text = fh.read()
            lines = text.split("\n")
            for j in range(lines.index(header) + 2, len(lines)):
                if lines[j].split("|")[1].strip().replace("`", "") == name:
                    for old, new in fixes:
                        lines[j] = lines[j].replace(f"| {old} |", f"| {new} |", 1).replace(f"| {old},", f"| {new},", 1)
                    break
            text = "\n".join(lines)
            with open(os.path.join(ROOT, path), "w", encoding="utf-8") as fh:
                fh.write(text)
            fixes = []
    return [] if FIX else bad


def tables():
    """Mismatches of every table checked this way."""
    ch01 = dict(TOUR_COLUMNS)
    ch01[6] = None  # "extra memory": the grid, B·H·N²·4 bytes, in GB as the harness prints it
    return reading_times() + ch05_table() + ch06_table() + (check_table("chapters/01_naive/README.md", "| N | d | causal | ms | TFLOP/s | GB/s | extra memory |",
                        3, tour_row("01", "naive"), ch01) +
            check_table("chapters/02_tiled/README.md", "| N | d | causal | ms | TFLOP/s | GB/s | × chapter 01 |",
                        3, tour_row("02", "tiled"), TOUR_COLUMNS) +
            check_table("chapters/03_online_softmax/README.md",
                        "| N | d | causal | ms | TFLOP/s | GB/s | × chapter 01 |", 3, tour_row("03", "online"),
                        TOUR_COLUMNS) +
            check_table("chapters/04_fused_forward/README.md",
                        "| N | d | causal | `simple` ms | TFLOP/s | `fast` ms | TFLOP/s | PyTorch TFLOP/s | "
                        "`fast` ÷ PyTorch | `fast` ÷ ch. 01 |", 3, ch04_row(), CH04_COLUMNS) +
            check_table("chapters/07_tensor_core_forward/README.md",
                        "| N | d | causal | ch07 fastest | FlashAttention-2 | ratio | cuDNN | ratio |", 3,
                        vs_row("ch07_fastest"), VS_COLUMNS) +
            check_table("chapters/08_tensor_core_backward/README.md",
                        "| N | d | causal | ch08 fastest | FlashAttention-2 | ratio | cuDNN | ratio |", 3,
                        vs_row("ch08_fastest", "backward"), VS_COLUMNS))


LONG = ("4096", "16384")  # the shapes "N ≥ 4096" means


def vs_ratio(impl, pass_, sizes, num, den, digits):
    """The range of num/den (impl names, or "ours") over d, causal and `sizes` (vs_pytorch.csv)."""
    row = vs_row(impl, pass_)
    vals = []
    for n in sizes:
        for d in ("64", "128"):
            for c in ("no", "yes"):
                x = row(n, d, c)
                pick = lambda name: x[x["ours"]] if name == "ours" else x[name]
                vals.append(pick(num) / pick(den))
    return span(vals, digits)


def claims():
    """(page, text it must contain) pairs, the text computed from the CSVs."""
    ch09 = "chapters/09_hopper_forward/README.md"
    t = ch09_table()
    x = t[(128, 0, 16384)]
    long_ = [k for k in SHAPES if k[2] >= 4096]
    short = [k for k in SHAPES if k[2] == 1024]
    over = lambda num, den, keys: span([t[k][num] / t[k][den] for k in keys])
    step6_short = over("ch09_persistent", "ch09_overlap", short)
    step6_long = over("ch09_persistent", "ch09_overlap", long_)
    step7 = over("ch09_wide_persistent", "ch09_persistent", [k for k in long_ if k[0] == 64])
    fast_cudnn = ch09_ratio("ch09_fastest", "torch_cudnn", (4096, 16384))
    fast_fa2 = ch09_ratio("ch09_fastest", "torch_flash", (4096, 16384))
    fast_short = ch09_ratio("ch09_fastest", "torch_cudnn", (1024,))
    case09 = "chapters/09_hopper_forward/case_study.md"
    out = [(ch09, row) for row in ch09_rows()]
    out += [(case09, row) for row in list(ch09_extra_rows()) + list(ch09_ncu_rows()) + list(ch09_schedule_rows())]
    # The stages (ch09_stages.csv: steps 3-5, three stages over two, d = 128, N >= 4096, each
    # run's pair) and the round-robin hand-out under the mask (ch09_schedules.csv).
    stages = {}
    for r in read("ch09_stages.csv"):
        if r["dtype"] == "bf16" and r["head_dim"] == "128" and r["seq_len"] != "1024":
            stages.setdefault((r["run"], r["impl"], r["seq_len"], r["causal"]), {})[r["stages"]] = float(r["tflops"])
    gain = [x["3"] / x["2"] - 1 for x in stages.values() if "2" in x and "3" in x]  # run 2 rebuilt step 3 only
    sched = {(r["schedule"], r["impl"]): float(r["tflops"]) for r in read("ch09_schedules.csv")
             if r["dtype"] == "bf16" and r["seq_len"] == "16384" and r["head_dim"] == "128" and r["causal"] == "1"}
    out += [
        (ch09, f"with three, {round(min(gain) * 100)}–{round(max(gain) * 100)}% faster at N ≥ 4096 (`ch09_stages.csv`"),
        (ch09, f"{sched[('round_robin', 'ch09_persistent')] / sched[('round_robin', 'torch_cudnn')]:.2f}× cuDNN at "
               f"d = 128, N = 16384, causal, where step 5 ran at "
               f"{sched[('round_robin', 'ch09_overlap')] / sched[('round_robin', 'torch_cudnn')]:.2f}×"),
        (ch09, f"Step 2 gained more than expected ({over('ch09_tma', 'ch09_wgmma', SHAPES)} step 1)"),
        (ch09, f"Step 6 gained where predicted, {step6_short} step 5 at N = 1024, and moved {step6_long} at N ≥ 4096"),
        (ch09, f"Step 7 gained {step7} over step 6 at d = 64, N ≥ 4096"),
        (ch09, f"`fastest` runs at {fast_cudnn} cuDNN in bf16 "
               f"({ch09_ratio('ch09_fastest', 'torch_cudnn', (4096, 16384), dtype='fp16')} in fp16) and {fast_fa2} "
               f"FlashAttention-2"),
        (ch09, f"At N = 1024 `fastest` is {fast_short} cuDNN"),
        (ch09, f"reaches {x['torch_cudnn']:.0f} at d = 128 (`ch09_vs_pytorch.csv`)"),
        (ch09, f"and chapter 07 reaches {x['ch07_fastest']:.0f}."),
        ("README.md", f"from chapter 07's {x['ch07_fastest']:.0f} to {x['ch09_fastest']:.0f} TFLOP/s at N = 16384, d = 128"),
        ("README.md", f"`wgmma` ({x['ch09_wgmma']:.0f}), the copy engine on mbarriers ({x['ch09_tma']:.0f}), a producer "
                      f"warpgroup with two consumers and three stages ({x['ch09_warp_specialized']:.0f})"),
        ("README.md", f"three consumers at d = 64; {fast_cudnn} cuDNN at N ≥ 4096 |"),
        ("README.md", f"walks query tiles in pairs ({step6_short} at N = 1024), and at d = 64 a third consumer "
                      f"({step7} at N ≥ 4096). At N ≥ 4096 it runs {fast_cudnn} PyTorch's cuDNN backend and "
                      f"{fast_fa2} its FlashAttention-2 backend; at N = 1024, {fast_short} cuDNN"),
    ]
    hf = "docs/use_in_your_model.md"
    out += [(hf, row) for row in hf_rows()]
    d128 = [x for x in hf_step().values() if x["tutorial"]["head_dim"] == "128"]
    behind = [float(x["tutorial"]["ms"]) / float(x["torch_cudnn"]["ms"]) - 1 for x in d128]
    out.append((hf, f"{round(min(behind) * 100)}–{round(max(behind) * 100)}% behind cuDNN's"))
    gpt2 = hf_step()["gpt2"]
    out.append((hf, "the tutorial's ten steps spread over "
                    f"{float(gpt2['tutorial']['ms_min']):.1f}–{float(gpt2['tutorial']['ms_max']):.1f} ms, "
                    f"FlashAttention-2's over {float(gpt2['torch_flash']['ms_min']):.1f}–"
                    f"{float(gpt2['torch_flash']['ms_max']):.1f} ms"))
    # The tensor-core chapters at N = 16384, d = 128, non-causal (vs_pytorch.csv), as the main
    # page and README.md quote them.
    v = vs_row("ch06_warp_rows")("16384", "128", "no")
    ch07 = vs_row("ch07_fastest")("16384", "128", "no")["ch07_fastest"]
    out += [
        ("docs/mainpage.md", f"runs {v['ch06_warp_rows']:.1f} TFLOP/s (PyTorch's three kernels "
                             f"{v['torch_naive']:.1f}: {v['ch06_warp_rows'] / v['torch_naive']:.2f}×) and "
                             f"chapter 07's fused kernel {ch07:.1f}, against FlashAttention-2's "
                             f"{v['torch_flash']:.1f} ({ch07 / v['torch_flash']:.2f}×) and cuDNN's "
                             f"{v['torch_cudnn']:.1f}."),
        ("README.md", f"({v['ch06_warp_rows']:.0f} TFLOP/s at d = 128 with `warp_rows`"),
    ]
    # Chapters 07 and 08 against PyTorch's FlashAttention-2 and cuDNN (vs_pytorch.csv).
    x = vs_row("ch08_fastest", "backward")("16384", "64", "no")
    worst_ch08 = x["ch08_fastest"] / x["torch_flash"]  # the one shape below 1.0
    out += [
        ("chapters/07_tensor_core_forward/README.md",
         f"{vs_ratio('ch07_fastest', 'forward', LONG, 'ours', 'torch_flash', 3)} at N ≥ 4096"),
        ("chapters/07_tensor_core_forward/README.md",
         f"{vs_ratio('ch07_fastest', 'forward', ('1024',), 'ours', 'torch_flash', 3)} at N = 1024"),
        ("chapters/07_tensor_core_forward/README.md",
         f"is {vs_ratio('ch07_fastest', 'forward', LONG, 'torch_cudnn', 'ours', 2)} faster than ours at N ≥ 4096 "
         f"({vs_ratio('ch07_fastest', 'forward', ('1024',), 'torch_cudnn', 'ours', 2)} at N = 1024)"),
        ("chapters/08_tensor_core_backward/README.md",
         f"is {vs_ratio('ch08_fastest', 'backward', LONG, 'ours', 'torch_flash', 2)} FlashAttention-2's backward at N ≥ 4096"),
        ("chapters/08_tensor_core_backward/README.md",
         f"at N = 1024 it is {vs_ratio('ch08_fastest', 'backward', ('1024',), 'ours', 'torch_flash', 2)}."),
        ("chapters/08_tensor_core_backward/README.md",
         f"cuDNN's backward is {vs_ratio('ch08_fastest', 'backward', LONG, 'torch_cudnn', 'ours', 1)} as fast as ours"),
        ("chapters/07_tensor_core_forward/README.md",
         f"the same run's {vs_ratio('ch07_fastest', 'forward', LONG, 'ours', 'torch_flash', 3)}"),
        ("chapters/09_hopper_forward/README.md",
         f"FlashAttention-2 backend reaches ({vs_ratio('ch07_fastest', 'forward', LONG, 'ours', 'torch_flash', 3)} "
         f"at N ≥ 4096, bf16, `vs_pytorch.csv`). PyTorch's cuDNN backend, in the same run, computes the same "
         f"attention {vs_ratio('ch07_fastest', 'forward', LONG, 'torch_cudnn', 'ours', 1)} faster"),
        ("README.md", f"and {vs_ratio('ch08_fastest', 'backward', LONG, 'ours', 'torch_flash', 2)} PyTorch's "
                      f"FlashAttention-2 backward at N ≥ 4096"),
        ("README.md", f"{worst_ch08:.3f}× at d = 64, N = 16384, non-causal; "
                      f"{vs_ratio('ch08_fastest', 'backward', ('1024',), 'ours', 'torch_flash', 2)} at N = 1024)"),
        ("docs/mainpage.md", f"it is {vs_ratio('ch08_fastest', 'backward', LONG, 'ours', 'torch_flash', 2)} "
                             f"FlashAttention-2's backward at N ≥ 4096"),
        ("docs/mainpage.md", f"{worst_ch08:.3f}× at d = 64, N = 16384, non-causal; "
                             f"{vs_ratio('ch08_fastest', 'backward', ('1024',), 'ours', 'torch_flash', 2)} at N = 1024) "
                             f"and {vs_ratio('ch08_fastest', 'backward', LONG, 'ours', 'torch_cudnn', 2)} cuDNN's at N ≥ 4096."),
        ("README.md", f"{vs_ratio('ch07_fastest', 'forward', ('16384',), 'ours', 'torch_flash', 2)} "
                      f"FlashAttention-2 at N = 16384 in the same run (the tensor-core table above; "
                      f"{vs_ratio('ch07_fastest', 'forward', LONG, 'ours', 'torch_flash', 3)} on the shapes "
                      f"with N ≥ 4096"),
    ]
    out += ch06_precision_claims() + ch10_claims() + ch11_claims() + ch11_merge_claims() + ch11_merge_block_claims() + ch11_wgmma_claims() + ch11_hybrid_claims() + ch11_short_cache_claims() + ch11_cluster_claims() + ch11_wgmma_split_claims() + ch10_reverse_claims() + ch10_cudnn_kernel_claims() + ch10_wide_claims() + ch10_meeting_claims() + ch10_tile_dq_claims() + ch10_tile_dq_vs_pytorch_claims() + ch10_dk_last_claims() + ch10_dq_turns_claims() + ch10_fastest_h100_claims() + ch10_fastest_h200_claims() + ch08_over_ch05_claims() + ch10_turns_profile_claims() + ch11_b1_rows128_claims() + ch10_wide_vs_pytorch_claims() + ch11_rows_claims() + ch11_row_tile_claims() + ch11_short_split_claims() + ch11_grid_merge_claims() + ch11_graph_claims() + ch11_slice_claims() + ch11_empty_split_claims() + ch11_flashinfer_h100_claims() + ch11_table_claims() + ch11_length_first_claims() + ch11_row32_claims() + ch11_grid_row32_claims() + ch11_third_stage_claims() + ch11_graph_row32_claims() + ch10_stall_claims() + ch10_lean_claims() + ch10_walk_claims() + ch10_step9_claims() + ch12_claims() + hf_gqa_claims() + ch11_repeat_claims() + ch11_switch_claims()
    fp16, bf16 = ch09_table("fp16"), ch09_table("bf16")
    worst = max(abs(fp16[k][i] / bf16[k][i] - 1) for k in bf16 for i in STEPS if i in bf16[k])
    out.append((ch09, f"fp16, in the same run, lands within {int(worst * 100) + 1}% of these"))
    return out


def main():
    global FIX
    FIX = "--fix" in sys.argv[1:]
    mismatches = tables()
    for m in mismatches:
        print("FAIL " + m)
    failed = len(mismatches)
    pages = {}
    for path, text in claims():
        body = pages.setdefault(path, page(path))
        if " ".join(text.split()) in body:
            continue
        print(f"FAIL {path}: the CSVs give \"{text}\", which the page does not say")
        failed += 1
    print(f"{len(claims())} quotes and 9 tables checked: {failed} mismatches")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
