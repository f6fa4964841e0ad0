"""CPU test of scripts/decode_vs_pytorch.py: the order of its timing (contract 3: the flush and
the GPU's spin outside the events, the call between them), its refusals, what it says
without a GPU, how it hands the cache to FlashInfer (a stand-in module recording the calls),
its verdicts, and the order of --graph's capture and loops."""
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


class Graphs(unittest.TestCase):
    """--graph: the capture's order (a warm-up call on a side stream, then the call inside the
    capture) and the loop's (one call waited for, then the timed calls back to back)."""
    def test_capture_warms_up_on_a_side_stream_then_records_once(self):
        log = []

        class Stream:
            def wait_stream(self, other):
                log.append("wait")

        class Graph:
            def replay(self):
                log.append("replay")

        class Inside:  # a `with` that logs its entry and exit
            def __init__(self, name):
                self.name = name

            def __enter__(self):
                log.append(self.name + " on")

            def __exit__(self, *exc):
                log.append(self.name + " off")

        cuda = types.SimpleNamespace(Stream=Stream, current_stream=Stream, CUDAGraph=Graph,
                                     stream=lambda s: Inside("side"), graph=lambda g: Inside("capture"))
        replay = dvp.captured(types.SimpleNamespace(cuda=cuda), lambda: log.append("call"))
        self.assertEqual(log, ["wait", "side on", "call", "side off", "wait", "capture on", "call", "capture off"])
        replay()
        self.assertEqual(log[-1], "replay")

    def test_the_loop_times_its_calls_back_to_back(self):
        log = []
        torch = fake_torch(log)

        class Event:
            def __init__(self, **_):
                pass

            def record(self):
                log.append("event")

            def synchronize(self):
                log.append("sync")

            def elapsed_time(self, other):
                return 6.0

        torch.cuda.Event = Event
        ms = dvp.loop_ms(torch, lambda: log.append("call"), steps=3)
        self.assertEqual(ms, 2.0)  # 6 ms over 3 calls
        self.assertEqual(log, ["call", "event", "call", "call", "call", "event", "sync"])


class CommandLine(unittest.TestCase):
    def test_refusals(self):
        for bad in (["--out", "/tmp/x", "--iters", "0"], ["--out", "/tmp/x", "--shapes", "1,32,8"], []):
            r = subprocess.run([sys.executable, SCRIPT, *bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))

    def library(self):
        """Skips the test without PyTorch or without the built library (the names --impls
        takes come from it, and the script loads it before its GPU test)."""
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("PyTorch is not installed")
        import flashtut
        try:
            flashtut.library_path()
        except flashtut.LibraryError as e:
            self.skipTest(str(e))

    def test_unknown_impls_are_refused_before_the_gpu_test(self):
        self.library()
        for name in ("nope", "torch_flash"):
            r = subprocess.run([sys.executable, SCRIPT, "--out", "/tmp/decode_vs_pytorch_test",
                                "--impls", "ch11", name], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"--impls {name!r} is not one of the library's forwards", r.stderr)
            self.assertIn("ch11_grouped", r.stderr, "the names it takes are listed")

    def test_without_a_gpu_it_says_so(self):
        self.library()
        import torch
        if torch.cuda.is_available():
            self.skipTest("a GPU is here")
        r = subprocess.run([sys.executable, SCRIPT, "--out", "/tmp/decode_vs_pytorch_test"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 3)
        self.assertIn("no CUDA GPU", r.stderr)


class FakeFlashInfer:
    """FlashInfer's two wrappers as far as flashinfer_calls uses them: plan() is recorded, and
    run() returns its queries (as if O were Q), so that the layouts can be checked."""
    def __init__(self):
        self.plans = []
        outer = self

        class Wrapper:
            def __init__(self, workspace, kv_layout="NHD", use_tensor_cores=False):
                self.kind = (type(self).__name__, kv_layout, use_tensor_cores)

            def plan(self, *args, **kwargs):
                outer.plans.append((self.kind, args, kwargs))

            def run(self, q, kv):
                return q.clone()

        self.BatchDecodeWithPagedKVCacheWrapper = type("Decode", (Wrapper,), {})
        self.BatchPrefillWithPagedKVCacheWrapper = type("Prefill", (Wrapper,), {})


class FlashInfer(unittest.TestCase):
    def setUp(self):
        try:
            import torch
        except ImportError:
            self.skipTest("PyTorch is not installed")
        self.torch = torch

    def cache(self, b, hq, hkv, nq, nk, d=8):
        torch = self.torch
        return (torch.randn(b, hq, nq, d), torch.randn(b, hkv, nk, d), torch.randn(b, hkv, nk, d))

    def test_decode_pages_of_16_tokens_on_both_kernels(self):
        fi, torch = FakeFlashInfer(), self.torch
        q, k, v = self.cache(3, 8, 2, 1, 48)
        calls = dvp.flashinfer_calls(fi, torch, q, k, v, workspace=None, device="cpu")
        self.assertEqual(sorted(calls), ["flashinfer_decode", "flashinfer_decode_tc"])
        for name, fn in calls.items():
            self.assertTrue(torch.equal(fn(), q), name)  # [B, Hq, 1, d] back from [B, Hq, d]
        self.assertEqual([p[0] for p in fi.plans], [("Decode", "HND", False), ("Decode", "HND", True)])
        (_, args, kwargs) = fi.plans[0]
        indptr, indices, last = args[:3]
        self.assertEqual(indptr.tolist(), [0, 3, 6, 9])  # three pages of 16 a sequence
        self.assertEqual(indices.tolist(), list(range(9)))
        self.assertEqual(last.tolist(), [16, 16, 16])  # each sequence's last page full
        self.assertEqual(args[3:], (8, 2, 8, 16))  # Hq, Hkv, d, page size
        self.assertEqual(kwargs, {"q_data_type": q.dtype, "kv_data_type": k.dtype})

    def test_the_pool_holds_each_sequences_tokens_in_order(self):
        torch = self.torch
        k = torch.arange(2 * 3 * 48 * 4, dtype=torch.float32).view(2, 3, 48, 4)  # B, H, N, d
        pool = dvp.flashinfer_pages(torch, k, 16)
        self.assertEqual(tuple(pool.shape), (6, 3, 16, 4))
        for b in range(2):
            for t in range(48):  # token t of sequence b: page b·3 + t // 16, slot t % 16
                self.assertTrue(torch.equal(pool[b * 3 + t // 16, :, t % 16], k[b, :, t]), (b, t))

    def test_a_length_not_a_multiple_of_the_page_is_one_page(self):
        fi, torch = FakeFlashInfer(), self.torch
        q, k, v = self.cache(2, 4, 4, 1, 40)
        dvp.flashinfer_calls(fi, torch, q, k, v, workspace=None, device="cpu")
        (_, args, _) = fi.plans[0]
        self.assertEqual((args[0].tolist(), args[2].tolist(), args[6]), ([0, 1, 2], [40, 40], 40))

    def test_several_rows_go_through_causal_prefill_in_token_order(self):
        fi, torch = FakeFlashInfer(), self.torch
        q, k, v = self.cache(2, 4, 4, 3, 32)
        calls = dvp.flashinfer_calls(fi, torch, q, k, v, workspace=None, device="cpu")
        self.assertEqual(list(calls), ["flashinfer_prefill"])
        self.assertTrue(torch.equal(calls["flashinfer_prefill"](), q))  # through [B·Nq, Hq, d] and back
        (kind, args, kwargs) = fi.plans[0]
        self.assertEqual(kind, ("Prefill", "HND", False))
        self.assertEqual(args[0].tolist(), [0, 3, 6])  # each sequence's Nq query tokens
        self.assertEqual(args[1].tolist(), [0, 2, 4])  # two pages of 16 a sequence
        self.assertEqual(args[4:8], (4, 4, 8, 16))
        self.assertTrue(kwargs["causal"])


class Verdicts(unittest.TestCase):
    def test_ours_over_the_fastest_of_each(self):
        rows = [{"impl": "torch_flash", "ms": "2.0"}, {"impl": "torch_math", "ms": "4.0"},
                {"impl": "flashinfer_decode", "ms": "1.5"}, {"impl": "flashinfer_decode_tc", "ms": "1.2"},
                {"impl": "torch_cudnn", "ms": ""}, {"impl": "ch11", "ms": "1.0"}]
        self.assertEqual(dvp.verdicts(rows), "ours / fastest PyTorch 2.00x, ours / fastest FlashInfer 1.20x")
        self.assertEqual(dvp.verdicts(rows[:2]), "no comparison")


if __name__ == "__main__":
    unittest.main()
