"""CPU test of scripts/train_gpt.py (ctest scripts_train_gpt): its refusals of attentions
that need a GPU on --device cpu, and a tiny run on the CPU (SDPA's math backend) that writes
its CSV; the GPU runs (FlashAttention-2, cuDNN, the tutorial's kernels) need a GPU."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "train_gpt.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300)


def has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipUnless(has_torch(), "no PyTorch")
class TrainGpt(unittest.TestCase):
    def test_gpu_attentions_are_refused_on_the_cpu(self):
        for attention in ("sdpa_cudnn", "flashtut"):
            r = run("--tiny", "--device", "cpu", "--attention", attention)
            self.assertEqual(r.returncode, 2, attention + r.stderr)
            self.assertIn("it needs --device cuda", r.stderr)

    def test_outputs_that_cannot_be_written_are_refused_before_training(self):
        with tempfile.TemporaryDirectory() as tmp:
            afile = os.path.join(tmp, "afile")
            open(afile, "w").close()
            cases = [(["--save", os.path.join(afile, "gpt.pt")], f"--save {afile}/gpt.pt: {afile} is a file"),
                     (["--out", os.path.join(afile, "run.csv")], f"--out {afile}/run.csv: {afile} is a file"),
                     (["--save", tmp], f"--save {tmp}: is a folder, not a file")]
            for args, message in cases:
                r = run("--tiny", "--device", "cpu", *args)
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                self.assertIn(f"train_gpt: error: {message}", r.stderr, args)
                self.assertNotIn("Traceback", r.stderr, args)
                self.assertEqual(r.stdout, "", "refused before anything ran")

    def test_tiny_cpu_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "new", "run.csv")  # its folder is made
            r = run("--tiny", "--device", "cpu", "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 5)
        self.assertEqual({row["attention"] for row in rows}, {"sdpa_math"})


if __name__ == "__main__":
    unittest.main()
