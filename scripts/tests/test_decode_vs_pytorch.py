"""CPU test of scripts/decode_vs_pytorch.py: the order of its timing (contract 3: the flush and
the GPU's spin outside the events, the call between them), its refusals, and what it says
without a GPU."""
import os
import subprocess
import sys
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "decode_vs_pytorch.py")
sys.path.insert(0, os.path.dirname(HERE))
import decode_vs_pytorch as dvp  # noqa: E402


def fake_torch(log):
    """A torch whose CUDA events, spin and synchronization only write to `log`; each event
    pair measures 1 ms."""
    class Event:
        def __init__(self, **_):
            pass

        def record(self):
            log.append("event")

        def elapsed_time(self, other):
            return 1.0

    cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None,
                                 _sleep=lambda cycles: log.append(("spin", cycles)))
    return types.SimpleNamespace(cuda=cuda)


class Timing(unittest.TestCase):
    def test_flush_and_spin_outside_the_events(self):
        log = []
        torch = fake_torch(log)
        flush = types.SimpleNamespace(zero_=lambda: log.append("flush"))
        with mock.patch.dict(sys.modules, {"torch": torch}):
            ms = dvp.timed(torch, lambda: log.append("call"), flush, iters=2)
        self.assertEqual(ms, 1.0)
        spin = ("spin", dvp.measure_ceilings.COVER_CYCLES)
        # Three warm-up calls, then per timed call: flush, spin, event, call, event.
        self.assertEqual(log, ["call"] * 3 + ["flush", spin, "event", "call", "event"] * 2)


class CommandLine(unittest.TestCase):
    def test_refusals(self):
        for bad in (["--out", "/tmp/x", "--iters", "0"], ["--out", "/tmp/x", "--shapes", "1,32,8"], []):
            r = subprocess.run([sys.executable, SCRIPT, *bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))

    def test_without_a_gpu_it_says_so(self):
        try:
            import torch
        except ImportError:
            self.skipTest("PyTorch is not installed")
        if torch.cuda.is_available():
            self.skipTest("a GPU is here")
        r = subprocess.run([sys.executable, SCRIPT, "--out", "/tmp/decode_vs_pytorch_test"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 3)
        self.assertIn("no CUDA GPU", r.stderr)


if __name__ == "__main__":
    unittest.main()
