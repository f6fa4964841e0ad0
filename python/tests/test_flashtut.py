#!/usr/bin/env python3
"""CPU tests of python/flashtut (ctest python_flashtut): everything that runs without
PyTorch or a GPU.

  python3 python/tests/test_flashtut.py --lib build/common/libflashtut.so [-v] [unittest args]

- the module imports, and does not import torch;
- its constants, its ctypes Structures (names, C types, offsets) and its declarations match
  common/api/flashtut.h, parsed here: every prototype a declaration with as many arguments;
- its list of implementations is the library's registry (ft_impl_info_at), names unique,
  backwards paired with listed forwards, every chapter there;
- against the real library (--lib; CMake passes $<TARGET_FILE:flashtut>): the struct's size
  is ft_problem_size(), each field lands where the C code reads it (the library echoes a
  problem back in its error message), workspace queries that answer FT_WORKSPACE_ERROR
  become exceptions with ft_last_error(), and a wrong or foreign library is refused with a
  message that says what to do;
- the tensor checks, on stand-in objects with .dtype, .shape, .device, .is_contiguous()
  and .data_ptr(): each mistake gets the message that says how to fix it;
- flashtut.decodes' bounds, and its row limit against the library's (chapter 11's workspace
  query refuses one row more).
"""
import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
import flashtut as ft

HEADER = os.path.join(ROOT, "common", "api", "flashtut.h")
LIB = os.environ.get("FLASHTUT_LIB") or os.path.join(ROOT, "build", "common", "libflashtut.so")
try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


# ---- flashtut.h, parsed --------------------------------------------------------------------

def header():
    """flashtut.h without its comments."""
    with open(HEADER, encoding="utf-8") as fh:
        text = fh.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def without_macros(text):
    return re.sub(r"#define[^\n]*(?:\\\n[^\n]*)*", "", text)


def params(arglist):
    arglist = " ".join(arglist.split())
    return [] if arglist in ("", "void") else [p.strip() for p in arglist.split(",")]


def prototypes(text):
    """name -> (return type, [parameters]) of the plain function declarations."""
    out = {}
    text = re.sub(r"^\s*#[^\n]*", "", without_macros(text), flags=re.M)
    text = re.sub(r'extern\s+"C"', "", text).replace("{", ";").replace("}", ";")
    for statement in text.split(";"):
        m = re.fullmatch(r"\s*((?:const\s+)?\w+\s*\**)\s*(ft_\w+)\s*\(([^)]*)\)\s*", statement)
        if m:
            out[m.group(2)] = (" ".join(m.group(1).split()).replace(" *", "*"), params(m.group(3)))
    return out


CTYPE = {"int": ctypes.c_int, "float": ctypes.c_float, "size_t": ctypes.c_size_t,
         "const char*": ctypes.c_char_p}


# ---- Stand-in tensors ----------------------------------------------------------------------

class FakeDevice:
    def __init__(self, text="cuda:0"):
        self.type, _, index = text.partition(":")
        self.index = int(index) if index else None
        self._text = text

    def __str__(self):
        return self._text


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class FakeTensor:
    """What flashtut's checks look at, and nothing else."""

    def __init__(self, shape=(2, 3, 64, 64), dtype="float32", device="cuda:0", contiguous=True,
                 ptr=0x7F0000000000, strides=None):
        self.shape, self.dtype, self.device = tuple(shape), FakeDtype(dtype), FakeDevice(device)
        self._contiguous, self._ptr = contiguous, ptr
        dense = [1]
        for size in reversed(self.shape[1:]):
            dense.insert(0, dense[0] * size)
        self._strides = tuple(strides) if strides else tuple(dense)

    def is_contiguous(self):
        return self._contiguous

    def stride(self):
        return self._strides

    def element_size(self):
        return 4 if self.dtype.name == "float32" else 2

    def data_ptr(self):
        return self._ptr


def qkv(**kw):
    return FakeTensor(**kw), FakeTensor(**kw), FakeTensor(**kw)


def need_lib(test):
    return unittest.skipUnless(os.path.isfile(LIB), f"no library at {LIB} (build it first)")(test)


def setUpModule():
    if os.path.isfile(LIB):
        ft.load(LIB)


# ---- The tests -------------------------------------------------------------------------------

class Imports(unittest.TestCase):
    def test_the_module_imports_without_torch(self):
        code = ("import sys; import flashtut; "
                "print('torch' in sys.modules, flashtut.API_VERSION)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "FLASHTUT_LIB": "/nonexistent/libflashtut.so"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", str(ft.API_VERSION)])  # and loads no library

    def test_constants_are_the_headers(self):
        text = header()
        self.assertEqual(ft.API_VERSION, int(re.search(r"#define FT_API_VERSION (\d+)", text).group(1)))
        self.assertEqual(ft.ALIGNMENT, int(re.search(r"#define FT_ALIGNMENT (\d+)", text).group(1)))
        self.assertIn("#define FT_WORKSPACE_ERROR SIZE_MAX", " ".join(text.split()))
        self.assertEqual(ft.WORKSPACE_ERROR, 2**64 - 1 if ctypes.sizeof(ctypes.c_size_t) == 8 else 2**32 - 1)
        enum = dict(re.findall(r"FT_DTYPE_(\w+)\s*=\s*(\d+)", text))
        self.assertEqual({k: int(v) for k, v in enum.items()},
                         {"FLOAT32": ft.DTYPE_FLOAT32, "BF16": ft.DTYPE_BF16, "FP16": ft.DTYPE_FP16})


class StructLayout(unittest.TestCase):
    def header_fields(self):
        body = re.search(r"typedef\s+struct\s+ft_problem\s*\{(.*?)\}\s*ft_problem\s*;", header(), re.S)
        self.assertIsNotNone(body, "no typedef struct ft_problem in flashtut.h")
        return re.findall(r"(\w+)\s+(\w+)\s*;", body.group(1))

    def test_fields_names_types_and_order_are_the_headers(self):
        fields = self.header_fields()
        self.assertEqual([n for n, _ in ft.Problem._fields_], [n for _, n in fields])
        for (name, ctype), (ctype_name, hname) in zip(ft.Problem._fields_, fields):
            self.assertIs(ctype, CTYPE[ctype_name], f"{name}: {ctype_name} in the header")

    def test_offsets_are_what_a_c_compiler_lays_out(self):
        offset = 0
        for ctype_name, name in self.header_fields():
            size = ctypes.sizeof(CTYPE[ctype_name])
            offset = (offset + size - 1) // size * size  # natural alignment
            self.assertEqual(getattr(ft.Problem, name).offset, offset, name)
            offset += size
        self.assertEqual(ctypes.sizeof(ft.Problem), offset)

    @need_lib
    def test_size_is_the_librarys(self):
        self.assertEqual(ctypes.sizeof(ft.Problem), ft.load().ft_problem_size())
        self.assertEqual(ft.load().ft_api_version(), ft.API_VERSION)

    @need_lib
    def test_every_field_reaches_the_library_where_it_reads_it(self):
        # The library's validation names the problem as it read it: B, H, N, d, the causal
        # flag and the dtype; the scale (infinite) is the reason it refuses.
        p = ft.problem(2, 3, 5, 7, causal=True, scale=float("inf"), dtype=ft.DTYPE_BF16)
        n = ft.load().ft_forward_workspace_bytes(b"ch04", p)
        self.assertEqual(n, ft.WORKSPACE_ERROR)
        self.assertEqual(ft.last_error(), "scale must be finite (0 means 1/sqrt(head_dim)) "
                                          "(B=2 H=3 N=5 d=7 causal bf16)")
        p = ft.problem(2, 6, 5, 7, causal=True, scale=float("inf"), heads_kv=2, len_kv=9,
                       causal_align=ft.CAUSAL_BOTTOM_RIGHT)
        ft.load().ft_forward_workspace_bytes(b"ch04", p)
        self.assertIn("(B=2 Hq=6 Hkv=2 Nq=5 Nkv=9 d=7 causal(bottom-right))", ft.last_error())
        ft.load().ft_forward_workspace_bytes(b"ch04", ft.problem(2, 3, 5, 64, dtype=7))
        self.assertIn("dtype must be 0 (float32), 1 (bf16) or 2 (fp16), got 7", ft.last_error())


class Views(unittest.TestCase):
    """What view_strides accepts (the rules of common/core/strides.hpp, seen from Python), the
    ctypes structs of flashtut.h's ft_strides and ft_layout, and a strided call's checks."""

    def projection(self, B=2, N=64, H=3, d=64, **kw):
        # q of one [B, N, 3, H, d] product, seen as [B, H, N, d]: .view(...)[:, :, 0].transpose(1, 2)
        return FakeTensor((B, H, N, d), dtype="bfloat16", contiguous=False,
                          strides=(N * 3 * H * d, d, 3 * H * d, 1), **kw)

    def test_a_projections_view_is_read_in_place(self):
        self.assertEqual(ft.view_strides(self.projection()), (64 * 3 * 3 * 64, 64, 3 * 3 * 64))
        self.assertEqual(ft.view_strides(FakeTensor(dtype="bfloat16")), (3 * 64 * 64, 64 * 64, 64))

    def test_views_the_kernels_cannot_read_are_refused_with_the_fix(self):
        for strides in ((12288, 64, 192, 2),    # head_dim not contiguous
                        (12288, 68, 192, 1),    # a head 136 bytes from the next
                        (12288, -64, 192, 1)):  # negative
            t = FakeTensor((2, 3, 64, 64), dtype="bfloat16", contiguous=False, strides=strides)
            self.assertIsNone(ft.view_strides(t), strides)
            with self.assertRaises(ValueError) as c:
                ft.check_tensors([("q", t)], views=True)
            self.assertIn("q.contiguous()", str(c.exception))
        with self.assertRaises(ValueError) as c:
            ft.check_tensors([("k", self.projection(ptr=0x7F0000000008))], views=True)
        self.assertIn("16-byte aligned", str(c.exception))
        # Without views, the same view is refused as before: contiguous tensors only.
        with self.assertRaises(ValueError) as c:
            ft.check_tensors([("q", self.projection())])
        self.assertIn("not contiguous", str(c.exception))

    def test_a_dimension_of_length_one_has_any_stride(self):
        # ... and is given a contiguous tensor's, so that a decode step's q (one row cut from
        # a fused qkv, its row stride 3·width) reads as the contiguous tensor it is.
        t = FakeTensor((1, 3, 1, 64), dtype="bfloat16", contiguous=False, strides=(5, 64, 3, 1))
        self.assertEqual(ft.view_strides(t), (3 * 64, 64, 64))

    def test_structs_are_the_headers(self):
        body = re.search(r"typedef\s+struct\s+ft_strides\s*\{(.*?)\}\s*ft_strides\s*;", header(), re.S)
        self.assertIsNotNone(body)
        self.assertEqual([n for n, _ in ft.Strides._fields_],
                         re.findall(r"int64_t\s+(\w+)\s*;", body.group(1)))
        body = re.search(r"typedef\s+struct\s+ft_layout\s*\{(.*?)\}\s*ft_layout\s*;", header(), re.S)
        names = re.search(r"ft_strides\s+([\w\s,]+);", body.group(1)).group(1)
        self.assertEqual([n for n, _ in ft.Layout._fields_], [x.strip() for x in names.split(",")])
        self.assertEqual(ctypes.sizeof(ft.Layout), 8 * 3 * 8)

    @need_lib
    def test_the_strided_passes_are_the_fastest_chapters(self):
        self.assertTrue(ft.forwards()["ch07"].strided)
        self.assertTrue(ft.backwards()["ch08"].strided)
        self.assertFalse(ft.forwards()["ch04"].strided)

    @need_lib
    def test_a_strided_call_checks_its_layout_first(self):
        p = ft.problem(2, 3, 64, 64, dtype=ft.DTYPE_BF16)
        layout = ft.Layout()
        for name in ("Q", "K", "V", "O"):
            setattr(layout, name, ft.Strides(3 * 64 * 64, 64 * 64, 64))
        layout.K.row = 68  # rows 136 bytes apart
        fake = 0x10000
        rc = ft.load().ft_forward_strided(b"ch07", p, ctypes.byref(layout), fake, fake, fake,
                                          fake, fake, None, None)
        self.assertEqual(rc, -1)
        self.assertIn("K's strides", ft.last_error())


class FunctionTable(unittest.TestCase):
    def test_every_declared_function_is_declared_for_ctypes_with_its_arity(self):
        protos = prototypes(header())
        self.assertIn("ft_forward", protos)
        for name, (ret, args) in protos.items():
            self.assertIn(name, ft.SIGNATURES, f"{name} is in flashtut.h, not in flashtut.SIGNATURES")
            restype, argtypes = ft.SIGNATURES[name]
            self.assertEqual(len(argtypes), len(args), name)
            if ret in CTYPE:
                self.assertIs(restype, CTYPE[ret], name)
        for name in ("ft_forward", "ft_backward", "ft_forward_strided", "ft_backward_strided"):
            self.assertIs(ft.SIGNATURES[name][1][0], ctypes.c_char_p, name)  # the impl's name
            self.assertIs(ft.SIGNATURES[name][1][1], ft.Problem, name)

    def test_the_parser_sees_the_declarations_it_should(self):
        protos = prototypes(header())
        self.assertEqual(protos["ft_last_error"], ("const char*", []))
        self.assertEqual(protos["ft_problem_size"], ("size_t", []))
        self.assertEqual(len(protos["ft_backward"][1]), 13)
        self.assertNotIn("ft_ch07_forward", protos)  # no chapter's name in the header

    def test_the_info_struct_is_the_headers(self):
        body = re.search(r"typedef\s+struct\s+ft_impl_info\s*\{(.*?)\}\s*ft_impl_info\s*;", header(), re.S)
        self.assertIsNotNone(body)
        names = re.findall(r"(\w+)\s*(?:\[\d+\])?\s*;", body.group(1))
        self.assertEqual([n.rstrip("_") for n, _ in ft.ImplInfo._fields_], names)

    @need_lib
    def test_the_list_is_the_librarys_registry(self):
        impls = ft.implementations()
        self.assertEqual(len(impls), ft.load().ft_impl_count())
        names = [(i.kind, i.name) for i in impls]
        self.assertEqual(len(names), len(set(names)))
        # Every chapter folder of the tree registers implementations, and nothing else does.
        folders = {n[:2] for n in os.listdir(os.path.join(ROOT, "chapters"))
                   if re.match(r"\d\d_", n) and os.path.exists(os.path.join(ROOT, "chapters", n, "CMakeLists.txt"))}
        self.assertEqual({i.chapter for i in impls}, folders)
        for impl in impls:
            self.assertEqual(impl.name, f"ch{impl.chapter}_{impl.variant}")
            self.assertTrue(impl.dtypes, impl.name)
            if impl.kind == "backward":
                self.assertIn(impl.pairs_with, ft.forwards(), impl.name)
            else:
                self.assertEqual(impl.pairs_with, "", impl.name)
        # The chapters' aliases name the implementations they recommend.
        self.assertEqual(ft.forwards()["ch07"].name, "ch07_fastest")
        self.assertEqual(ft.forwards()["ch04"].name, "ch04_fast")
        self.assertEqual(ft.backwards()["ch05"].name, "ch05_flash")
        self.assertEqual(ft.backwards()["ch08"].pairs_with, "ch07_fastest")
        self.assertEqual(ft.backwards()["ch05_materialize"].pairs_with, "ch05_materialize_forward")
        self.assertEqual(ft.forwards()["ch07"].head_dims, (64, 128))
        self.assertEqual(ft.forwards()["ch07"].dtypes, (ft.DTYPE_BF16, ft.DTYPE_FP16))
        self.assertTrue(ft.forwards()["ch07"].lengths and ft.forwards()["ch07"].grouped)
        self.assertFalse(ft.forwards()["ch04"].lengths)
        self.assertIn("ch04", ft.available())
        self.assertIn("ch05", ft.available("backward"))
        # The tour's forward steps in chapter order, chapters 01-07's as the staircase began.
        self.assertEqual([i.name for i in impls if i.tour and i.kind == "forward"][:7],
                         ["ch01_naive", "ch02_tiled", "ch03_online", "ch04_simple", "ch04_fast",
                          "ch06_warp_rows", "ch07_fastest"])


class Loading(unittest.TestCase):
    def test_a_missing_library_says_how_to_build_it(self):
        with mock.patch.dict(os.environ, {"FLASHTUT_LIB": ""}):
            with mock.patch.object(ft, "_ROOT", "/nonexistent"):
                with self.assertRaises(ft.LibraryError) as c:
                    ft.library_path()
        self.assertIn("/nonexistent/build/common/libflashtut.so", str(c.exception))
        self.assertIn("cmake --workflow --preset test", str(c.exception))
        self.assertIn("FLASHTUT_LIB", str(c.exception))

    def test_the_environment_variable_is_named_when_it_points_nowhere(self):
        with mock.patch.dict(os.environ, {"FLASHTUT_LIB": "/nonexistent/lib.so"}):
            with self.assertRaises(ft.LibraryError) as c:
                ft.library_path()
            self.assertIn("FLASHTUT_LIB", str(c.exception))
            self.assertIn("/nonexistent/lib.so", str(c.exception))
            self.assertEqual(ft.library_path(LIB), os.path.abspath(LIB))  # a path wins

    def build(self, source):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler to build a stand-in library")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        src, lib = os.path.join(tmp, "fake.c"), os.path.join(tmp, "libfake.so")
        with open(src, "w") as fh:
            fh.write("#include <stddef.h>\n" + source)
        subprocess.run([cc, "-shared", "-fPIC", "-o", lib, src], check=True)
        return lib

    def test_another_api_version_is_refused(self):
        lib = self.build("int ft_api_version(void) { return 1; }\n"
                         "size_t ft_problem_size(void) { return 28; }\n"
                         "const char* ft_last_error(void) { return \"\"; }\n")
        with self.assertRaises(ft.LibraryError) as c:
            ft.load(lib)
        self.assertIn(f"C API version 1, this module version {ft.API_VERSION}", str(c.exception))
        self.assertIn("rebuild the library", str(c.exception))

    def test_another_struct_size_is_refused(self):
        lib = self.build("int ft_api_version(void) { return %d; }\n"
                         "size_t ft_problem_size(void) { return 36; }\n" % ft.API_VERSION +
                         "const char* ft_last_error(void) { return \"\"; }\n")
        with self.assertRaises(ft.LibraryError) as c:
            ft.load(lib)
        self.assertIn("sizeof(ft_problem) is 36 bytes in the library but 40", str(c.exception))

    def test_a_foreign_library_is_refused(self):
        lib = self.build("int something_else(void) { return 0; }\n")
        with self.assertRaises(ft.LibraryError) as c:
            ft.load(lib)
        self.assertIn("is not libflashtut", str(c.exception))

    @need_lib
    def test_a_library_without_a_function_says_so(self):
        with mock.patch.object(ft, "_lib", object()), mock.patch.object(ft, "_lib_path", "/x/lib.so"):
            with self.assertRaises(ft.LibraryError) as c:
                ft._function("ft_forward")
        self.assertIn("/x/lib.so does not export ft_forward: rebuild the library", str(c.exception))


class DecodeSteps(unittest.TestCase):
    """flashtut.decodes: which forwards are the decode steps chapter 11 computes."""

    def test_a_few_new_rows_against_a_longer_cache(self):
        for n_q in (1, 4, ft.DECODE_MAX_ROWS):
            self.assertTrue(ft.decodes(n_q, 4096, causal=False), n_q)
            self.assertTrue(ft.decodes(n_q, n_q + 1, causal=True, causal_align=ft.CAUSAL_BOTTOM_RIGHT), n_q)
            self.assertTrue(ft.decodes(n_q, 4096, True, "bottom-right"), n_q)

    def test_what_is_not_a_decode_step(self):
        self.assertFalse(ft.decodes(ft.DECODE_MAX_ROWS + 1, 4096, causal=False))  # a prefill
        self.assertFalse(ft.decodes(8, 8, causal=False))                          # no cache before
        self.assertFalse(ft.decodes(4, 2, causal=False))
        self.assertFalse(ft.decodes(0, 4096, causal=False))
        # SDPA's is_causal (top-left) with a longer cache: row i sees keys 0..i, not the cache
        self.assertFalse(ft.decodes(1, 4096, causal=True))
        self.assertFalse(ft.decodes(4, 4096, causal=True, causal_align=ft.CAUSAL_TOP_LEFT))

    def test_an_alignment_that_is_none_is_refused(self):
        with self.assertRaisesRegex(ValueError, "causal_align must be"):
            ft.decodes(1, 4096, True, "middle")


@need_lib
class Workspace(unittest.TestCase):
    def test_the_error_sentinel_becomes_an_exception_with_the_librarys_reason(self):
        bad = ft.problem(2, 3, 0, 64)  # len_q (and len_kv) 0
        self.assertEqual(ft.load().ft_forward_workspace_bytes(b"ch04", bad), ft.WORKSPACE_ERROR)
        with self.assertRaises(ft.FlashtutError) as c:
            ft.workspace_bytes("ch04", bad)
        self.assertIsNone(c.exception.code)
        self.assertEqual(c.exception.function, "ft_forward_workspace_bytes")
        self.assertIn("len_q must be in [1, 16777216], got 0", str(c.exception))
        self.assertIsInstance(c.exception, RuntimeError)

    def test_unsupported_head_dim_and_dtype(self):
        with self.assertRaisesRegex(ft.FlashtutError, r"chapter 04 \(fast\) does not support head_dim 48"):
            ft.workspace_bytes("ch04", ft.problem(1, 1, 64, 48))
        with self.assertRaisesRegex(ft.FlashtutError, r"chapter 05 \(flash\) does not support dtype bf16"):
            ft.workspace_bytes("ch05", ft.problem(1, 1, 64, 64, dtype=ft.DTYPE_BF16), "backward")
        if "ch07" in ft.available():
            with self.assertRaisesRegex(ft.FlashtutError, "does not support dtype float32"):
                ft.workspace_bytes("ch07", ft.problem(1, 1, 64, 64))

    def test_the_decode_takes_as_many_query_rows_as_decodes_says(self):
        # flashtut.ops hands chapter 11 the steps flashtut.decodes calls decode steps: its
        # limit must be the library's, whose workspace query refuses one row more.
        step = lambda n_q: ft.problem(2, 32, n_q, 128, dtype=ft.DTYPE_BF16, heads_kv=8, len_kv=4096,
                                      causal=True, causal_align=ft.CAUSAL_BOTTOM_RIGHT)
        self.assertGreater(ft.workspace_bytes(ft.DECODE_IMPL, step(ft.DECODE_MAX_ROWS)), 0)
        with self.assertRaisesRegex(ft.FlashtutError, f"at most {ft.DECODE_MAX_ROWS} query rows"):
            ft.workspace_bytes(ft.DECODE_IMPL, step(ft.DECODE_MAX_ROWS + 1))

    def test_zero_is_a_true_answer(self):
        self.assertEqual(ft.workspace_bytes("ch04", ft.problem(2, 3, 64, 64)), 0)
        self.assertGreater(ft.workspace_bytes("ch01", ft.problem(2, 3, 64, 64)), 0)

    def test_a_pass_refuses_an_unsupported_problem_before_needing_torch(self):
        with self.assertRaisesRegex(ft.FlashtutError, "head_dim 48"):
            ft.forward(*qkv(shape=(1, 2, 64, 48)), impl="ch04")
        if "ch07" in ft.available():
            with self.assertRaisesRegex(ft.FlashtutError, "head_dim 32"):
                ft.forward(*qkv(shape=(1, 2, 64, 32), dtype="bfloat16"), impl="ch07")

    @unittest.skipIf(HAVE_TORCH, "PyTorch is installed here")
    def test_without_torch_a_valid_call_says_what_is_missing(self):
        with self.assertRaisesRegex(ImportError, r"pip install torch"):
            ft.forward(*qkv(), impl="ch04")


class Checks(unittest.TestCase):
    """The messages: each says what is wrong and what to call instead."""

    def raises(self, exc, text, fn, *args, **kw):
        with self.assertRaises(exc) as c:
            fn(*args, **kw)
        self.assertIn(text, str(c.exception))

    def test_a_good_set_passes(self):
        self.assertEqual(ft.check_tensors([("q", FakeTensor(dtype="bfloat16"))]), ft.DTYPE_BF16)
        q, k, v = qkv(dtype="float16")
        self.assertEqual(ft.check_tensors([("q", q), ("k", k), ("v", v)],
                                          dtypes=(ft.DTYPE_BF16, ft.DTYPE_FP16)), ft.DTYPE_FP16)

    def test_not_a_tensor(self):
        self.raises(TypeError, "q must be a torch.Tensor, got list", ft.forward, [1], [2], [3])

    def test_wrong_device(self):
        self.raises(ValueError, "q is on cpu, the kernels run on a CUDA device: pass q.cuda()",
                    ft.forward, *qkv(device="cpu"))
        q, k, v = qkv(dtype="bfloat16")
        k.device = FakeDevice("cuda:1")
        self.raises(ValueError, "k is on cuda:1 but q on cuda:0", ft.forward, q, k, v)

    def test_wrong_rank(self):
        self.raises(ValueError, "q has shape (3, 64, 64): expected 4 dimensions, "
                                "[batch, heads, seq_len, head_dim]",
                    ft.forward, *qkv(shape=(3, 64, 64), dtype="bfloat16"))

    def test_wrong_dtype(self):
        self.raises(TypeError, "chapter 07 computes bf16 or fp16: got torch.float32: "
                               "pass q.bfloat16() or q.half()", ft.forward, *qkv(dtype="float32"))
        self.raises(TypeError, "chapter 04 computes float32: got torch.bfloat16: pass q.float()",
                    ft.forward, *qkv(dtype="bfloat16"), impl="ch04")
        self.raises(TypeError, "chapter 04 (simple) computes float32",
                    ft.forward, *qkv(dtype="bfloat16"), impl="ch04_simple")
        self.raises(TypeError, "q is torch.float64: the library computes in torch.float32, "
                               "torch.bfloat16 or torch.float16", ft.forward, *qkv(dtype="float64"))
        self.raises(TypeError, "chapter 05 computes float32: got torch.float16",
                    ft.backward, *qkv(dtype="float16"), FakeTensor(dtype="float16"),
                    FakeTensor(shape=(2, 3, 64)), FakeTensor(dtype="float16"))

    def test_mixed_dtypes_and_shapes(self):
        q, k, v = qkv(dtype="bfloat16")
        k.dtype = FakeDtype("float16")
        self.raises(TypeError, "k is torch.float16 but q is torch.bfloat16: give q and k the "
                               "same dtype", ft.forward, q, k, v)
        q, k, v = qkv(dtype="bfloat16")
        v.shape = (2, 3, 65, 64)
        self.raises(ValueError, "v has shape (2, 3, 65, 64) but k (2, 3, 64, 64)", ft.forward, q, k, v)

    def test_the_key_value_side_has_its_own_length_and_heads(self):
        # k and v: [batch, heads_kv, len_kv, head_dim], heads_kv dividing q's heads.
        q = FakeTensor((2, 6, 64, 64), dtype="bfloat16")
        k, v = (FakeTensor((2, 2, 300, 64), dtype="bfloat16") for _ in range(2))
        self.assertEqual(ft.check_tensors([("q", q), ("k", k), ("v", v)]), ft.DTYPE_BF16)
        for shape, why in (((2, 4, 300, 64), "heads_kv dividing its 6 heads"),
                           ((1, 2, 300, 64), "q's batch 2"),
                           ((2, 2, 300, 128), "head_dim 64")):
            bad = FakeTensor(shape, dtype="bfloat16")
            self.raises(ValueError, why, ft.check_tensors, [("q", q), ("k", bad), ("v", bad)])
        self.raises(ValueError, "causal_align must be flashtut.CAUSAL_TOP_LEFT",
                    ft.forward, q, k, v, causal_align="middle")

    def test_not_contiguous(self):
        # Chapter 04 reads contiguous tensors only; chapter 07 reads views, but not every view.
        self.raises(ValueError, "q is not contiguous: call q.contiguous()",
                    ft.forward, *qkv(contiguous=False), impl="ch04")
        q, k, v = qkv()
        v._contiguous = False
        self.raises(ValueError, "v is not contiguous: call v.contiguous()", ft.forward, q, k, v,
                    impl="ch04")
        q, k, v = qkv(dtype="bfloat16")
        v._contiguous, v._strides = False, (12288, 4096, 64, 2)  # head_dim not contiguous
        self.raises(ValueError, "v has strides (12288, 4096, 64, 2)", ft.forward, q, k, v)

    def test_misaligned(self):
        self.raises(ValueError, "q.data_ptr() is not 16-byte aligned (a view into a larger "
                                "tensor?): pass q.clone()",
                    ft.forward, *qkv(dtype="bfloat16", ptr=0x7F0000000008))
        q, k, v = qkv(dtype="bfloat16")
        k._ptr += 2  # a bf16 view one element in
        self.raises(ValueError, "k.data_ptr() is not 16-byte aligned", ft.forward, q, k, v)

    def test_unknown_impl(self):
        self.raises(ValueError, "unknown forward impl 'ch9': choose one of ch01_naive, ch01, ch02",
                    ft.forward, *qkv(dtype="bfloat16"), impl="ch9")
        self.raises(ValueError, "unknown backward impl 'ch07'", ft.backward, *qkv(), None, None, None,
                    impl="ch07")

    def test_backward_checks_every_tensor_and_lse(self):
        q, k, v = qkv()
        o, do = FakeTensor(), FakeTensor()
        lse = FakeTensor(shape=(2, 3, 64))
        do._contiguous = False
        self.raises(ValueError, "do is not contiguous: call do.contiguous()",
                    ft.backward, q, k, v, o, lse, do)
        do = FakeTensor()
        self.raises(TypeError, "lse is torch.bfloat16: the log-sum-exp is float32",
                    ft.backward, q, k, v, o, FakeTensor(shape=(2, 3, 64), dtype="bfloat16"), do)
        self.raises(ValueError, "lse has shape (2, 3, 64, 64): expected (2, 3, 64), "
                                "[batch, heads, seq_len]", ft.backward, q, k, v, o, FakeTensor(), do)
        self.raises(ValueError, "lse.data_ptr() is not 16-byte aligned",
                    ft.backward, q, k, v, o, FakeTensor(shape=(2, 3, 64), ptr=0x7F0000000004), do)
        self.raises(TypeError, "o is torch.float16 but q is torch.float32",
                    ft.backward, q, k, v, FakeTensor(dtype="float16"), lse, do)

    def test_row_softmax_checks(self):
        self.raises(TypeError, "chapter 03's row softmax computes float32: got torch.bfloat16",
                    ft.row_softmax, FakeTensor(shape=(4, 8), dtype="bfloat16"))
        self.raises(ValueError, "x is not contiguous", ft.row_softmax,
                    FakeTensor(shape=(4, 8), contiguous=False))
        self.raises(ValueError, "unknown variant 'fast'", ft.row_softmax, FakeTensor(), variant="fast")

    def test_problem_of_the_struct(self):
        p = ft.problem(4, 16, 4096, 128, causal=True)
        self.assertEqual((p.batch, p.heads_q, p.heads_kv, p.len_q, p.len_kv, p.head_dim, p.causal,
                          p.causal_align, p.scale, p.dtype),
                         (4, 16, 16, 4096, 4096, 128, 1, ft.CAUSAL_TOP_LEFT, 0.0, ft.DTYPE_FLOAT32))
        self.assertAlmostEqual(ft.problem(1, 1, 1, 64, scale=0.125).scale, 0.125)
        self.assertIn("len_q=4096", repr(p))
        g = ft.problem(1, 32, 4, 128, heads_kv=8, len_kv=8192, causal_align=ft.CAUSAL_BOTTOM_RIGHT)
        self.assertEqual((g.heads_q, g.heads_kv, g.len_q, g.len_kv, g.causal_align),
                         (32, 8, 4, 8192, ft.CAUSAL_BOTTOM_RIGHT))

    def test_sizes_a_c_int_cannot_hold_are_refused_not_wrapped(self):
        # ctypes would store 2**32 + 128 in ft_problem's int len_q as 128, without a word.
        self.assertEqual(ft.INT_MAX, 2**31 - 1)
        self.raises(ValueError, "seq_len is 4294967424, more than 2147483647 (2**31 - 1)",
                    ft.problem, 1, 1, 2**32 + 128, 64)
        for kw, name in (({"batch": 2**31}, "batch"), ({"heads": 2**31}, "heads"),
                         ({"head_dim": 2**32 + 64}, "head_dim"),
                         ({"heads_kv": 2**32 + 1}, "heads_kv"), ({"len_kv": 2**31}, "len_kv")):
            args = {"batch": 1, "heads": 1, "seq_len": 64, "head_dim": 64, **kw}
            self.raises(ValueError, f"pass a smaller {name}", ft.problem, **args)
        self.raises(ValueError, "seq_len is -4294967168: a size cannot be negative",
                    ft.problem, 1, 1, -2**32 + 128, 64)
        self.raises(TypeError, "head_dim must be an integer, got 64.5", ft.problem, 1, 1, 64, 64.5)
        self.raises(ValueError, "dtype must be flashtut.DTYPE_FLOAT32, DTYPE_BF16 or DTYPE_FP16",
                    ft.problem, 1, 1, 64, 64, dtype=2**32 + 1)
        self.raises(ValueError, "causal_align must be flashtut.CAUSAL_TOP_LEFT",
                    ft.problem, 1, 1, 64, 64, causal_align=2**32 + 1)
        self.assertEqual(ft.problem(1, 1, ft.INT_MAX, 64).len_q, ft.INT_MAX)  # the largest fits
        self.assertEqual(ft.problem(1, 1, 64, 64, causal_align="bottom-right").causal_align,
                         ft.CAUSAL_BOTTOM_RIGHT)

    def test_tensors_with_sizes_a_c_int_cannot_hold_are_refused(self):
        self.raises(ValueError, "q has shape (1, 1, 4294967312, 1): its seq_len 4294967312 is "
                                "more than 2147483647", ft.forward, *qkv(shape=(1, 1, 2**32 + 16, 1)),
                    impl="ch04")
        q, kv = FakeTensor((1, 1, 16, 64)), FakeTensor((1, 1, 2**31, 64))
        self.raises(ValueError, "k has shape (1, 1, 2147483648, 64): its len_kv 2147483648",
                    ft.check_tensors, [("q", q), ("k", kv), ("v", kv)])
        self.raises(ValueError, "x has 4294967296 columns, more than 2147483647",
                    ft.row_softmax, FakeTensor(shape=(2, 2**32)))

    def test_scale_must_be_a_number(self):
        for bad in ("x", "0.5", [0.5]):
            self.raises(TypeError, f"scale must be a number (or None for 1/sqrt(head_dim)), "
                                   f"got {bad!r}", ft.forward, *qkv(), scale=bad, impl="ch04")
        self.raises(TypeError, "scale must be a number", ft.backward, *qkv(), FakeTensor(),
                    FakeTensor(shape=(2, 3, 64)), FakeTensor(), scale="x")
        self.raises(TypeError, "scale must be a number", ft.problem, 1, 1, 64, 64, scale="x")

    def test_workspace_bytes_names_its_bad_arguments(self):
        p = ft.problem(1, 1, 64, 64)
        self.raises(TypeError, "impl must be an implementation's name, a str such as 'ch07'",
                    ft.workspace_bytes, None, p)
        self.raises(ValueError, "kind must be 'forward' or 'backward', got 'sideways'",
                    ft.workspace_bytes, "ch04", p, "sideways")
        self.raises(ValueError, "kind must be 'forward' or 'backward'", ft.available, "sideways")
        self.raises(TypeError, "prob must be a flashtut.Problem (make one with "
                               "flashtut.problem()), got tuple", ft.workspace_bytes, "ch04", (1, 1))

    def test_an_impl_that_is_no_name(self):
        self.raises(ValueError, "unknown forward impl [4]", ft.forward, *qkv(), impl=[4])
        self.raises(ValueError, "unknown backward impl None", ft.backward, *qkv(), FakeTensor(),
                    FakeTensor(shape=(2, 3, 64)), FakeTensor(), impl=None)


class Reached(Exception):
    """Raised by the stand-in for flashtut._torch: the checks passed and torch came next."""


@need_lib
class KeptCalls(unittest.TestCase):
    """A pass works its problem out once (the full checks, the struct, the workspace query)
    and keeps it; later calls of that problem check each tensor against it and take the full
    path, with its messages, as soon as one differs. What is pinned here is that: not a time."""

    def setUp(self):
        ft._FORWARD_CALLS.clear()
        ft._BACKWARD_CALLS.clear()
        self.dtype, self.device = FakeDtype("float32"), FakeDevice("cuda:0")
        self.checks = mock.patch.object(ft, "check_tensors", wraps=ft.check_tensors)
        self.queries = mock.patch.object(ft, "workspace_bytes", wraps=ft.workspace_bytes)
        for p in (self.checks, self.queries, mock.patch.object(ft, "_torch", side_effect=Reached)):
            p.start()
            self.addCleanup(p.stop)
        self.addCleanup(ft._FORWARD_CALLS.clear)
        self.addCleanup(ft._BACKWARD_CALLS.clear)

    def tensor(self, shape=(2, 3, 64, 64), **kw):
        # One dtype and one device object for all, as torch has: the kept problem's key.
        t = FakeTensor(shape=shape, **kw)
        t.dtype, t.device = self.dtype, self.device
        return t

    def qkv(self):
        return self.tensor(), self.tensor(), self.tensor()

    def forward(self, *tensors, **kw):
        with self.assertRaises(Reached):
            ft.forward(*tensors, impl="ch04", **kw)

    def counts(self):
        return ft.check_tensors.call_count, ft.workspace_bytes.call_count

    def test_the_problem_is_worked_out_once(self):
        self.forward(*self.qkv(), causal=True)
        self.assertEqual(self.counts(), (1, 1))
        self.forward(*self.qkv(), causal=True)  # new tensors, the same problem
        self.forward(*self.qkv(), causal=1)     # the same causal, spelled otherwise
        self.assertEqual(self.counts(), (1, 1))
        (call,) = ft._FORWARD_CALLS.values()
        self.assertEqual((call.prob.batch, call.prob.len_q, call.prob.causal), (2, 64, 1))
        self.assertEqual((call.function, call.impl), ("ft_forward", b"ch04_fast"))

    def test_another_problem_is_worked_out_again(self):
        self.forward(*self.qkv(), causal=True)
        self.forward(*self.qkv(), causal=False)
        self.forward(*self.qkv(), causal=True, scale=0.5)
        self.forward(self.tensor((2, 3, 32, 64)), self.tensor((2, 3, 32, 64)),
                     self.tensor((2, 3, 32, 64)), causal=True)
        self.assertEqual(self.counts(), (4, 4))
        self.assertEqual(len(ft._FORWARD_CALLS), 4)

    def test_a_kept_problem_still_refuses_what_is_wrong(self):
        self.forward(*self.qkv(), causal=True)

        def raises(exc, text, *tensors):
            with self.assertRaises(exc) as c:
                ft.forward(*tensors, causal=True, impl="ch04")
            self.assertIn(text, str(c.exception))

        q, k, v = self.qkv()
        k._contiguous = False
        raises(ValueError, "k is not contiguous: call k.contiguous()", q, k, v)
        q, k, v = self.qkv()
        v._ptr += 4
        raises(ValueError, "v.data_ptr() is not 16-byte aligned", q, k, v)
        q, k, v = self.qkv()
        k.dtype = FakeDtype("bfloat16")
        raises(TypeError, "k is torch.bfloat16 but q is torch.float32", q, k, v)
        q, k, v = self.qkv()
        v.device = FakeDevice("cuda:1")
        raises(ValueError, "v is on cuda:1 but q on cuda:0", q, k, v)
        q, k, v = self.qkv()
        v.device = FakeDevice("cpu")
        raises(ValueError, "v is on cpu, the kernels run on a CUDA device", q, k, v)
        q, k, v = self.qkv()
        v.shape = (2, 3, 65, 64)
        raises(ValueError, "v has shape (2, 3, 65, 64) but k (2, 3, 64, 64)", q, k, v)
        q, _, v = self.qkv()
        raises(TypeError, "k must be a torch.Tensor, got list", q, [1], v)
        q, k, v = self.qkv()
        q._contiguous = False
        raises(ValueError, "q is not contiguous", q, k, v)
        self.assertEqual(len(ft._FORWARD_CALLS), 1)  # and nothing wrong was kept

    def test_backward_checks_lse_against_the_kept_problem(self):
        lse = lambda **kw: self.tensor((2, 3, 64), **kw)  # noqa: E731
        q, k, v = self.qkv()
        with self.assertRaises(Reached):
            ft.backward(q, k, v, self.tensor(), lse(), self.tensor(), causal=True)
        with self.assertRaises(Reached):
            ft.backward(q, k, v, self.tensor(), lse(), self.tensor(), causal=True)
        # One check, two workspace queries: the backward's and its paired forward's (a
        # forward that keeps P in its workspace must run into the backward's first).
        self.assertEqual(self.counts(), (1, 2))
        bad = lse()
        bad.dtype = FakeDtype("bfloat16")
        with self.assertRaisesRegex(TypeError, "lse is torch.bfloat16: the log-sum-exp is float32"):
            ft.backward(q, k, v, self.tensor(), bad, self.tensor(), causal=True)
        with self.assertRaisesRegex(ValueError, "lse.data_ptr\\(\\) is not 16-byte aligned"):
            ft.backward(q, k, v, self.tensor(), lse(ptr=0x7F0000000004), self.tensor(), causal=True)
        with self.assertRaisesRegex(ValueError, "expected \\(2, 3, 64\\)"):
            ft.backward(q, k, v, self.tensor(), self.tensor((2, 3, 63)), self.tensor(), causal=True)
        with self.assertRaisesRegex(ValueError, "do is not contiguous"):
            ft.backward(q, k, v, self.tensor(), lse(), self.tensor(contiguous=False), causal=True)

    def test_a_refused_problem_is_not_kept(self):
        q, k, v = (self.tensor((1, 2, 64, 48)) for _ in range(3))
        for _ in range(2):  # the library refuses head_dim 48 each time, asked each time
            with self.assertRaisesRegex(ft.FlashtutError, "head_dim 48"):
                ft.forward(q, k, v, impl="ch04")
        self.assertEqual(self.counts(), (2, 2))
        self.assertEqual(len(ft._FORWARD_CALLS), 0)

    def test_loading_a_library_forgets_what_was_kept(self):
        self.forward(*self.qkv())
        with mock.patch.object(ft, "_lib", None):
            ft.load(LIB)
        self.assertEqual(len(ft._FORWARD_CALLS), 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--lib", help="libflashtut.so to test against (default: $FLASHTUT_LIB, "
                                  "else build/common/libflashtut.so)")
    args, rest = ap.parse_known_args()
    if args.lib:
        LIB = args.lib
    unittest.main(argv=[sys.argv[0]] + rest)
