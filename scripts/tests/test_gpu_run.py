"""CPU tests of scripts/gpu_run.py (ctest scripts_gpu_run): everything that runs without a
GPU or PyTorch. The command line (--help, --list, the errors of bad steps and bad values),
the plan --dry-run prints on a made-up build folder (the commands of a few steps, nothing
written), and the helpers that stand in for the shell script's greps and CSV joins.
"""
import os
import re
import stat
import subprocess
import sys
import tempfile
import unittest

import gpu_run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_run.py")
# The steps' names are a contract: the READMEs and the docs name them.
STEPS = ["env", "tests", "ctest", "readme", "sanitizer", "sanitizer_views", "tour", "chapters",
         "tc", "anchors", "autograd_gpu", "vs_pytorch", "hf", "train", "precision", "decode", "decode_vs_pytorch", "ab",
         "generate", "ring", "traffic", "profiles"]


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def fake_build(folder):
    """A build folder with an executable stand-in for every program the steps look for."""
    def program(*parts):
        path = os.path.join(folder, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    program("chapters", "tour", "tour")
    program("common", "libflashtut.so")
    program("common", "test_common")
    for chapter in gpu_run.ALL_CHAPTERS:
        program("chapters", chapter, "ch" + chapter)
        program("chapters", chapter, f"test_ch{chapter}_gpu")


class CommandLine(unittest.TestCase):
    def test_help_names_every_step_and_option(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for step in STEPS:
            self.assertRegex(r.stdout, rf"\n  {step} +\S", step)
        for option in ("--build", "--steps", "--dry-run", "--sizes", "--dims", "--causal",
                       "--sanitize-chapters", "--sanitize-dims", "--sanitize-args",
                       "--sanitize-variant", "--sanitize-tag", "--sanitize-timeout",
                       "--tc-chapters", "--tc-variant", "--vs-dtypes", "--vs-shapes", "--vs-impls", "--vs-order",
                       "--ctest-regex", "--deadline",
                       "--profiles", "--source-pages", "--phase-names", "--commit"):
            self.assertIn(option, r.stdout)
        self.assertIn("(was FT_SANITIZE)", " ".join(r.stdout.split()))

    def test_list_is_the_table_in_running_order(self):
        r = run("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
        self.assertEqual(sorted(names), sorted(STEPS))
        self.assertEqual(names, list(gpu_run.STEPS))
        self.assertEqual(names[:2], ["readme", "env"])  # the README's commands run first
        self.assertNotIn("ctest", gpu_run.DEFAULT_STEPS)

    def test_bad_steps_are_refused_by_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run(tmp, "--steps", "tour,tuor", "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("step 'tuor' is none of: readme, env", r.stderr)

    def test_bad_values_are_refused_naming_the_option(self):
        cases = [(["--sizes", "0"], "--sizes: 0 is less than 1"),
                 (["--sizes", "3000"], "--sizes: 3000 does not divide 16384"),
                 (["--dims", "64,x"], "--dims: 'x' is not a whole number"),
                 (["--causal", "2"], "--causal: causal '2' is neither 0 nor 1"),
                 (["--sanitize-chapters", "04_fused"], "chapter '04_fused' is none of"),
                 (["--tc-variant", "fastest"], "'fastest' is not CHAPTER:VARIANT"),
                 (["--tc-variant", "07:"], "--tc-variant: '07:' is not CHAPTER:VARIANT"),
                 (["--tc-variant", "07:nope", "99:x"], "--tc-variant: '99:x': no chapter 99 with a program"),
                 (["--sanitize-variant", "13:x"], "--sanitize-variant: '13:x': no chapter 13 with a program"),
                 (["--commit", "zzzz"], "--commit: 'zzzz' is not a commit hash"),
                 (["--commit", "abc12"], "--commit: 'abc12' is not a commit hash"),
                 (["--vs-dtypes", "float64"], "dtype 'float64' is none of"),
                 (["--profiles", "04:fast:kernel"], "is not chapter:variant:kernel:d"),
                 (["--source-pages", "42:v:k:64"], "the chapter is 'torch' or one of"),
                 (["--sanitize-timeout", "0"], "--sanitize-timeout: 0 is less than 1"),
                 (["--train-repeats", "two"], "--train-repeats: 'two' is not a whole number")]
        with tempfile.TemporaryDirectory() as tmp:
            for args, message in cases:
                r = run(tmp, "--dry-run", *args)
                self.assertEqual(r.returncode, 2, args)
                self.assertIn(message, r.stderr, args)

    def test_out_dir_is_required(self):
        r = run("--steps", "tour")
        self.assertEqual(r.returncode, 2)
        self.assertIn("OUT_DIR is missing", r.stderr)


class DryRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.build = os.path.join(os.path.realpath(self.tmp.name), "build")
        self.out = os.path.join(os.path.realpath(self.tmp.name), "out")
        fake_build(self.build)

    def tearDown(self):
        self.tmp.cleanup()

    def plan(self, *args):
        r = run(self.out, "--build", self.build, "--dry-run", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(self.out), "a dry run writes nothing")
        return r.stdout.splitlines()

    def commands(self, lines, word):
        return [line.strip() for line in lines if word in line and line.startswith("  ")]

    def test_tour_at_the_given_shapes(self):
        lines = self.plan("--steps", "tour", "--sizes", "1024", "4096", "--dims", "128",
                          "--causal", "1")
        tour = self.commands(lines, "/chapters/tour/tour")
        logs = os.path.join(self.out, "logs")
        self.assertEqual(tour, [
            f"timeout 300 {self.build}/chapters/tour/tour --seq-len {n} --batch {16384 // n} "
            f"--heads 16 --head-dim 128 --causal --iters 10 --warmup 1 "
            f"--csv {logs}/tour_d128_n{n}_causal.csv > {logs}/tour_d128_n{n}_causal.log 2>&1"
            for n in (1024, 4096)])
        self.assertIn("== tour: ", "\n".join(lines))
        self.assertEqual(self.commands(lines, "cmake"), [], "the tour binary is there: no build")

    def test_sanitizer_on_the_named_chapters(self):
        lines = self.plan("--steps", "sanitizer", "--sanitize-chapters", "04_fused_forward",
                          "08_tensor_core_backward", "--sanitize-dims", "64,128",
                          "--sanitize-variant", "08:warp_tiles", "08:split_tail",
                          "--sanitize-args=--seed 3", "--sanitize-tag", "_b")
        runs = self.commands(lines, "compute-sanitizer")
        self.assertEqual(len(runs), 2 * 2 * 3 * 2)  # chapters x dims x tools x causal and not
        prog = f"{self.build}/chapters/08_tensor_core_backward/ch08_tensor_core_backward"
        self.assertIn(
            f"timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 {prog} --batch 1 "
            "--heads 2 --seq-len 200 --head-dim 128 --causal --iters 1 --warmup 0 --no-baseline "
            "--variant warp_tiles,split_tail --seed 3 > "
            f"{self.out}/logs/sanitizer_08_tensor_core_backward_d128_racecheck_causal_b.log 2>&1",
            runs)
        self.assertFalse(any("04_fused_forward/ch04" in r and "--variant" in r for r in runs))

    def test_decode_ab_runs_each_setting_on_its_shapes_without_the_grid(self):
        lines = self.plan("--steps", "decode", "--decode-splits", "--no-decode-grid",
                          "--decode-ab", "FT_CH11_EARLY_MERGE=0", "FT_CH11_ROW_TILES=1")
        runs = self.commands(lines, "ch11_decoding")
        shapes = len(gpu_run.DECODE_AB_SHAPES)
        self.assertEqual(len(runs), 3 * shapes)  # as built, then each setting; no grid, no sweep
        self.assertTrue(all("--variant tensor_cores " in r for r in runs))
        self.assertEqual(sum(r.startswith("FT_CH11_EARLY_MERGE=0 ") for r in runs), shapes)
        self.assertEqual(sum(r.startswith("FT_CH11_ROW_TILES=1 ") for r in runs), shapes)
        self.assertTrue(runs[0].startswith("timeout "), "as built: no setting")
        self.assertNotEqual(run(self.out, "--dry-run", "--decode-ab", "early=0").returncode, 0)

    def test_decode_ab_graph_runs_the_program_with_its_graph_flag(self):
        lines = self.plan("--steps", "decode", "--decode-splits", "--no-decode-grid",
                          "--decode-ab", "graph", "FT_CH11_PDL=0")
        runs = self.commands(lines, "ch11_decoding")
        shapes = len(gpu_run.DECODE_AB_SHAPES)
        self.assertEqual(len(runs), 3 * shapes)
        graph = [r for r in runs if " --graph " in r]
        self.assertEqual(len(graph), shapes)
        self.assertTrue(all(r.startswith("timeout ") for r in graph), "no environment setting beside --graph")
        self.assertTrue(all("_ab_graph" in r for r in graph), "the logs name the setting")
        self.assertNotEqual(run(self.out, "--dry-run", "--decode-ab", "GRAPH").returncode, 0)

    def test_decode_ab_takes_a_variant_and_query_rows(self):
        lines = self.plan("--steps", "decode", "--decode-splits", "--no-decode-grid", "--decode-ab",
                          "FT_CH11_WARPGROUPS=1", "--decode-ab-variant", "wgmma", "--decode-ab-query-rows", "4")
        runs = self.commands(lines, "ch11_decoding")
        self.assertEqual(len(runs), 2 * len(gpu_run.DECODE_AB_SHAPES))
        self.assertTrue(all("--variant wgmma " in r and "--seq-len 4 " in r for r in runs))
        self.assertTrue(all("/decode4_b" in r for r in runs), "the logs name the query rows")
        self.assertNotEqual(run(self.out, "--dry-run", "--decode-ab-query-rows", "17").returncode, 0)
        alone = run(self.out, "--dry-run", "--decode-ab-variant", "wgmma")
        self.assertNotEqual(alone.returncode, 0)
        self.assertIn("add --decode-ab", alone.stderr)

    def test_decode_vs_pytorch_takes_flashinfer_where_it_imports_and_graphs_when_asked(self):
        lines = self.plan("--steps", "decode_vs_pytorch")
        runs = self.commands(lines, "decode_vs_pytorch.py")
        self.assertEqual(len(runs), 1)
        self.assertIn(f"--out {os.path.realpath(self.out)} ", runs[0] + " ")
        self.assertIn("--flashinfer", runs[0], "a dry run assumes flashinfer imports")
        self.assertNotIn("--graph", runs[0])
        self.assertTrue(any("import flashinfer" in line for line in lines))
        graph = self.commands(self.plan("--steps", "decode_vs_pytorch", "--decode-graph"), "decode_vs_pytorch.py")
        self.assertIn("--graph", graph[0])

    def test_decode_asks_only_for_variants_chapter_11_has(self):
        """Every --variant the decode step passes names one of the program's (its registry in
        decoding.cu), or `all`: a name it lacks exits 2 and measures nothing."""
        with open(os.path.join(ROOT, "chapters", "11_decoding", "decoding.cu"), encoding="utf-8") as fh:
            known = set(re.findall(r'impl<[^>]*>\(\s*"(\w+)"', fh.read())) | {"all"}
        self.assertIn("tensor_cores", known)
        lines = self.plan("--steps", "decode", "--decode-ab", "FT_CH11_ROW_TILES=1")
        lines += self.plan("--steps", "decode", "--no-decode-grid", "--decode-ab", "FT_CH11_WARPGROUPS=1",
                           "--decode-ab-variant", "wgmma,fastest")
        asked = {v for r in self.commands(lines, "ch11_decoding") for m in re.findall(r"--variant (\S+)", r)
                 for v in m.split(",")}
        self.assertTrue(asked, "the decode step asked for no variant")
        self.assertLessEqual(asked, known)

    def test_ab_builds_the_base_tree_and_runs_both_in_turn(self):
        base = os.path.join(self.tmp.name, "base")
        lines = self.plan("--steps", "ab", "--ab-tree", base, "--ab-args", "--variant specialized --seq-len 4096",
                          "--variant overlap --head-dim 64")
        cmake = self.commands(lines, "cmake")
        self.assertEqual(len(cmake), 2)
        self.assertIn(f"-S {base} -B {base}/build -G Ninja", cmake[0])
        self.assertIn("--target ch10_hopper_backward", cmake[1])
        runs = [r for r in self.commands(lines, "ch10_hopper_backward --variant")]
        self.assertEqual([r.split()[2] for r in runs],
                         [f"{root}/chapters/10_hopper_backward/ch10_hopper_backward"
                          for root in (self.build, f"{base}/build")] * 2)
        self.assertIn("--variant overlap --head-dim 64 --csv", runs[2])
        # Without a base tree the step says so and runs nothing.
        self.assertEqual(self.commands(self.plan("--steps", "ab"), "ch10_hopper_backward"), [])

    def test_deadline_stops_starting_commands_and_still_packs_the_logs(self):
        """Past --deadline no command starts, the one running is cut to what is left, the
        steps cut short fail by name, and summary.txt and logs.tar.gz are still written."""
        tour = os.path.join(self.build, "chapters", "tour", "tour")
        with open(tour, "w") as f:
            f.write("#!/bin/sh\nsleep 5\n")
        r = run(self.out, "--build", self.build, "--steps", "tour", "--sizes", "1024", "4096",
                "--dims", "64", "--causal", "0", "--deadline", "1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(os.path.join(self.out, "summary.txt")) as f:
            summary = f.read()
        self.assertIn("tour: not finished by --deadline (1 s after the start)", summary)
        self.assertIn("== failed steps: tour", summary)
        self.assertTrue(os.path.exists(os.path.join(self.out, "logs.tar.gz")))
        import tarfile
        with tarfile.open(os.path.join(self.out, "logs.tar.gz")) as tar:
            log = tar.extractfile("logs/gpu_run.log").read().decode()
        self.assertRegex(log, r"rc=124 \d+ s: timeout 1 .*tour --seq-len 1024")
        self.assertIn("not run (past --deadline): ", log)
        self.assertIn("--seq-len 4096", log.split("not run (past --deadline): ")[1])

    def test_the_clock_log_runs_beside_the_steps_and_ends_the_summary(self):
        """nvidia-smi samples the clocks in the background for the whole run (a stand-in here,
        first on PATH), and summary.txt says what its samples say."""
        bin_dir = os.path.join(self.tmp.name, "bin")
        os.makedirs(bin_dir)
        smi = os.path.join(bin_dir, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\n"
                    "echo 'timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], temperature.gpu, power.draw [W]'\n"
                    "echo '2026/12/08 01:00:00.000, 1980 MHz, 2619 MHz, 55, 520.00 W'\n"
                    "echo '2026/12/08 01:00:01.000, 345 MHz, 2619 MHz, 41, 75.00 W'\n"
                    "exec sleep 60\n")
        os.chmod(smi, 0o755)
        tour = os.path.join(self.build, "chapters", "tour", "tour")
        with open(tour, "w") as f:
            f.write("#!/bin/sh\nsleep 1\n")
        self.assertIn("(in the background, the whole run) nvidia-smi --query-gpu=timestamp,clocks.sm,",
                      "\n".join(self.plan("--steps", "tour", "--sizes", "1024", "--dims", "64", "--causal", "0")))
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"])
        r = subprocess.run([sys.executable, SCRIPT, self.out, "--build", self.build, "--steps", "tour",
                            "--sizes", "1024", "--dims", "64", "--causal", "0"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.out, "summary.txt")) as f:
            summary = f.read()
        self.assertIn("clocks: 2 samples; the busiest 1 (520-520 W): SM 1980-1980 MHz (median 1980), "
                      "memory 2619-2619 MHz; at most 55 C (logs/clocks.csv)", summary)

    def test_default_steps_leave_out_ctest(self):
        lines = self.plan()
        headers = [line.split(":")[0][3:] for line in lines if line.startswith("== ")]
        # autograd_gpu: the tests step runs the Python GPU tests when both are asked for.
        self.assertEqual(headers, [s for s in gpu_run.STEPS if s not in ("ctest", "ab", "autograd_gpu")])
        self.assertEqual(self.commands(lines, "ctest --test-dir"), [])
        self.assertTrue(any("python/tests/test_ops_gpu.py" in line for line in lines))

    def test_a_missing_build_is_configured_and_built_with_ninja(self):
        empty = os.path.join(self.tmp.name, "empty")
        lines = run(self.out, "--build", empty, "--dry-run", "--steps", "tour").stdout.splitlines()
        cmake = self.commands(lines, "cmake")
        self.assertEqual(len(cmake), 2)
        self.assertIn(f"-B {os.path.realpath(empty)} -G Ninja -DCMAKE_BUILD_TYPE=Release", cmake[0])
        self.assertIn("-j 16 -- -k 0", cmake[1])
        # --build-targets: those alone.
        lines = run(self.out, "--build", empty, "--dry-run", "--steps", "ctest",
                    "--build-targets", "flashtut", "test_ch11_decoding_gpu").stdout.splitlines()
        self.assertIn("-j 16 --target flashtut test_ch11_decoding_gpu", self.commands(lines, "cmake")[1])

    def test_each_test_binary_runs_in_shards(self):
        lines = self.plan("--steps", "tests")
        shards = self.commands(lines, "test_ch10_hopper_backward_gpu --gtest_brief=1")
        self.assertEqual(len(shards), gpu_run.TEST_SHARDS)
        for i, line in enumerate(shards):
            self.assertIn(f"GTEST_TOTAL_SHARDS={gpu_run.TEST_SHARDS} GTEST_SHARD_INDEX={i} "
                          f"OMP_NUM_THREADS={gpu_run.JOBS} OMP_WAIT_POLICY=PASSIVE "
                          f"FT_REFERENCE_CACHE={gpu_run.REFERENCE_CACHE}", line)
            self.assertIn(f"test_ch10_hopper_backward_gpu.shard{i}.log", line)

    def test_shards_run_at_once_and_their_counts_add_up(self):
        # A stand-in test binary: shard 3 fails one test, the others pass two each.
        folder = os.path.join(self.tmp.name, "shards")
        fake_build(folder)
        test = os.path.join(folder, "chapters", "10_hopper_backward", "test_ch10_hopper_backward_gpu")
        with open(test, "w") as f:
            f.write('#!/bin/sh\nif [ "$GTEST_SHARD_INDEX" = 3 ]; then echo "[  FAILED  ] Ch10.Walk"; exit 1; fi\n'
                    'echo "[  PASSED  ] 2 tests."\n')
        out = os.path.join(self.tmp.name, "shards_out")
        r = run(out, "--build", folder, "--steps", "tests")
        self.assertEqual(r.returncode, 1, r.stdout)  # the step failed
        self.assertIn("test_ch10_hopper_backward_gpu: FAILED(shard 3: rc=1) — 14 passed in 8 shards; "
                      "[  FAILED  ] Ch10.Walk", r.stdout)

    def test_a_pack_is_never_built_and_ctest_refuses_it(self):
        pack = os.path.join(self.tmp.name, "build_pack")
        fake_build(pack)
        with open(os.path.join(pack, "PACKED.txt"), "w") as f:
            f.write("targets: flashtut tour\ncommit: abc\n")
        lines = run(self.out, "--build", pack, "--dry-run", "--steps", "tour", "ctest",
                    "--build-targets", "flashtut").stdout.splitlines()
        self.assertEqual(self.commands(lines, "cmake"), [])
        self.assertIn(f"== prebuilt ({os.path.realpath(pack)}): targets: flashtut tour; commit: abc", lines)
        self.assertIn("--build-targets ignored: a pack is never built", lines)
        self.assertTrue(any(line.startswith("ctest refused: ") for line in lines))
        self.assertEqual(self.commands(lines, "ctest --test-dir"), [])
        self.assertTrue(self.commands(lines, os.path.join(os.path.realpath(pack), "chapters", "tour", "tour")))

    def test_python_steps_get_the_tree_and_the_options(self):
        lines = self.plan("--steps", "vs_pytorch,ctest", "--vs-dtypes", "bf16",
                          "--ctest-regex", "^ch08[.]", "--sizes", "4096")
        self.assertIn(f"PYTHONPATH={ROOT}/python:{ROOT}/scripts:{ROOT}/plots:{ROOT}/docs",
                      lines[0])
        vs = self.commands(lines, "compare_pytorch.py")
        self.assertEqual(len(vs), 1)
        self.assertIn(f"--lib {self.build}/common/libflashtut.so --sizes 4096 --dims 64 128 "
                      "--causal 0 1 --dtypes bf16 --backward", vs[0])
        self.assertTrue(vs[0].startswith("PYTHONUNBUFFERED=1 "))
        self.assertEqual(self.commands(lines, "ctest --test-dir"), [
            f"OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE ctest --test-dir {self.build} -j 16 "
            f"--output-on-failure --timeout 240 -R '^ch08[.]' > {self.out}/logs/ctest.log 2>&1"])

    def test_vs_pytorch_at_given_shapes_and_impls_and_the_hf_step(self):
        lines = self.plan("--steps", "vs_pytorch,hf", "--vs-dtypes", "bf16", "--vs-shapes",
                          "8,12,1024,64,1", "4,32,8192,128,1,8", "--vs-impls", "ch09_overlap,torch_cudnn")
        (vs,) = self.commands(lines, "compare_pytorch.py")
        self.assertIn("--shapes 8,12,1024,64,1 4,32,8192,128,1,8 --impls ch09_overlap torch_cudnn "
                      "--dtypes bf16 --backward", vs)
        self.assertNotIn("--order", vs)  # the registry's order unless --vs-order says otherwise
        (rev,) = self.commands(self.plan("--steps", "vs_pytorch", "--vs-order", "reverse"), "compare_pytorch.py")
        self.assertIn("--order reverse", rev)
        (hf,) = self.commands(lines, "hf_step_time.py")
        self.assertIn(f"hf_step_time.py --out {self.out}", hf)
        self.assertEqual(run("/tmp/o", "--dry-run", "--vs-shapes", "8,12,1024").returncode, 2)

    def test_ring_on_one_rank_without_gpus_and_its_shapes(self):
        # A dry run counts no GPUs: every shape runs on one rank through torchrun, after the
        # simulated ranks' test, NVLink multicast off in the environment of both.
        lines = self.plan("--steps", "ring", "--ring-shapes", "4096,1", "8192,0", "--ring-heads", "4")
        (test,) = self.commands(lines, "test_ring_gpu.py")
        self.assertIn("NCCL_NVLS_ENABLE=0", test)
        runs = self.commands(lines, "ring_attention.py")
        self.assertEqual(len(runs), 2)
        self.assertIn("--nproc-per-node 1", runs[0])
        self.assertIn("--seq-len 4096 --head-dim 128 --heads 4 --causal --csv", runs[0])
        self.assertIn("--seq-len 8192 --head-dim 128 --heads 4 --csv", runs[1])
        self.assertTrue(all("NCCL_NVLS_ENABLE=0" in r for r in runs))
        self.assertTrue(all("--trace " in r for r in runs))
        timelines = self.commands(lines, "plot_ring_timeline.py")
        self.assertEqual(len(timelines), 2)
        self.assertIn("ring_P1_N4096_c1_traces/ring_trace_rank0.json --out", timelines[0])
        self.assertEqual(run("/tmp/o", "--dry-run", "--ring-shapes", "4096,2").returncode, 2)

    def test_ring_ranks_and_args(self):
        # Asked for 2 ranks on a machine that counts none: no run; 1 rank: one, with the flags.
        lines = self.plan("--steps", "ring", "--ring-shapes", "4096,1", "--ring-ranks", "2")
        self.assertEqual(self.commands(lines, "ring_attention.py"), [])
        lines = self.plan("--steps", "ring", "--ring-shapes", "4096,1", "--ring-ranks", "1", "2",
                          "--ring-args", "--iters 3 --warmup 1")
        (one,) = self.commands(lines, "ring_attention.py")
        self.assertIn("--nproc-per-node 1", one)
        self.assertIn("--trace ", one)
        self.assertIn("--iters 3 --warmup 1", one)

    def test_source_pages_alone(self):
        lines = self.plan("--steps", "profiles", "--profiles",
                          "--source-pages", "08:spread_atomics:flash_backward_warp_tiles:64",
                          "--phase-names", "S,dP,dV,dQ,dK")
        self.assertEqual(len(self.commands(lines, "--section SpeedOfLight")), 0)
        ncu = self.commands(lines, "ncu ")
        self.assertEqual(len(ncu), 2)  # the profile, then the source page's export
        self.assertIn("-k regex:flash_backward_warp_tiles --launch-skip 1 --launch-count 1 -o", ncu[0])
        self.assertIn("--variant spread_atomics", ncu[0])
        self.assertTrue(self.commands(lines, "stall_phases.py")[0].endswith(
            "source_08_spread_atomics_d64.csv.gz --names S,dP,dV,dQ,dK"))

    def test_commit_is_a_hash_of_7_to_40_hex_digits(self):
        for commit in ("06fd431", "0" * 40, "ABCDEF1", "938aab2+gpu_run-ch02", "06fd431-dirty"):
            self.plan("--steps", "env", "--commit", commit)
        self.assertEqual(gpu_run.commit_hash("ABCDEF1"), "abcdef1")  # as git prints it
        self.assertEqual(gpu_run.commit_hash("0999ACA+warp_tiles"), "0999aca+warp_tiles")

    def test_tc_variants_per_chapter(self):
        lines = self.plan("--steps", "tc", "--tc-chapters", "07_tensor_core_forward",
                          "--tc-variant", "07:tuned,07:plain", "06:grid_half",
                          "--dims", "64", "--causal", "0", "--tc-sizes", "4096")
        tc = self.commands(lines, "ch07_tensor_core_forward")
        self.assertEqual(len(tc), 1)
        self.assertIn("--dtype bf16 --seq-len 4096 --batch 4 --heads 32 --head-dim 64 "
                      "--no-baseline --iters 10 --warmup 2", tc[0])
        self.assertIn("--variant tuned,plain >", tc[0])


class Helpers(unittest.TestCase):
    def test_grep_after_separates_groups_as_grep_does(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            with open(a, "w") as f:
                f.write("x\nhit 1\ny\nz\nhit 2\nw\n")
            with open(b, "w") as f:
                f.write("hit 3\n")
            self.assertEqual(gpu_run.grep_after("^hit", [a, b], 1),
                             ["hit 1", "y", "--", "hit 2", "w", "--", "hit 3"])
            self.assertEqual(gpu_run.grep_after("^hit", [a], 2), ["hit 1", "y", "z", "hit 2", "w"])
            self.assertEqual(gpu_run.grep_after("^hit", [os.path.join(tmp, "none")], 2), [])

    def test_csv_parts_become_one_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            parts = []
            for k in range(3):
                parts.append(os.path.join(tmp, f"p{k}.csv"))
                with open(parts[-1], "w") as f:
                    f.write(f"a,b\n{k},{k}\n")
            whole = os.path.join(tmp, "whole.csv")
            gpu_run.join_csvs(whole, [parts[0], os.path.join(tmp, "missing.csv"), parts[1]])
            with open(whole) as f:
                self.assertEqual(f.read(), "a,b\n0,0\n1,1\n")
            gpu_run.append_csv(parts[2], whole)
            with open(whole) as f:
                self.assertEqual(f.read(), "a,b\n0,0\n1,1\n2,2\n")

    def test_tagged_parts_line_up_by_column_name(self):
        # The ab step: this tree's program writes a column (timing) the base tree's does not.
        with tempfile.TemporaryDirectory() as tmp:
            this, base, whole = (os.path.join(tmp, n) for n in ("this.csv", "base.csv", "ab.csv"))
            with open(this, "w") as f:
                f.write('variant,what,ms,timing\nfastest,"a, b",1.5,call\n')
            with open(base, "w") as f:
                f.write("variant,what,ms\nfastest,c,1.7\n")
            gpu_run.tag_csv(this, whole, "tree", "this")
            gpu_run.tag_csv(base, whole, "tree", "base")
            gpu_run.tag_csv(os.path.join(tmp, "missing.csv"), whole, "tree", "none")
            with open(whole) as f:
                self.assertEqual(f.read(), 'variant,what,ms,timing,tree\nfastest,"a, b",1.5,call,this\n'
                                           "fastest,c,1.7,,base\n")
            with open(base, "w") as f:
                f.write("variant,ms,extra\nx,1,2\n")
            with self.assertRaisesRegex(ValueError, "extra"):
                gpu_run.tag_csv(base, whole, "tree", "base")

    def test_sanitize_args_replace_the_flags_they_name(self):
        base = ["--batch", "2", "--heads", "8", "--causal", "--iters", "1", "--variant", "a,b"]
        self.assertEqual(gpu_run.with_flags(base, ["--batch", "1", "--variant", "fastest"]),
                         ["--heads", "8", "--causal", "--iters", "1", "--batch", "1", "--variant", "fastest"])
        self.assertEqual(gpu_run.with_flags(base, ["--seed", "3"]), base + ["--seed", "3"])
        self.assertEqual(gpu_run.with_flags(base, ["--causal"]),
                         ["--batch", "2", "--heads", "8", "--iters", "1", "--variant", "a,b", "--causal"])

    def test_variants_and_shapes(self):
        specs = ["06:grid_half", "08:spread_atomics", "08:late_copy"]
        self.assertEqual(gpu_run.variants_for("08_tensor_core_backward", specs),
                         "spread_atomics,late_copy")
        self.assertEqual(gpu_run.variants_for("07_tensor_core_forward", specs), "")
        self.assertEqual(gpu_run.shape(4096, 128, True),
                         ["--seq-len", "4096", "--batch", "4", "--heads", "16", "--head-dim",
                          "128", "--causal"])

    def test_clock_summary_takes_the_busy_samples(self):
        header = "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], temperature.gpu, power.draw [W]\n"
        samples = ("t, 345 MHz, 2619 MHz, 30, 70.10 W\n"
                   "t, 1980 MHz, 2619 MHz, 55, 520.00 W\n"
                   "t, 1755 MHz, 2619 MHz, 66, 690.50 W\n"
                   "t, 345 MHz, 1593 MHz, 40, 75.00 W\n")
        self.assertEqual(gpu_run.clock_summary(header + samples), [
            "clocks: 4 samples; the busiest 2 (520-690 W): SM 1755-1980 MHz (median 1980), "
            "memory 2619-2619 MHz; at most 66 C (logs/clocks.csv)"])
        # Without power readings every sample counts; lines that are no sample are skipped.
        no_power = header + samples.replace("520.00 W", "[N/A]") + "No devices were found\n"
        self.assertEqual(gpu_run.clock_summary(no_power), [
            "clocks: 4 samples; all (no power reported): SM 345-1980 MHz (median 1755), "
            "memory 1593-2619 MHz; at most 66 C (logs/clocks.csv)"])
        self.assertEqual(gpu_run.clock_summary("No devices were found\n"),
                         ["clocks: no samples (logs/clocks.csv says what nvidia-smi printed)"])

    def test_stall_lines_largest_first(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profile.txt")
            with open(path, "w") as f:
                f.write("    smsp__average_warps_issue_stalled_wait_per_issue_active.ratio  ratio  1.50\n"
                        "    smsp__average_warps_issue_stalled_mio_per_issue_active.ratio   ratio  12.25\n"
                        "    Duration  usecond  3.10\n")
            self.assertEqual(gpu_run.stalls(path), [
                "    12.25 smsp__average_warps_issue_stalled_mio_per_issue_active.ratio",
                "    1.50 smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"])


if __name__ == "__main__":
    unittest.main()
