"""CPU test of scripts/ring_attention.py (ctest scripts_ring_attention): its refusals, and a
run under torchrun with two CPU ranks (gloo, float64 blocks) whose check passes and whose
report names the ring's size; the GPU run (NCCL, the tutorial's kernels) needs GPUs."""
import os
import shutil
import csv
import json
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ring_attention.py")


def run(*args, launcher=()):
    return subprocess.run([*launcher, SCRIPT, *args] if launcher else [sys.executable, SCRIPT, *args],
                          capture_output=True, text=True, timeout=300)


class Refusals(unittest.TestCase):
    def test_outside_torchrun(self):
        r = run("--device", "cpu")
        if "needs PyTorch" in r.stderr:
            self.skipTest("no PyTorch")
        self.assertEqual(r.returncode, 2)
        self.assertIn("launch it with torchrun", r.stderr)

    def test_bad_flags(self):
        for args in (["--heads", "6", "--heads-kv", "4"], ["--seq-len", "0"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)

    def test_bad_flags_are_named_before_the_torchrun_check(self):
        """Each refused in one line naming the flag (outside torchrun: checked first), no
        traceback; --heads-kv 0 is no longer taken for the default."""
        cases = [(["--heads", "0"], "--heads must be at least 1"),
                 (["--heads-kv", "0"], "--heads-kv must be at least 1"),
                 (["--heads-kv", "-2"], "--heads-kv must be at least 1"),
                 (["--warmup", "-1"], "--warmup must be 0 or more")]
        for args, message in cases:
            r = run("--device", "cpu", *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(message, r.stderr, args)
            self.assertNotIn("Traceback", r.stderr, args)

    def test_outputs_that_cannot_be_written_are_refused_before_the_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            afile = os.path.join(tmp, "afile")
            open(afile, "w").close()
            cases = [(["--csv", os.path.join(afile, "x.csv")], f"--csv {afile}/x.csv: {afile} is a file"),
                     (["--trace", afile], f"--trace {afile}: {afile} is a file"),
                     (["--csv", tmp], f"--csv {tmp}: is a folder, not a file")]
            for args, message in cases:
                r = run("--device", "cpu", *args)
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                self.assertIn(message, r.stderr, args)
                self.assertNotIn("Traceback", r.stderr, args)
            # Missing folders are made, as the run would make them, and the flags pass (on
            # to the torchrun check).
            table, traces = os.path.join(tmp, "new", "ring.csv"), os.path.join(tmp, "traces")
            r = run("--device", "cpu", "--csv", table, "--trace", traces)
            if "needs PyTorch" not in r.stderr:
                self.assertIn("launch it with torchrun", r.stderr)
            self.assertTrue(os.path.isdir(os.path.dirname(table)) and os.path.isdir(traces))
            self.assertFalse(os.path.exists(table), "the CSV is written by the run, not by the check")


class TwoRanksOnTheCpu(unittest.TestCase):
    def test_checks_and_reports(self):
        try:
            import torch  # noqa: F401
            import torch.distributed as dist
        except ImportError:
            self.skipTest("no PyTorch")
        if not dist.is_gloo_available():
            self.skipTest("torch.distributed without gloo")
        launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
        with tempfile.TemporaryDirectory() as tmp:
            table = os.path.join(tmp, "ring.csv")
            traces = os.path.join(tmp, "traces")
            r = run("--device", "cpu", "--seq-len", "32", "--head-dim", "8", "--heads", "4", "--heads-kv", "2",
                    "--causal", "--iters", "1", "--warmup", "0", "--csv", table, "--trace", traces,
                    launcher=launcher)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("ring attention: P = 2", r.stdout)
            self.assertIn("check ok", r.stdout)
            with open(table) as f:
                rows = list(csv.DictReader(f))
            for rank in (0, 1):  # a Chrome trace a rank (on the CPU: host events only)
                with open(os.path.join(traces, f"ring_trace_rank{rank}.json")) as f:
                    self.assertIn("traceEvents", json.load(f))
        self.assertEqual([row["pass"] for row in rows], ["forward", "backward"])
        for row in rows:
            self.assertEqual((row["ranks"], row["seq_len"], row["causal"], row["check"]), ("2", "32", "1", "ok"))
            self.assertGreater(float(row["efficiency"]), 0)
        r = run("--device", "cpu", "--seq-len", "30", launcher=launcher)  # not a multiple of 2·P = 4
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("multiple of 2·P = 4", r.stderr)


if __name__ == "__main__":
    unittest.main()
