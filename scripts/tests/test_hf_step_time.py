"""CPU test of scripts/hf_step_time.py (ctest scripts_hf_step_time): its plan and shapes,
its refusals, its CSV; the measurement itself needs a GPU (it exits 77 without one)."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

import hf_step_time as hs

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hf_step_time.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class Plan(unittest.TestCase):
    def test_every_model_with_every_attention(self):
        r = run("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), len(hs.MODELS) * len(hs.ATTENTIONS))
        self.assertIn("llama_gqa  tutorial     B=4 N=2048 H=16 H_kv=4 d=128 layers=8", lines)
        self.assertIn("gpt2       torch_cudnn  B=8 N=1024 H=12 H_kv=12 d=64 layers=12", lines)

    def test_head_dims_are_the_kernels(self):
        for name in hs.MODELS:
            b, n, h, hkv, d, layers = hs.shape_of(name)
            self.assertIn(d, (64, 128), name)
            self.assertEqual(h % hkv, 0, name)

    def test_refusals(self):
        for args in ([], ["--list", "--models", "bert"], ["--list", "--steps", "0"],
                     ["--list", "--attentions", "xformers"]):
            self.assertEqual(run(*args).returncode, 2, args)

    def test_csv_has_the_columns(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "hf_step_time.csv")
            hs.write_csv(path, [{c: 1 for c in hs.COLUMNS}])
            with open(path, newline="") as fh:
                self.assertEqual(next(csv.reader(fh)), hs.COLUMNS)


if __name__ == "__main__":
    unittest.main()
