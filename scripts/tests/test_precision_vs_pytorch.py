"""CPU tests of scripts/precision_vs_pytorch.py (ctest scripts_precision_vs_pytorch): its
refusals, and the claim chapter 06 teaches, on PyTorch's operations alone: with logits of
order 100, storing the scores S in bf16 (the three kernels) costs the output more than ten
times the error of keeping S in float32 (what a fused kernel does), and the log-sum-exp
a thousand times more; with logits of order 1 the two are close. Skipped without PyTorch."""
import csv
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import precision_vs_pytorch as pv  # noqa: E402

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


class Arguments(unittest.TestCase):
    def test_refuses_sizes_below_one_and_logits_at_zero(self):
        for bad in (["--sizes", "0"], ["--dims", "-1"], ["--logits", "0"]):
            with self.assertRaises(SystemExit) as e:
                pv.parse_args(["--out", "x", *bad])
            self.assertEqual(e.exception.code, 2, bad)


@unittest.skipUnless(HAVE_TORCH, "needs PyTorch (pip install torch)")
class TheClaim(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with tempfile.TemporaryDirectory() as out:
            rc = pv.main(["--out", out, "--device", "cpu", "--sizes", "2", "256", "--dims", "64",
                          "--logits", "1", "100"])
            assert rc == 0, rc
            with open(os.path.join(out, "precision_vs_pytorch.csv"), newline="") as f:
                cls.rows = list(csv.DictReader(f))

    def err(self, impl, n, logits, what="o_rel_err"):
        found = [float(r[what]) for r in self.rows
                 if r["impl"] == impl and r["seq_len"] == str(n) and r["logits"] == logits]
        self.assertEqual(len(found), 1, (impl, n, logits))
        return found[0]

    def test_large_logits_cost_the_bf16_scores_digits(self):
        three, fused = self.err("torch_three_kernels", 256, "100"), self.err("torch_float32_scores", 256, "100")
        self.assertGreater(three, 10 * fused)

    def test_small_logits_cost_little(self):
        three, fused = self.err("torch_three_kernels", 256, "1"), self.err("torch_float32_scores", 256, "1")
        self.assertLess(three, 3 * fused)

    def test_the_log_sum_exp_carries_the_rounding_of_s(self):
        three = self.err("torch_three_kernels", 2, "100", "lse_rel_err")
        fused = self.err("torch_float32_scores", 2, "100", "lse_rel_err")
        self.assertGreater(three, 1e-4)  # bf16 keeps about 3 digits of a score near 100
        self.assertGreater(three, 1000 * fused)

    def test_every_error_is_finite_and_below_one(self):
        for r in self.rows:
            self.assertEqual(r["status"], "ok", r)
            self.assertLess(float(r["o_rel_err"]), 1.0, r)


if __name__ == "__main__":
    unittest.main()
