"""CPU tests of plots/plot_training.py (ctest plots_training): the runs it reads, the band
it builds over PyTorch's runs, the verdict it prints, and the figure.

The CSVs are written here from made-up losses (not measurements): each run's final training
loss, the mean of its last --last steps, is chosen exactly, so every line of the comparison
has a known answer.
"""
import csv
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import plot_training as pt

STEPS = 30
HEADER = ["attention", "seed", "step", "loss", "val_loss", "ms", "lr", "grad_norm", "repeat",
          "graph"]


def rows(attention, seed, repeat, final, val, ms, graph=True):
    """A run whose last 20 steps' loss is `final` (earlier steps higher), its last validation
    loss `val`, every step `ms` long; a --graph run replays from step 4 (train_gpt.py's
    graph column), an eager one never."""
    out = []
    for step in range(1, STEPS + 1):
        loss = final if step > STEPS - 20 else final + 1.0
        v = f"{val:.6f}" if step == STEPS else ""
        out.append([attention, seed, step, f"{loss:.6f}", v, f"{ms:.4f}", "0.001", "1.0",
                    repeat, int(graph and step > 3)])
    return out


def write(path, runs, header=HEADER):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in runs:
            for row in rows(*r):
                w.writerow(row[:len(header)])


class Args:
    last, skip, smooth = 20, 10, 5


def report_of(runs):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.csv")
        write(path, runs)
        return pt.report(pt.read_runs([path]), Args())


def line(lines, start):
    found = [x for x in lines if x.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


# PyTorch: seed 0 three times (2.300, 2.296, 2.302), seed 1 once (2.376).
TORCH = [("sdpa_flash", "0", "0", 2.300, 2.466, 9.0), ("sdpa_flash", "0", "1", 2.296, 2.462, 9.2),
         ("sdpa_flash", "0", "2", 2.302, 2.464, 9.1), ("sdpa_flash", "1", "0", 2.376, 2.465, 9.3)]


class Verdict(unittest.TestCase):
    def test_the_band_spans_every_pytorch_run(self):
        out = report_of(TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.4)])
        self.assertIn("final train loss [2.2960, 2.3760]", line(out, "PyTorch's band"))
        self.assertIn("seeds 0 x3, 1 x1", line(out, "PyTorch's band"))

    def test_the_verdict_is_the_mean_of_a_seeds_runs(self):
        # 2.295 is below the band, 2.299 and 2.300 inside: the mean, 2.298, is inside.
        out = report_of(TORCH + [("flashtut", "0", "0", 2.295, 2.463, 9.4),
                                 ("flashtut", "0", "1", 2.299, 2.463, 9.4),
                                 ("flashtut", "0", "2", 2.300, 2.463, 9.4)])
        v = line(out, "VERDICT seed 0:")
        self.assertTrue(v.startswith("VERDICT seed 0: INSIDE"), v)
        self.assertIn("2.2980", v)
        self.assertIn("2 of 3 runs inside", v)
        self.assertIn("OUTSIDE", line(out, "tutorial seed 0 repeat 0:"))
        self.assertIn("0.0010 beyond its nearer edge", line(out, "tutorial seed 0 repeat 0:"))

    def test_a_mean_outside_is_outside(self):
        out = report_of(TORCH + [("flashtut", "0", "0", 2.290, 2.463, 9.4),
                                 ("flashtut", "0", "1", 2.294, 2.463, 9.4)])
        v = line(out, "VERDICT seed 0:")
        self.assertTrue(v.startswith("VERDICT seed 0: OUTSIDE"), v)
        self.assertIn("0.0040 beyond its nearer edge", v)

    def test_one_verdict_per_seed(self):
        out = report_of(TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.4),
                                 ("flashtut", "1", "0", 2.390, 2.463, 9.4)])
        self.assertTrue(line(out, "VERDICT seed 0:").startswith("VERDICT seed 0: INSIDE"))
        self.assertTrue(line(out, "VERDICT seed 1:").startswith("VERDICT seed 1: OUTSIDE"))

    def test_the_letter_uses_the_first_run_of_each_seed(self):
        # First runs: 2.300 (seed 0) and 2.376 (seed 1). 2.298 is inside the band of every
        # run but outside the band of the first runs.
        out = report_of(TORCH + [("flashtut", "0", "0", 2.298, 2.463, 9.4)])
        self.assertIn("INSIDE", line(out, "VERDICT seed 0:"))
        letter = line(out, "letter:")
        self.assertIn("[2.3000, 2.3760]: OUTSIDE, 0.0020 beyond", letter)

    def test_difference_from_the_same_seeds_mean(self):
        out = report_of(TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.4)])
        # PyTorch's seed-0 mean is (2.300 + 2.296 + 2.302) / 3 = 2.2993.
        self.assertIn("-0.0003 from the mean of PyTorch's seed-0 runs",
                      line(out, "tutorial seed 0 repeat 0:"))

    def test_step_time_ratio_is_of_the_medians(self):
        out = report_of(TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.45),
                                 ("flashtut", "0", "1", 2.299, 2.463, 9.6),
                                 ("flashtut", "0", "2", 2.299, 2.463, 20.0)])
        # PyTorch: median of 9.0, 9.2, 9.1, 9.3 = 9.15; tutorial: median of 9.45, 9.6, 20 = 9.6.
        s = line(out, "step time:")
        self.assertIn("tutorial 9.60 ms against PyTorch sdpa_flash's 9.15 ms", s)
        self.assertIn("ratio 1.049", s)

    def test_each_pytorch_backend_gets_its_own_step_time_ratio(self):
        cudnn = [("sdpa_cudnn", "0", "0", 2.297, 2.465, 8.0), ("sdpa_cudnn", "1", "0", 2.380, 2.465, 8.4)]
        out = report_of(TORCH + cudnn + [("flashtut", "0", "0", 2.299, 2.463, 8.8)])
        times = [x for x in out if x.startswith("step time:")]
        self.assertEqual(len(times), 2, out)
        # In the backends' order by name. cuDNN's median of 8.0 and 8.4 = 8.2;
        # FlashAttention-2's 9.15 as above.
        self.assertIn("PyTorch sdpa_cudnn's 8.20 ms", times[0])
        self.assertIn("ratio 1.073", times[0])
        self.assertIn("PyTorch sdpa_flash's 9.15 ms", times[1])
        self.assertIn("ratio 0.962", times[1])
        # The band spans both backends' runs: up to cuDNN's 2.380.
        self.assertIn("[2.2960, 2.3800]", line(out, "PyTorch's band:"))

    def test_the_same_seed_band_beside_the_verdict(self):
        # Seed 0's PyTorch runs span [2.296, 2.302]; the tutorial's mean 2.2995 is inside
        # it, and so is each of its two runs.
        out = report_of(TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.4),
                                 ("flashtut", "0", "1", 2.300, 2.463, 9.4)])
        same = line(out, "same seed 0:")
        self.assertIn("mean 2.2995 against PyTorch's seed-0 band [2.2960, 2.3020] (width "
                      "0.0060): INSIDE (2 of 2 runs inside", same)
        # Seed 1 has one PyTorch run: no band of its own, no line.
        out = report_of(TORCH + [("flashtut", "1", "0", 2.37, 2.463, 9.4)])
        self.assertFalse([x for x in out if x.startswith("same seed 1:")])

    def test_a_mean_outside_its_seeds_band_is_said(self):
        # 2.31 is inside the band of all runs (up to 2.376) but above seed 0's 2.302.
        out = report_of(TORCH + [("flashtut", "0", "0", 2.310, 2.463, 9.4)])
        self.assertIn("INSIDE", line(out, "VERDICT seed 0:"))
        self.assertIn("OUTSIDE, 0.0080 beyond its nearer edge", line(out, "same seed 0:"))

    def test_step_times_compare_each_mode_with_itself(self):
        eager = [("sdpa_flash", "0", "5", 2.300, 2.466, 12.0, False),
                 ("flashtut", "0", "5", 2.300, 2.466, 15.0, False)]
        out = report_of(TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.6)] + eager)
        self.assertIn("tutorial 9.60 ms against PyTorch sdpa_flash's 9.15 ms", line(out, "step time:"))
        self.assertIn("ratio 1.250", line(out, "step time (eager):"))
        self.assertIn("mix --graph and eager", line(out, "note:"))

    def test_without_both_kinds_of_run_there_is_no_comparison(self):
        out = report_of(TORCH)
        self.assertIn("needs PyTorch runs and tutorial (flashtut) runs; have 4 and 0",
                      out[-1])


class Reading(unittest.TestCase):
    def test_a_csv_without_repeat_column_is_repeat_zero(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "old.csv")
            write(path, [("sdpa_flash", "0", "0", 2.3, 2.46, 9.0),
                         ("flashtut", "0", "0", 2.3, 2.46, 9.0)], header=HEADER[:8])
            runs = pt.read_runs([path])
        self.assertEqual([(r.attention, r.seed, r.repeat) for r in runs],
                         [("sdpa_flash", "0", "0"), ("flashtut", "0", "0")])

    def test_repeats_are_runs_of_their_own_in_order(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.csv")
            write(path, [("flashtut", "0", "1", 2.3, 2.46, 9.0), TORCH[3], TORCH[1], TORCH[0],
                         ("flashtut", "0", "0", 2.3, 2.46, 9.0)])
            runs = pt.read_runs([path])
        self.assertEqual([r.label for r in runs],
                         ["sdpa_flash seed 0 repeat 0", "sdpa_flash seed 0 repeat 1",
                          "sdpa_flash seed 1 repeat 0", "flashtut seed 0 repeat 0",
                          "flashtut seed 0 repeat 1"])

    def test_one_run_in_two_files_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.csv"), os.path.join(tmp, "b.csv")
            write(a, [TORCH[0]])
            write(b, [TORCH[0]])
            with self.assertRaisesRegex(pt.InputError, "sdpa_flash seed 0 repeat 0 is also in"):
                pt.read_runs([a, b])


class Figure(unittest.TestCase):
    def test_draws_a_png_and_exits_0(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, png = os.path.join(tmp, "t.csv"), os.path.join(tmp, "t.png")
            write(path, TORCH + [("flashtut", "0", "0", 2.299, 2.463, 9.4),
                                 ("flashtut", "1", "0", 2.37, 2.463, 9.4)])
            self.assertEqual(pt.main([path, "--out", png, "--smooth", "5"]), 0)
            with open(png, "rb") as fh:
                self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
