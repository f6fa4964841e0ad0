"""CPU tests of the plot scripts (run by ctest; `python3 -m unittest test_plots` here works too).

Fixtures (made-up numbers, not measurements) live in fixtures/:
  results/    a complete results folder without vs_pytorch.csv: tour.csv, traffic.csv,
              ceilings.csv, anchors.csv (float32 rows and the older bf16 ones),
              tc_variants.csv (chapters 06, 07 forward, chapter 08 backward),
              ch07_anchors.csv, probes.csv
  with_vs_pytorch/  vs_pytorch.csv alone, laid over a copy of results/ (the case where the
              comparison script's run is there; torch_naive has no d=128 row in it, and
              torch_cudnn no d=128 backward row)
  malformed/  the same with a non-numeric time in tour.csv line 4
  anchors/    output of the PyTorch anchor script, for ceilings_from_anchors.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTS = os.path.dirname(HERE)
FIXTURES = os.path.join(HERE, "fixtures")
FIGURES = ("staircase.png", "bytes_vs_n.png", "roofline.png", "memory_vs_n.png")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Every CSV of the fixture results folder (vs_pytorch.csv is in with_vs_pytorch/).
RESULT_FILES = ("tour.csv", "traffic.csv", "ceilings.csv", "tc_variants.csv", "probes.csv",
                "ch07_anchors.csv")

import ceilings_from_anchors


def run(script, *args):
    """(exit code, stdout, stderr) of one of plots/*.py."""
    p = subprocess.run([sys.executable, os.path.join(PLOTS, script), *args],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def assert_figures(test, folder):
    for name in FIGURES:
        path = os.path.join(folder, name)
        test.assertTrue(os.path.isfile(path), f"{name} was not written")
        with open(path, "rb") as fh:
            head = fh.read(8)
        test.assertEqual(head, PNG_SIGNATURE, f"{name} is not a PNG")
        test.assertGreater(os.path.getsize(path), 10_000, f"{name} looks empty")


class Figures(unittest.TestCase):
    def test_fixture_results_give_every_figure(self):
        with tempfile.TemporaryDirectory() as out:
            code, stdout, stderr = run("make_plots.py", os.path.join(FIXTURES, "results"), out)
            self.assertEqual(code, 0, stderr)
            assert_figures(self, out)

    def test_header_only_csvs_still_give_every_figure(self):
        # No data yet (e.g. before the GPU run): figures are drawn with a note, exit 0.
        with tempfile.TemporaryDirectory() as tmp:
            res, out = os.path.join(tmp, "res"), os.path.join(tmp, "out")
            os.makedirs(res)
            for name in RESULT_FILES:
                with open(os.path.join(FIXTURES, "results", name)) as src, \
                        open(os.path.join(res, name), "w") as dst:
                    dst.write(src.readline())
            code, stdout, stderr = run("make_plots.py", res, out)
            self.assertEqual(code, 0, stderr)
            assert_figures(self, out)
            # Each panel says it has nothing (a note is drawn in it), none is silently empty.
            self.assertIn("staircase bf16 (tc_variants.csv): no bars", stdout)
            self.assertIn("staircase backward bf16 (tc_variants.csv, tour.csv): no bars", stdout)
            self.assertIn("bf16: no points (tc_variants.csv); bf16 backward: no points "
                          "(tc_variants.csv); mma.sync roof: none", stdout)
            self.assertIn("memory_vs_n float32: no rows (tour.csv); no chapter 08 bf16 "
                          "backward rows in tc_variants.csv", stdout)


def fixture_copy(tmp, with_vs_pytorch=False, drop=()):
    """A copy of fixtures/results in tmp/res, with vs_pytorch.csv laid over it or not and the
    files in `drop` removed; returns its path."""
    res = os.path.join(tmp, "res")
    shutil.copytree(os.path.join(FIXTURES, "results"), res)
    if with_vs_pytorch:
        shutil.copy(os.path.join(FIXTURES, "with_vs_pytorch", "vs_pytorch.csv"), res)
    for name in drop:
        os.remove(os.path.join(res, name))
    return res


SUMMARY_KEYS = ("staircase float32", "staircase bf16", "staircase backward", "roofline",
                "memory_vs_n")


def summary(test, results):
    """make_plots.py's summary lines of a results folder ({'staircase float32': ...,
    'staircase bf16': ..., 'staircase backward': ..., 'roofline': ..., 'memory_vs_n': ...}),
    after checking it wrote every figure."""
    with tempfile.TemporaryDirectory() as out:
        code, stdout, stderr = run("make_plots.py", results, out)
        test.assertEqual(code, 0, stderr)
        assert_figures(test, out)
    lines = {}
    for line in stdout.splitlines():
        for key in SUMMARY_KEYS:
            if line.startswith(key + " "):
                lines[key] = line
    test.assertEqual(set(lines), set(SUMMARY_KEYS), stdout)
    return lines


class TensorCorePanels(unittest.TestCase):
    """The staircase's bf16 rows (forward, backward), the roofline's tensor-core points and
    chapter 08 on the memory figure, from the committed results and from the fixtures with
    and without vs_pytorch.csv."""

    def test_committed_results(self):
        results = os.path.join(PLOTS, "results", "h200")
        if not os.path.isfile(os.path.join(results, "tc_variants.csv")):
            self.skipTest("no committed tc_variants.csv yet")
        lines = summary(self, results)
        bf16 = lines["staircase bf16"]
        # Chapters 06-07's eight staircase variants (tc_variants.csv), then chapter 09's
        # fastest (tour.csv).
        self.assertIn("d=64: 9 bars;", bf16)
        self.assertIn("d=128: 9 bars;", bf16)
        # PyTorch's three lines in each panel, from the same run when there is one.
        source = ("vs_pytorch.csv" if os.path.isfile(os.path.join(results, "vs_pytorch.csv"))
                  else "ch07_anchors.csv")
        self.assertEqual(bf16.count("FlashAttention-2 "), 2, bf16)
        self.assertEqual(bf16.count("cuDNN "), 2, bf16)
        self.assertEqual(bf16.count("three kernels "), 2, bf16)
        self.assertIn(f"({source})", bf16)
        # The backward row: chapter 08's eleven variants (plain, wide_kv, async, dq_pass,
        # warp_tiles, hoisted, spread_atomics, pipelined_dk, late_copy, dq_pointer, split_tail) after chapter
        # 05's float32 flash, and PyTorch's two flash backwards in each panel.
        bwd = lines["staircase backward"]
        self.assertIn("d=64: 11 bars + 05 flash;", bwd)
        self.assertIn("d=128: 11 bars + 05 flash;", bwd)
        self.assertEqual(bwd.count("FlashAttention-2 "), 2, bwd)
        self.assertEqual(bwd.count("cuDNN "), 2, bwd)
        self.assertNotIn("three kernels", bwd)
        self.assertIn(f"({source})", bwd)
        roof = lines["roofline"]
        # The roof is the committed probe's rate, as probes.csv writes it.
        with open(os.path.join(results, "probes.csv")) as f:
            mma = next(line.split(",")[2] for line in f if line.startswith("mma_sync_m16n8k16_bf16,"))
        self.assertIn(f"mma.sync roof: {mma} TFLOP/s (probes.csv)", roof)
        for point in ("06 grid_f32 d=64", "06 grid_half d=64", "06 grid_f32 d=128",
                      "06 grid_half d=128"):
            self.assertIn(point, roof)
        self.assertEqual(roof.count("07 "), 2, roof)  # chapter 07's fastest at each d
        self.assertIn("08 fastest d=64 at ", roof)
        self.assertIn("08 fastest d=128 at ", roof)
        memory = lines["memory_vs_n"]
        self.assertIn("08 plain, wide_kv, async, warp_tiles, hoisted, spread_atomics, pipelined_dk, late_copy, "
                      "dq_pointer: 136 MB at N=1024, 136 MB at N=4096, 136 MB at N=16384 (tc_variants.csv)", memory)
        self.assertIn("08 split_tail: 147 MB at N=1024, 147 MB at N=4096, 147 MB at N=16384 "
                      "(tc_variants.csv)", memory)
        self.assertIn("08 dq_pass: 2.1 MB at N=1024, 2.1 MB at N=4096, 2.1 MB at N=16384 "
                      "(tc_variants.csv)", memory)

    def test_fixture_without_vs_pytorch(self):
        # 8 bars a panel: every staircase variant of chapters 06 and 07, and not the sweep
        # shape (async_64x128_w4) or the causal, N=4096 and fp16 rows the fixture also has.
        lines = summary(self, os.path.join(FIXTURES, "results"))
        self.assertEqual(
            lines["staircase bf16"],
            "staircase bf16 (tc_variants.csv): d=64: 8 bars; PyTorch three kernels 34 ms "
            "(anchors.csv), FlashAttention-2 7.5 ms (ch07_anchors.csv), cuDNN 5.5 ms "
            "(ch07_anchors.csv); d=128: 8 bars; PyTorch three kernels 17 ms (anchors.csv), "
            "FlashAttention-2 6.6 ms (ch07_anchors.csv), cuDNN 3.9 ms (ch07_anchors.csv)")
        roof = lines["roofline"]
        # Chapter 07's fastest staircase variant, not the faster sweep shape.
        self.assertIn("07 tuned d=64 at 8.13e+03 FLOP/B, 314.1 TFLOP/s", roof)
        self.assertIn("07 lazy_rescale d=128 at 8.16e+03 FLOP/B, 366.5 TFLOP/s", roof)
        self.assertNotIn("async_64x128_w4", roof)
        self.assertIn("06 grid_f32 d=64 at 21.3 FLOP/B, 73.3 TFLOP/s", roof)
        self.assertIn("06 grid_half d=128 at 63.5 FLOP/B, 146.6 TFLOP/s", roof)
        self.assertIn("mma.sync roof: 600 TFLOP/s (probes.csv)", roof)
        # Chapter 08: its `fastest` row at d=64; at d=128 (no such row) its quickest staircase
        # variant, not the faster tile-shape variant async_bc64; no causal, fp16, N=4096 rows.
        self.assertIn("bf16 backward: 08 fastest d=64 at 4.79e+03 FLOP/B, 219.9 TFLOP/s; "
                      "08 async d=128 at 4.81e+03 FLOP/B, 239.0 TFLOP/s (tc_variants.csv)", roof)
        self.assertNotIn("async_bc64", roof)
        # The backward row: chapter 05's flash as the baseline where tour.csv has it (d=64
        # only in the fixture), PyTorch's from ch07_anchors.csv (bwd_ms).
        self.assertEqual(
            lines["staircase backward"],
            "staircase backward bf16 (tc_variants.csv, tour.csv): d=64: 4 bars + 05 flash; "
            "PyTorch FlashAttention-2 19.5 ms (ch07_anchors.csv), cuDNN 13 ms "
            "(ch07_anchors.csv); d=128: 4 bars; PyTorch FlashAttention-2 18 ms "
            "(ch07_anchors.csv), cuDNN 11 ms (ch07_anchors.csv)")
        # Memory: measured where tc_variants.csv has the row (async also at N=4096), chapter
        # 08's formula at the other N of the tour.
        self.assertEqual(
            lines["memory_vs_n"],
            "memory_vs_n float32: 5 variants (tour.csv); 08 plain, wide_kv: 136 MB at N=16384 "
            "(tc_variants.csv), the formula at N=1024, 4096; 08 async: 136 MB at N=4096, "
            "136 MB at N=16384 (tc_variants.csv), the formula at N=1024; 08 dq_pass: 2.1 MB "
            "at N=16384 (tc_variants.csv), the formula at N=1024, 4096")
        # The float32 row is untouched by the tensor-core files.
        self.assertEqual(lines["staircase float32"],
                         "staircase float32 (tour.csv): N=4096: 5 bars; N=16384: 5 bars")

    def check_vs_pytorch(self, lines, cudnn_backward_d128=""):
        """Both tensor-core rows' summaries with vs_pytorch.csv laid over the fixtures;
        cudnn_backward_d128: what the backward's d=128 panel adds for cuDNN, which
        vs_pytorch.csv has no row for."""
        # Same-run numbers where vs_pytorch.csv has them; torch_naive at d=128 is not in
        # it, so that one line comes from anchors.csv. Causal and fp16 rows are not taken.
        self.assertEqual(
            lines["staircase bf16"],
            "staircase bf16 (tc_variants.csv): d=64: 8 bars; PyTorch three kernels 31 ms "
            "(vs_pytorch.csv), FlashAttention-2 7.1 ms (vs_pytorch.csv), cuDNN 5.1 ms "
            "(vs_pytorch.csv); d=128: 8 bars; PyTorch three kernels 17 ms (anchors.csv), "
            "FlashAttention-2 6.2 ms (vs_pytorch.csv), cuDNN 3.6 ms (vs_pytorch.csv)")
        # The backward's: vs_pytorch.csv's backward rows (not the causal one, not ours).
        self.assertEqual(
            lines["staircase backward"],
            "staircase backward bf16 (tc_variants.csv, tour.csv): d=64: 4 bars + 05 flash; "
            "PyTorch FlashAttention-2 19 ms (vs_pytorch.csv), cuDNN 12 ms (vs_pytorch.csv); "
            "d=128: 4 bars; PyTorch FlashAttention-2 17.5 ms (vs_pytorch.csv)"
            + cudnn_backward_d128)

    def test_fixture_with_vs_pytorch(self):
        with tempfile.TemporaryDirectory() as tmp:
            # ch07_anchors.csv is not needed once vs_pytorch.csv is there; without it no
            # file gives cuDNN's backward at d=128.
            res = fixture_copy(tmp, with_vs_pytorch=True, drop=("ch07_anchors.csv",))
            self.check_vs_pytorch(summary(self, res))

    def test_vs_pytorch_preferred_over_ch07_anchors(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = fixture_copy(tmp, with_vs_pytorch=True)
            # Backend by backend: cuDNN at d=128 falls back to ch07_anchors.csv's bwd_ms.
            self.check_vs_pytorch(summary(self, res), ", cuDNN 11 ms (ch07_anchors.csv)")

    def test_no_pytorch_row_is_said(self):
        # Without anchors.csv the three-kernel line has no source: the panel says so.
        with tempfile.TemporaryDirectory() as tmp:
            res = fixture_copy(tmp, drop=("anchors.csv",))
            bf16 = summary(self, res)["staircase bf16"]
            self.assertNotIn("three kernels", bf16)
            self.assertIn("FlashAttention-2 7.5 ms (ch07_anchors.csv)", bf16)

    def test_selection_in_process(self):
        import make_plots
        import results_csv
        res = os.path.join(FIXTURES, "results")
        tc = results_csv.read(os.path.join(res, "tc_variants.csv"))
        vs = results_csv.read(os.path.join(FIXTURES, "with_vs_pytorch", "vs_pytorch.csv"))
        anchors = results_csv.read(os.path.join(res, "anchors.csv"))
        got = make_plots.tc_pytorch_ms([("vs_pytorch.csv", vs), ("anchors.csv", anchors)],
                                       16384, 128, (1, 16))
        self.assertEqual({k: (v[0], v[2]) for k, v in got.items()},
                         {"three kernels": (17.0, "anchors.csv"),
                          "FlashAttention-2": (6.2, "vs_pytorch.csv"),
                          "cuDNN": (3.6, "vs_pytorch.csv")})
        # A shape nobody measured: no line at all, rather than another shape's.
        self.assertEqual(make_plots.tc_pytorch_ms([("vs_pytorch.csv", vs)], 16384, 64, (2, 32)), {})
        points = make_plots.tc_roofline_points(tc)
        self.assertEqual([(r["chapter"], r["variant"], r["head_dim"]) for r, _, _ in points],
                         [("06", "grid_f32", 64), ("06", "grid_half", 64), ("07", "tuned", 64),
                          ("06", "grid_f32", 128), ("06", "grid_half", 128),
                          ("07", "lazy_rescale", 128)])
        r, x, y = points[2]
        self.assertAlmostEqual(x, 4 * 32 * 16384 ** 2 * 64 / 270532608, delta=1)
        self.assertAlmostEqual(y, 314.1, delta=0.1)
        # The backward: PyTorch's bwd_ms from the anchors' files, vs_pytorch.csv's backward
        # rows first; no three-kernel line is asked for.
        ch07 = results_csv.read(os.path.join(res, "ch07_anchors.csv"))
        got = make_plots.tc_pytorch_ms([("vs_pytorch.csv", vs), ("ch07_anchors.csv", ch07)],
                                       16384, 128, (1, 16), "backward", make_plots.BWD_ANCHORS)
        self.assertEqual({k: (v[0], v[2]) for k, v in got.items()},
                         {"FlashAttention-2": (17.5, "vs_pytorch.csv"),
                          "cuDNN": (11.0, "ch07_anchors.csv")})
        bwd = make_plots.tc_backward_points(tc)
        self.assertEqual([(r["variant"], r["head_dim"]) for r, _, _ in bwd],
                         [("fastest", 64), ("async", 128)])
        r, x, y = bwd[0]  # FLOPs: 2.5 × the forward's 4·B·H·N²·d
        self.assertAlmostEqual(x, 2.5 * 4 * 32 * 16384 ** 2 * 64 / 1147142144, delta=1)
        self.assertAlmostEqual(y, 219.9, delta=0.1)
        # Chapter 08's workspace, as tensor_core_backward.cu counts it: the float32 dQ
        # accumulator and D, or D alone (dq_pass); the committed rows agree.
        self.assertEqual(make_plots.ch08_workspace_bytes("async", 1, 32, 16384, 64),
                         136314880)
        self.assertEqual(make_plots.ch08_workspace_bytes("dq_pass", 1, 32, 16384, 64), 2097152)
        self.assertEqual(make_plots.ch08_workspace_bytes("plain", 1, 16, 16384, 128), 135266304)
        # split_tail: room for 160 cut tiles' slots (2·128·d floats each), non-causal only;
        # none with one query tile a key tile (N = 17 at d = 64: nothing to cut).
        self.assertEqual(make_plots.ch08_workspace_bytes("split_tail", 1, 32, 16384, 64), 146800640)
        self.assertEqual(make_plots.ch08_workspace_bytes("split_tail", 1, 16, 16384, 128), 156237824)
        self.assertEqual(make_plots.ch08_workspace_bytes("split_tail", 1, 32, 16384, 64, True), 136314880)
        self.assertEqual(make_plots.ch08_workspace_bytes("split_tail", 2, 1, 17, 64), 2 * 17 * 65 * 4 + 2 * 4)
        series = make_plots.ch08_memory_series(tc, {1024: (16, 32), 16384: (1, 32)})
        self.assertEqual(series["dq_pass"], {1024: (2097152, False), 16384: (2097152, True)})
        self.assertEqual(sorted(series), ["async", "dq_pass", "plain", "wide_kv"])
        committed = os.path.join(PLOTS, "results", "h200", "tc_variants.csv")
        if os.path.isfile(committed):
            for r in results_csv.read(committed):
                if r["chapter"] == "08" and r["dtype"] == "bf16" and r["extra_mem_bytes"]:
                    self.assertEqual(r["extra_mem_bytes"], make_plots.ch08_workspace_bytes(
                        r["variant"], r["batch"], r["heads"], r["seq_len"], r["head_dim"], r["causal"]),
                        f"tc_variants.csv line {r['_line']}")


class MalformedCsv(unittest.TestCase):
    """Each broken input must stop the script with exit 1 and one line naming file:line."""

    def expect_failure(self, results, pattern):
        with tempfile.TemporaryDirectory() as out:
            code, _, stderr = run("make_plots.py", results, out)
        self.assertEqual(code, 1, f"expected exit 1, got {code}: {stderr}")
        lines = stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected one line, got: {stderr}")
        self.assertRegex(lines[0], r"^make_plots: error: " + pattern)
        self.assertNotIn("Traceback", stderr)

    def broken_copy(self, tmp, name, edit):
        """A copy of the fixture results with `edit(lines) -> lines` applied to `name`."""
        res = os.path.join(tmp, "res")
        shutil.copytree(os.path.join(FIXTURES, "results"), res)
        path = os.path.join(res, name)
        with open(path) as fh:
            lines = fh.read().splitlines()
        if edit is None:
            os.remove(path)
        else:
            with open(path, "w") as fh:
                fh.write("\n".join(edit(lines)) + "\n")
        return res

    def test_committed_malformed_fixture(self):
        self.expect_failure(os.path.join(FIXTURES, "malformed"),
                            r".*malformed/tour\.csv:4: column 'ms' is 'fast', not a number$")

    def test_missing_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "traffic.csv", None)
            self.expect_failure(res, r".*traffic\.csv: file not found")

    def test_missing_column(self):
        def drop_flops(lines):
            header = lines[0].split(",")
            i = header.index("flops")
            return [",".join(f for j, f in enumerate(line.split(",")) if j != i) for line in lines]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "traffic.csv", drop_flops)
            self.expect_failure(res, r".*traffic\.csv:1: missing column\(s\) flops$")

    def test_non_numeric_field(self):
        def bad(lines):
            f = lines[3].split(",")
            f[4] = "12GB"  # model_read_bytes
            return lines[:3] + [",".join(f)] + lines[4:]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "traffic.csv", bad)
            self.expect_failure(res, r".*traffic\.csv:4: column 'model_read_bytes' is '12GB'")

    def test_wrong_field_count(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "ceilings.csv", lambda lines: lines + ["bf16_matmul,790"])
            self.expect_failure(res, r".*ceilings\.csv:6: 2 fields, the header has 3$")

    def test_malformed_optional_anchors(self):
        # anchors.csv is optional, but when present it is checked like the others.
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "tour.csv", lambda lines: lines)
            with open(os.path.join(res, "anchors.csv"), "w") as fh:
                fh.write("backend,dtype,causal,B,H,N,d,fwd_ms,fwd_tflops,bwd_ms,bwd_tflops\n"
                         "mem_efficient,float32,False,4,32,4096,64,fast,35,39,35\n")
            self.expect_failure(res, r".*anchors\.csv:2: column 'fwd_ms' is 'fast', not a number$")

    def test_empty_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "tour.csv", lambda lines: [])
            self.expect_failure(res, r".*tour\.csv:1: empty file")

    # The tensor-core files: tc_variants.csv and probes.csv must be there, and PyTorch's
    # bf16 numbers must come from vs_pytorch.csv or ch07_anchors.csv.
    def test_missing_tc_variants(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "tc_variants.csv", None)
            self.expect_failure(res, r".*tc_variants\.csv: file not found \(expected the "
                                     r"tc_variants\.csv of a results folder\)$")

    def test_missing_probes(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "probes.csv", None)
            self.expect_failure(res, r".*probes\.csv: file not found")

    def test_no_pytorch_bf16_source(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "ch07_anchors.csv", None)
            self.expect_failure(res, r".*ch07_anchors\.csv: file not found, and no "
                                     r"vs_pytorch\.csv either")

    def test_non_numeric_tc_variants(self):
        def bad(lines):
            f = lines[2].split(",")
            f[9] = "slow"  # ms
            return lines[:2] + [",".join(f)] + lines[3:]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "tc_variants.csv", bad)
            self.expect_failure(res, r".*tc_variants\.csv:3: column 'ms' is 'slow', not a number$")

    def test_probes_missing_column(self):
        def drop_rate(lines):
            return [",".join(f for j, f in enumerate(line.split(",")) if j != 2) for line in lines]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "probes.csv", drop_rate)
            self.expect_failure(res, r".*probes\.csv:1: missing column\(s\) rate$")

    def test_malformed_ch07_anchors(self):
        def bad(lines):
            return lines[:1] + [lines[1].replace(",False,", ",maybe,")] + lines[2:]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.broken_copy(tmp, "ch07_anchors.csv", bad)
            self.expect_failure(res, r".*ch07_anchors\.csv:2: column 'causal' is 'maybe', "
                                     r"expected 0 or 1$")

    def vs_pytorch_copy(self, tmp, edit):
        res = self.broken_copy(tmp, "tour.csv", lambda lines: lines)
        with open(os.path.join(FIXTURES, "with_vs_pytorch", "vs_pytorch.csv")) as fh:
            lines = fh.read().splitlines()
        with open(os.path.join(res, "vs_pytorch.csv"), "w") as fh:
            fh.write("\n".join(edit(lines)) + ("\n" if lines else ""))
        return res

    def test_malformed_vs_pytorch(self):
        # Optional, but checked like the others when it is there.
        with tempfile.TemporaryDirectory() as tmp:
            res = self.vs_pytorch_copy(tmp, lambda lines: lines[:2] + ["torch_flash,forward,bf16,1,32"]
                                       + lines[3:])
            self.expect_failure(res, r".*vs_pytorch\.csv:3: 5 fields, the header has 19$")

    def test_vs_pytorch_missing_column(self):
        def drop_impl(lines):
            return [line.split(",", 1)[1] for line in lines]
        with tempfile.TemporaryDirectory() as tmp:
            res = self.vs_pytorch_copy(tmp, drop_impl)
            self.expect_failure(res, r".*vs_pytorch\.csv:1: missing column\(s\) impl$")

    def test_empty_vs_pytorch(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.vs_pytorch_copy(tmp, lambda lines: [])
            self.expect_failure(res, r".*vs_pytorch\.csv:1: empty file")


class Ceilings(unittest.TestCase):
    def test_parses_the_anchor_log(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ceilings.csv")
            code, _, stderr = run("ceilings_from_anchors.py",
                                  os.path.join(FIXTURES, "anchors", "anchors.log"), out)
            self.assertEqual(code, 0, stderr)
            with open(out) as fh:
                self.assertEqual(fh.read(), "name,value,unit\ncopy_bandwidth,4.31,TB/s\n"
                                 "fp32_matmul,50,TFLOP/s\nbf16_matmul,790,TFLOP/s\n"
                                 "fp16_matmul,770,TFLOP/s\n")

    def test_missing_ceiling_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "copy_bandwidth"):
            ceilings_from_anchors.parse("ceiling matmul torch.bfloat16 790 TFLOP/s\n"
                                        "ceiling matmul fp32(no tf32) 50 TFLOP/s\n")
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "empty.log")
            open(log, "w").close()
            code, _, stderr = run("ceilings_from_anchors.py", log, os.path.join(tmp, "c.csv"))
            self.assertEqual(code, 1)
            self.assertIn("no 'copy_bandwidth / fp32_matmul / bf16_matmul' ceiling", stderr)


if __name__ == "__main__":
    unittest.main()
