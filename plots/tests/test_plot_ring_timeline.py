"""CPU test of plots/plot_ring_timeline.py on a hand-made trace: the kernels it reads (GPU
kernels only, by stream), the part of the transfers under compute it computes, the figure
it draws, and its refusals."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "plot_ring_timeline.py")
import plot_ring_timeline as prt


def trace():
    """Stream 7: attention kernels at 0-100 and 150-250 us; stream 20: two NCCL transfers,
    80-140 us (20 us of it under the first kernel) and 240-260 us (10 us under the second).
    A CPU event and a memcpy are not kernels and are left out."""
    k = lambda name, ts, dur, stream: {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur,
                                       "pid": 0, "tid": stream, "args": {"stream": stream}}
    return {"traceEvents": [
        k("flash_forward", 0, 100, 7), k("ncclDevKernel_SendRecv", 80, 60, 20),
        k("flash_forward", 150, 100, 7), k("ncclDevKernel_SendRecv", 240, 20, 20),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 300, "dur": 5, "pid": 0, "tid": 7},
    ]}


class RingTimeline(unittest.TestCase):
    def test_kernels_and_cover(self):
        ks = prt.kernels(trace())
        self.assertEqual([(s, n[:5]) for s, n, _, _ in ks],
                         [("7", "flash"), ("20", "ncclD"), ("7", "flash"), ("20", "ncclD")])
        lines, transfer, under = prt.summary(ks)
        self.assertEqual((transfer, under), (80.0, 30.0))
        self.assertIn("0.38 hidden", lines[-2])
        # 50 us of transfer alone, of the 260 us from the first kernel's start to the last's end.
        self.assertIn("exposed 0.050 ms of the call's 0.260 ms (19.2%)", lines[-1])

    def test_draws_and_refuses(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, png = os.path.join(tmp, "t.json"), os.path.join(tmp, "t.png")
            with open(path, "w") as f:
                json.dump(trace(), f)
            r = subprocess.run([sys.executable, SCRIPT, path, "--out", png], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("transfers 0.080 ms, under compute 0.030 ms", r.stdout)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            with open(path, "w") as f:
                json.dump({"traceEvents": []}, f)
            r = subprocess.run([sys.executable, SCRIPT, path, "--out", png], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no GPU kernel events", r.stderr)
            r = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "missing.json")], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main()
