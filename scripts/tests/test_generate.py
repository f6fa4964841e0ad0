"""CPU tests of scripts/generate.py (ctest scripts_generate) and of train_gpt.py --save: a
tiny model trained for two steps on the CPU and saved, then generated from with the KV cache
and checked against the uncached generation (the same tokens, in float32); and the
refusals. Skipped without PyTorch."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.path.dirname(SCRIPTS), "python"),
                                                   os.environ.get("PYTHONPATH", "")]))
try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(SCRIPTS, script), *args], capture_output=True,
                          text=True, env=ENV)


@unittest.skipUnless(HAVE_TORCH, "needs PyTorch (pip install torch)")
class Generate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ckpt = os.path.join(cls.tmp.name, "gpt.pt")
        r = run("train_gpt.py", "--tiny", "--device", "cpu", "--steps", "2", "--save", cls.ckpt)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "saved the model to" in r.stdout, r.stdout

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_cache_gives_the_uncached_tokens(self):
        r = run("generate.py", "--checkpoint", self.ckpt, "--device", "cpu", "--tokens", "24", "--check")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("check=same (24 of 24 equal)", r.stdout)
        self.assertIn("precision=float32", r.stdout)

    def test_one_backend_alone_gives_the_same_tokens(self):
        r = run("generate.py", "--checkpoint", self.ckpt, "--device", "cpu", "--tokens", "24", "--check",
                "--sdpa-backend", "math")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("attention=sdpa sdpa_backend=math", r.stdout)
        self.assertIn("check=same (24 of 24 equal)", r.stdout)

    def test_refuses_a_cuda_backend_on_the_cpu_and_a_backend_without_sdpa(self):
        r = run("generate.py", "--checkpoint", self.ckpt, "--device", "cpu", "--sdpa-backend", "flash")
        self.assertEqual(r.returncode, 2)
        self.assertIn("runs on CUDA only", r.stderr)
        r = run("generate.py", "--checkpoint", self.ckpt, "--attention", "flashtut", "--sdpa-backend", "cudnn")
        self.assertEqual(r.returncode, 2)
        self.assertIn("it needs --attention sdpa", r.stderr)

    def test_refuses_more_tokens_than_the_context(self):
        r = run("generate.py", "--checkpoint", self.ckpt, "--device", "cpu", "--tokens", "100000")
        self.assertEqual(r.returncode, 2)
        self.assertIn("exceed the model's context", r.stderr)

    def test_refuses_a_missing_checkpoint_saying_how_to_make_one(self):
        r = run("generate.py", "--checkpoint", os.path.join(self.tmp.name, "none.pt"), "--device", "cpu")
        self.assertEqual(r.returncode, 2)
        self.assertIn("train_gpt.py --save", r.stderr)

    def test_refuses_a_file_that_is_not_a_checkpoint_before_the_gpu_test(self):
        import torch
        text = os.path.join(self.tmp.name, "notes.txt")
        with open(text, "w") as f:
            f.write("not a model\n")
        other = os.path.join(self.tmp.name, "other.pt")
        torch.save({"weights": torch.zeros(2)}, other)
        for path, why in ((text, "torch.load: UnpicklingError"), (other, "it lacks the config")):
            # No --device: the default cuda, so that a GPU test first would say "no CUDA GPU" here.
            r = run("generate.py", "--checkpoint", path)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"--checkpoint {path} is not a model saved by train_gpt.py --save ({why}", r.stderr)
            self.assertNotIn("Traceback", r.stderr)

    def test_refuses_the_tutorials_kernels_on_the_cpu(self):
        r = run("generate.py", "--checkpoint", self.ckpt, "--device", "cpu", "--attention", "flashtut")
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs --device cuda", r.stderr)


if __name__ == "__main__":
    unittest.main()
