"""GPU tests of flashtut.ring with the tutorial's kernels as the blocks (bf16, d = 64 and
128, causal and not, grouped heads): P = 2 and 4 ranks simulated on one GPU against the
whole sequence in float64 and against one device's kernels on the whole sequence; the same
with chapters 07 and 08 as the blocks (08's backward takes one length: square calls); then
one rank through DistributedRing over an NCCL process group (world_size = 1: the
distributed code path, though one rank sends nothing). Transfers between GPUs are what
scripts/ring_attention.py runs and checks on several. Exit 77 (skipped, saying why) without PyTorch, CUDA, a
GPU or the library."""
import os
import sys
import tempfile
import unittest

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("test_ring_gpu: skipped: PyTorch is not installed (pip install torch)")
    sys.exit(77)
if not torch.cuda.is_available():
    print("test_ring_gpu: skipped: no CUDA GPU")
    sys.exit(77)
try:
    import flashtut
    flashtut.load()
except Exception as e:  # noqa: BLE001 - any failure to load means: skip, saying why
    print(f"test_ring_gpu: skipped: the library does not load ({e})")
    sys.exit(77)

import flashtut.ring as ring

# bf16 inputs and outputs, float32 accumulation: the error of the result against float64,
# relative to its largest element. The blocks' own kernels are held to the same-precision
# rule by their chapters' tests; the merge adds float32 rounding only.
TOL = 2e-2


def rel_err(got, ref):
    return ((got.double() - ref.double()).abs().max() / ref.double().abs().max().clamp_min(1e-30)).item()


def inputs(n, d, heads=4, heads_kv=2, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    make = lambda h: torch.randn(1, h, n, d, generator=g).to("cuda", torch.bfloat16)
    return make(heads), make(heads_kv), make(heads_kv), make(heads)


def check_ring(test, kernels, world, d, causal):
    """P = world ranks simulated on the GPU with ``kernels`` as the blocks, against the whole
    sequence in float64 and against one call of ``kernels`` on the whole sequence."""
    reference = ring.reference_blocks()
    q, k, v, do = inputs(2 * world * 96, d)
    shard = lambda x: [ring.zigzag_shard(x, world, r) for r in range(world)]
    res = ring.forward_simulated(shard(q), shard(k), shard(v), causal=causal, blocks=kernels)
    o = ring.zigzag_unshard([o for o, _ in res])
    o_ref, lse_ref = reference[0](q, k, v, causal)
    test.assertLess(rel_err(o, o_ref), TOL)
    o_one, _ = kernels[0](q, k, v, causal)  # one device, the whole sequence
    test.assertLess(rel_err(o, o_one), TOL)
    grads = ring.backward_simulated(shard(q), shard(k), shard(v), [o for o, _ in res], [l for _, l in res],
                                    shard(do), causal=causal, blocks=kernels)
    refs = reference[1](q, k, v, o_ref, lse_ref, do, causal)
    for i, name in enumerate(("dq", "dk", "dv")):
        got = ring.zigzag_unshard([g[i] for g in grads])
        test.assertLess(rel_err(got, refs[i]), TOL, name)


class Simulated(unittest.TestCase):
    def test_ranks_on_one_gpu_match_the_whole_sequence(self):
        kernels = ring.flashtut_blocks()
        for world in (2, 4):
            for d in (64, 128):
                for causal in (False, True):
                    with self.subTest(world=world, d=d, causal=causal):
                        check_ring(self, kernels, world, d, causal)


class SquareCalls(unittest.TestCase):
    def test_chapters_07_and_08(self):
        """Chapter 08's backward takes one length: the ring's 2n × n and n × 2n calls reach it
        as two square calls each (ring.square_blocks)."""
        kernels = ring.flashtut_blocks(forward_impl="ch07", backward_impl="ch08")
        for d in (64, 128):
            for causal in (False, True):
                with self.subTest(d=d, causal=causal):
                    check_ring(self, kernels, 2, d, causal)


class OneRankThroughNccl(unittest.TestCase):
    def test_world_size_one(self):
        if not dist.is_nccl_available():
            self.skipTest("this PyTorch has no NCCL")
        with tempfile.TemporaryDirectory() as tmp:
            dist.init_process_group("nccl", init_method=f"file://{os.path.join(tmp, 'init')}", rank=0, world_size=1)
            try:
                q, k, v, do = inputs(512, 128)
                kernels, reference = ring.flashtut_blocks(), ring.reference_blocks()
                comm = ring.DistributedRing()
                o, lse = ring.forward(q, k, v, causal=True, comm=comm, blocks=kernels)
                o_ref, lse_ref = reference[0](q, k, v, True)
                self.assertLess(rel_err(o, o_ref), TOL)
                dq, dk, dv = ring.backward(q, k, v, o, lse, do, causal=True, comm=comm, blocks=kernels)
                for got, ref in zip((dq, dk, dv), reference[1](q, k, v, o_ref, lse_ref, do, True)):
                    self.assertLess(rel_err(got, ref), TOL)
            finally:
                dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
