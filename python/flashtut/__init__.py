"""The tutorial's kernels, called from PyTorch: a thin ctypes layer over libflashtut.so.

Every chapter's kernels are compiled into one shared library, ``build/common/libflashtut.so``,
with a plain C API (``common/api/flashtut.h``; its conventions are contract 5 of
``docs/contracts.md``). This module loads that library with :mod:`ctypes`, declares the
header's functions, reads the list of implementations the chapters registered
(:func:`implementations`, :func:`forwards`, :func:`backwards`: nothing here names a chapter's
function), and wraps the attention passes for torch tensors::

    import torch, flashtut
    q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    o, lse = flashtut.forward(q, k, v, causal=True)            # chapter 07, tensor cores
    q32, k32, v32 = q.float(), k.float(), v.float()
    o32, lse32 = flashtut.forward(q32, k32, v32, causal=True, impl="ch04")
    dq, dk, dv = flashtut.backward(q32, k32, v32, o32, lse32, torch.randn_like(o32),
                                   causal=True)                 # chapter 05, flash backward

What happens in one call, in order (each step is a function below, so you can read it alone):

1. :func:`check_tensors` looks at the tensors' dtype, shape, device, layout and address,
   using only ``.dtype``, ``.shape``, ``.device``, ``.is_contiguous()`` and ``.data_ptr()``
   (and, for an implementation that reads views, ``.stride()`` and ``.element_size()``:
   :func:`view_strides`), and raises a :class:`TypeError` or :class:`ValueError` that says what to change. The
   library would refuse most of these too, but later and with less to go on; a misaligned
   pointer in particular is the mistake a view into a larger tensor makes silently.
2. :func:`problem` fills the C struct ``ft_problem`` (a :class:`Problem`).
3. :func:`workspace_bytes` asks the library how much scratch memory the implementation needs
   (``FT_WORKSPACE_ERROR`` becomes a :class:`FlashtutError` carrying ``ft_last_error()``:
   an unsupported head dimension is found here, before anything is allocated).
4. The outputs and the workspace are allocated with ``new_empty`` on the inputs' device
   (the outputs as ``[B, N, H, d]`` memory when q is a view whose heads lie inside its
   tokens). The library allocates nothing itself.
5. The C function (``ft_forward`` or ``ft_backward``, with the implementation's name) is
   called with the tensors' device addresses (and, for views, a :class:`Layout` of their
   strides, through its ``*_strided`` twin) and PyTorch's current stream, so the kernels queue behind whatever PyTorch queued before; a nonzero return
   becomes a :class:`FlashtutError` (a :class:`RuntimeError`) with ``ft_last_error()``.

Steps 1 to 3 depend only on the problem (impl, shape, dtype, device, causal, scale, and
the strides of views), so a pass does them in full the first time it sees a problem and
keeps what they produced; later calls of that problem check each tensor against it (same
shape, dtype and device, contiguous or the kept strides, aligned: a comparison each) and go back to step 1, with its messages, at the
first difference (``_Call`` below says more). On the CPU machine of ``python/README.md``
this took a call's Python and ctypes time from 28 to 8.3 µs (forward) and from 45 to 11 µs
(backward), with a stub library (``python/tests/bench_overhead.py``).

Nothing here imports torch at module level: the ctypes declarations and the checks work
(and are tested, ``python/tests/test_flashtut.py``) on a machine with neither PyTorch nor a
GPU. torch is imported in step 4.

Which library: :func:`load` (called for you by the first pass) takes an explicit path, else
the environment variable ``FLASHTUT_LIB``, else the library inside the installed package
(``pip install .``), else ``build/common/libflashtut.so`` of the checkout this file lives in. It refuses a library whose ``ft_api_version()`` or
``ft_problem_size()`` differs from what this module was written for.

These are plain functions, not autograd: ``o`` does not remember how it was computed. The
autograd version is the module next to this one, ``flashtut.autograd`` (it imports torch, so
it is loaded only when asked for: ``import flashtut.autograd``, or the attribute
``flashtut.autograd``): :func:`flashtut.autograd.attention` is
``torch.nn.functional.scaled_dot_product_attention``'s call (``[B, H, N, d]``,
``is_causal``, ``scale``) computed by chapter 09's forward and chapter 10's backward on a Hopper GPU
(chapters 07 and 08 on any other), with
the inputs' checks done before the library is touched::

    import flashtut.autograd as fa
    o = fa.attention(q, k, v, is_causal=True)   # bf16/fp16 CUDA tensors, d = 64 or 128
    o.sum().backward()                          # q.grad, k.grad, v.grad: chapter 10 (08 off Hopper)
"""
import ctypes
import operator
import os
from collections import namedtuple

#: The package's version: its major.minor follow the C API version it speaks (API_VERSION).
__version__ = "0.4.0"

__all__ = [
    "__version__", "API_VERSION", "ALIGNMENT", "INT_MAX", "WORKSPACE_ERROR",
    "DTYPE_FLOAT32", "DTYPE_BF16", "DTYPE_FP16",
    "CAUSAL_TOP_LEFT", "CAUSAL_BOTTOM_RIGHT",
    "Problem", "Strides", "Layout", "ImplInfo", "Impl", "FlashtutError", "LibraryError", "SIGNATURES",
    "library_path", "load", "implementations", "forwards", "backwards", "available", "last_error",
    "forward_for", "backward_for", "decodes", "DECODE_IMPL", "DECODE_MAX_ROWS",
    "problem", "workspace_bytes",
    "check_tensors", "view_strides", "forward", "backward", "row_softmax",
]

# ---- What flashtut.h says ------------------------------------------------------------------

API_VERSION = 4               #: FT_API_VERSION: the header this module was written against
ALIGNMENT = 16                #: FT_ALIGNMENT: every pointer must be a multiple of this
WORKSPACE_ERROR = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1  #: FT_WORKSPACE_ERROR, SIZE_MAX
DTYPE_FLOAT32, DTYPE_BF16, DTYPE_FP16 = 0, 1, 2  #: enum ft_dtype
CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1      #: enum ft_causal_align

# torch's names of the three element types (str(torch.bfloat16) == "torch.bfloat16"), the
# enum value each maps to, and the repository's name for it (docs/contracts.md, contract 1).
# Comparing names instead of torch objects keeps torch out of the checks.
_DTYPES = {"torch.float32": (DTYPE_FLOAT32, "float32"),
           "torch.bfloat16": (DTYPE_BF16, "bf16"),
           "torch.float16": (DTYPE_FP16, "fp16")}
_TORCH_NAME = {ft: name for name, (ft, _) in _DTYPES.items()}
_BY_INDEX = {ft: name for name, (ft, _) in _DTYPES.items()}
_CONVERT = {DTYPE_FLOAT32: ".float()", DTYPE_BF16: ".bfloat16()", DTYPE_FP16: ".half()"}


class Problem(ctypes.Structure):
    """``ft_problem``, field for field: the shape of one attention problem, passed by value.

    Queries ``[batch, heads_q, len_q, head_dim]``, keys and values ``[batch, heads_kv, len_kv,
    head_dim]``. ``scale`` 0 means 1/sqrt(head_dim); ``causal`` nonzero applies the causal
    mask, aligned as ``causal_align`` says (``CAUSAL_TOP_LEFT`` or ``CAUSAL_BOTTOM_RIGHT``);
    ``dtype`` is one of ``DTYPE_FLOAT32``, ``DTYPE_BF16``, ``DTYPE_FP16``. The order and the
    C types must be the header's exactly: ctypes lays the fields out as a C compiler would,
    and :func:`load` compares ``ctypes.sizeof(Problem)`` with the library's
    ``ft_problem_size()``.
    """
    _fields_ = [("batch", ctypes.c_int), ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int),
                ("len_q", ctypes.c_int), ("len_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("causal", ctypes.c_int), ("causal_align", ctypes.c_int),
                ("scale", ctypes.c_float), ("dtype", ctypes.c_int)]

    def __repr__(self):
        return ("Problem(" + ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._fields_) + ")")


class Strides(ctypes.Structure):
    """``ft_strides``: where one tensor's rows are, in elements (element (b, h, n, c) of a
    ``[batch, heads, seq_len, head_dim]`` tensor at b·batch + h·head + n·row + c): what
    ``t.stride()[:3]`` says of a torch tensor whose last dimension is contiguous."""
    _fields_ = [("batch", ctypes.c_int64), ("head", ctypes.c_int64), ("row", ctypes.c_int64)]


class Layout(ctypes.Structure):
    """``ft_layout``: the strides of every tensor of a pass (API version 3), for the
    ``*_strided`` functions, which read and write views (common/core/strides.hpp)."""
    _fields_ = [(name, Strides) for name in ("Q", "K", "V", "O", "dO", "dQ", "dK", "dV")]


# Every device pointer (const void*, void*, float*) and the cudaStream_t travel as
# c_void_p: ctypes never looks inside them, it passes the addresses PyTorch hands out. The
# implementation's name travels as a c_char_p (bytes).
_P, _NAME = ctypes.c_void_p, ctypes.c_char_p
_FORWARD_ARGTYPES = [_NAME, Problem, _P, _P, _P, _P, _P, _P, _P]  # Q K V O lse workspace stream
_BACKWARD_ARGTYPES = [_NAME, Problem] + [_P] * 11  # Q K V O lse dO dQ dK dV ws stream
_LAYOUT = ctypes.POINTER(Layout)  # the *_strided functions take it after the problem


class ImplInfo(ctypes.Structure):
    """``ft_impl_info``, field for field: one implementation as the library's registry
    lists it (API version 4)."""
    _fields_ = [("name", ctypes.c_char_p), ("alias", ctypes.c_char_p), ("pass_", ctypes.c_char_p),
                ("chapter", ctypes.c_char_p), ("variant", ctypes.c_char_p),
                ("what", ctypes.c_char_p), ("pairs_with", ctypes.c_char_p),
                ("dtypes", ctypes.c_uint), ("head_dims", ctypes.c_int * 8),
                ("num_head_dims", ctypes.c_int), ("min_sm", ctypes.c_int),
                ("lengths", ctypes.c_int), ("grouped", ctypes.c_int), ("strided", ctypes.c_int),
                ("tour", ctypes.c_int)]


Impl = namedtuple("Impl", "name alias kind chapter variant what pairs_with dtypes head_dims "
                          "min_sm lengths grouped strided tour")
Impl.__doc__ = """One implementation of the loaded library, as its registry lists it.

name: ``ch<chapter>_<variant>`` (the results files' name); alias: ``ch<chapter>`` for the
chapter's recommended forward or backward, else ""; kind: "forward" or "backward";
dtypes: the FT_DTYPE_* it computes in; head_dims: the head dimensions it computes (empty:
any from 1 to 1024); min_sm: the compute capability it needs ×10; lengths, grouped: whether
it computes len_q != len_kv and heads_kv < heads_q; strided: whether it reads views;
pairs_with: a backward's forward (the one whose O and lse it reads); tour: a step of the
tour's staircase."""

#: Every C function this module calls: name -> (restype, argtypes).
SIGNATURES = {
    "ft_api_version": (ctypes.c_int, []),
    "ft_problem_size": (ctypes.c_size_t, []),
    "ft_last_error": (ctypes.c_char_p, []),
    "ft_impl_count": (ctypes.c_int, []),
    "ft_impl_info_at": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ImplInfo)]),
    "ft_forward_workspace_bytes": (ctypes.c_size_t, [_NAME, Problem]),
    "ft_forward": (ctypes.c_int, _FORWARD_ARGTYPES),
    "ft_forward_strided": (ctypes.c_int, _FORWARD_ARGTYPES[:2] + [_LAYOUT] + _FORWARD_ARGTYPES[2:]),
    "ft_backward_workspace_bytes": (ctypes.c_size_t, [_NAME, Problem]),
    "ft_backward": (ctypes.c_int, _BACKWARD_ARGTYPES),
    "ft_backward_strided": (ctypes.c_int, _BACKWARD_ARGTYPES[:2] + [_LAYOUT] + _BACKWARD_ARGTYPES[2:]),
    # The float64 reference on the host: (problem, Q, K, V, O, lse) and (.., dO, dQ, dK, dV)
    "ft_reference_forward": (ctypes.c_int, [Problem] + [_P] * 5),
    "ft_reference_backward": (ctypes.c_int, [Problem] + [_P] * 7),
    # Chapter 03's row softmax (declared in its own header): (variant, in, out, rows, cols, stream)
    "ft_ch03_row_softmax": (ctypes.c_int, [ctypes.c_int, _P, _P, ctypes.c_int64, ctypes.c_int, _P]),
}
# The ones a library must export for this module to tell it is libflashtut and which version.
_REQUIRED = ("ft_api_version", "ft_problem_size", "ft_last_error")

# ---- Loading the library ----------------------------------------------------------------------


class LibraryError(RuntimeError):
    """The library cannot be found or loaded, is from another version of the API, or lacks
    the function an implementation needs."""


class FlashtutError(RuntimeError):
    """The library refused a problem or failed: ``function`` is the C function, ``code`` its
    return value (-1: refused, with the reason in the message; > 0: a cudaError_t; None: a
    workspace query that answered FT_WORKSPACE_ERROR)."""

    def __init__(self, function, code, message):
        self.function, self.code = function, code
        super().__init__(f"{function}: {message}" if message else
                         f"{function} returned {code} without a message")


_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))  # python/flashtut/ -> the repository
_BUILD_HINT = ("install the package with `pip install .` from the repository (it builds the "
               "library), or build it with `cmake --workflow --preset test` there, or set "
               "FLASHTUT_LIB to the library's path")
_lib = None       # the loaded ctypes.CDLL
_lib_path = None  # where it came from


def library_path(path=None):
    """Where :func:`load` looks: ``path`` if given, else ``$FLASHTUT_LIB``, else the library
    ``pip install .`` put inside this package, else ``build/common/libflashtut.so`` of the
    checkout this file lives in. Raises :class:`LibraryError` (saying how to build it) when
    that file does not exist."""
    packaged = os.path.join(_HERE, "libflashtut.so")
    if path:
        where, how = path, "the path given"
    elif os.environ.get("FLASHTUT_LIB"):
        where, how = os.environ["FLASHTUT_LIB"], "FLASHTUT_LIB"
    elif os.path.isfile(packaged):
        where, how = packaged, "the installed package's"
    else:
        where, how = os.path.join(_ROOT, "build", "common", "libflashtut.so"), "the default"
    where = os.path.abspath(where)
    if not os.path.isfile(where):
        raise LibraryError(f"libflashtut not found at {where} ({how}): {_BUILD_HINT}")
    return where


def _declare(lib):
    """Sets argtypes and restype of every function of SIGNATURES the library exports.
    hasattr() on a CDLL looks the symbol up (dlsym), so a missing one is simply skipped
    here and reported by name when an implementation needs it."""
    for name, (restype, argtypes) in SIGNATURES.items():
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes


def load(path=None):
    """Loads libflashtut (see :func:`library_path`), checks that its API is the one this
    module speaks, declares its functions, and makes it the library every call here uses.
    Returns the ``ctypes.CDLL``. Without ``path`` a library already loaded is kept."""
    global _lib, _lib_path
    if _lib is not None and path is None:
        return _lib
    where = library_path(path)
    if _lib is not None and where == _lib_path:
        return _lib
    # PyTorch first, when it is installed: on the H200 machine, loading libflashtut (which
    # brings its own CUDA runtime, OpenMP and C++ libraries) before `import torch` made that
    # import crash with a segmentation fault inside torch's extension modules, while the
    # other order worked. Importing torch here makes the order right whatever the caller does.
    try:
        import torch  # noqa: F401  (only for the load order)
    except ImportError:
        pass
    try:
        lib = ctypes.CDLL(where)
    except OSError as e:
        raise LibraryError(f"cannot load {where}: {e}") from None
    missing = [name for name in _REQUIRED if not hasattr(lib, name)]
    if missing:
        raise LibraryError(f"{where} is not libflashtut (it lacks {', '.join(missing)})")
    _declare(lib)
    version = lib.ft_api_version()
    if version != API_VERSION:
        raise LibraryError(
            f"{where} speaks C API version {version}, this module version {API_VERSION}: "
            f"rebuild the library from this checkout, or use the python/ folder of the "
            f"checkout that built it")
    size = lib.ft_problem_size()
    if size != ctypes.sizeof(Problem):
        raise LibraryError(
            f"{where}: sizeof(ft_problem) is {size} bytes in the library but "
            f"{ctypes.sizeof(Problem)} in flashtut.Problem: the struct changed without a new "
            f"API version; make Problem._fields_ match common/api/flashtut.h")
    _lib, _lib_path = lib, where
    _FORWARD_CALLS.clear()  # what was worked out with another library (see _Call)
    _BACKWARD_CALLS.clear()
    _TABLES.clear()
    return lib


def _function(name):
    """The declared C function `name` of the loaded library, or a LibraryError naming it."""
    lib = load()
    if not hasattr(lib, name):
        raise LibraryError(f"{_lib_path} does not export {name}: rebuild the library "
                           f"from this checkout")
    return getattr(lib, name)


_TABLES = {}  # "forward"/"backward" -> {name or alias: Impl}, read once per library


def implementations():
    """Every implementation of the loaded library, as its registry lists them
    (``ft_impl_count``, ``ft_impl_info_at``): forwards first, in chapter order."""
    lib = load()
    out = []
    for i in range(lib.ft_impl_count()):
        info = ImplInfo()
        _check_status("ft_impl_info_at", lib.ft_impl_info_at(i, ctypes.byref(info)))
        text = lambda b: b.decode() if b else ""  # noqa: E731
        out.append(Impl(
            name=text(info.name), alias=text(info.alias), kind=text(info.pass_),
            chapter=text(info.chapter), variant=text(info.variant), what=text(info.what),
            pairs_with=text(info.pairs_with),
            dtypes=tuple(t for t in (DTYPE_FLOAT32, DTYPE_BF16, DTYPE_FP16) if info.dtypes >> t & 1),
            head_dims=tuple(info.head_dims[:info.num_head_dims]), min_sm=info.min_sm,
            lengths=bool(info.lengths), grouped=bool(info.grouped), strided=bool(info.strided),
            tour=bool(info.tour)))
    return out


def _table(kind):
    """{name or alias: Impl} of one pass, from the loaded library's registry."""
    if kind not in _TABLES:
        table = {}
        for impl in implementations():
            if impl.kind == kind:
                table[impl.name] = impl
                if impl.alias:
                    table[impl.alias] = impl
        _TABLES[kind] = table
    return _TABLES[kind]


def forwards():
    """The forward passes: ``{name or alias: Impl}`` (``forward(..., impl=KEY)``). A
    chapter's alias (``"ch07"``) names the implementation it recommends."""
    return _table("forward")


def backwards():
    """The backward passes: ``{name or alias: Impl}`` (``backward(..., impl=KEY)``)."""
    return _table("backward")


def forward_for(capability):
    """The forward (an alias of :func:`forwards`) that :mod:`flashtut.autograd` and
    :mod:`flashtut.ops` run on a GPU of compute capability ``(major, minor)``: ``"ch09"``
    on a Hopper GPU (9.x: wgmma, the copy engine and warp specialization, machine code for
    sm_90a alone), ``"ch07"`` (FlashAttention-2 on mma.sync) on any other. Both take the
    same problems (bf16/fp16, d 64 or 128, two lengths, grouped heads, views) and write the
    o and log-sum-exp that either backward of :func:`backward_for` reads."""
    return "ch09" if int(capability[0]) == 9 else "ch07"


def backward_for(capability, contiguous=True):
    """The backward (an alias of :func:`backwards`) that :mod:`flashtut.autograd` and
    :mod:`flashtut.ops` run on a GPU of compute capability ``(major, minor)``: ``"ch10"`` on
    a Hopper GPU (wgmma and the copy engine), ``"ch08"`` on any other (FlashAttention-2's
    backward on mma.sync). Both read views and take the o and log-sum-exp of either forward
    of :func:`forward_for`; ``contiguous`` is kept for callers that pass it."""
    return "ch10" if int(capability[0]) == 9 else "ch08"


#: The forward that runs a decode step (:func:`decodes`): chapter 11's recommended kernel.
DECODE_IMPL = "ch11"
#: The most query rows a sequence chapter 11's decode takes (``kMaxQueryRows`` in
#: ``chapters/11_decoding/decode_kernels.cuh``; its workspace query refuses more): a new
#: token, or the few that speculative decoding verifies at once.
DECODE_MAX_ROWS = 16


def decodes(len_q, len_kv, causal, causal_align=CAUSAL_TOP_LEFT):
    """Whether a forward of ``len_q`` query rows against ``len_kv`` keys is a decode step, the
    problem chapter 11's kernel is built for (:data:`DECODE_IMPL`): at most
    :data:`DECODE_MAX_ROWS` new rows against a longer cache, each seeing every key (no mask) or
    the cache up to its own position (causal from the bottom right). There the keys are many and
    the query rows few, so the time is reading K and V once, which chapter 11 splits across the
    GPU; a forward chapter's kernel has one query tile (64-128 rows) a (sequence, head) to hand
    out, as chapter 11's first step did. A causal mask from the top left (SDPA's ``is_causal``
    with ``len_kv > len_q``: row i sees keys 0..i only) is not a decode step and stays with the
    forward chapters."""
    if not 1 <= len_q <= DECODE_MAX_ROWS or len_kv <= len_q:
        return False
    return not causal or _align(causal_align) == CAUSAL_BOTTOM_RIGHT


def available(kind="forward"):
    """The names (and aliases) of the loaded library's forward or backward passes."""
    _check_kind(kind)
    return list(_table(kind))


def _check_kind(kind):
    if kind not in ("forward", "backward"):
        raise ValueError(f"kind must be 'forward' or 'backward', got {kind!r}")


def last_error():
    """``ft_last_error()``: the message of this thread's last failure in the library."""
    raw = load().ft_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def _who(key, spec):
    """How messages name an implementation: "chapter 07", or "chapter 04 (simple)"."""
    return f"chapter {spec.chapter}" + ("" if key == spec.alias else f" ({spec.variant})")


def _impl(key, kind):
    table = _table(kind)
    if not isinstance(key, str) or key not in table:  # (a list is no key: unhashable)
        raise ValueError(f"unknown {kind} impl {key!r}: choose one of {', '.join(table)}")
    return table[key]


# ---- The C struct and the workspace -------------------------------------------------------


#: The largest value of a C int, the type of ft_problem's sizes (and of row_softmax's cols).
#: ctypes stores a larger Python int without a word, wrapped around: 2**32 + 128 becomes 128.
INT_MAX = 2**31 - 1


def problem(batch, heads, seq_len, head_dim, *, causal=False, scale=None, dtype=DTYPE_FLOAT32,
            heads_kv=None, len_kv=None, causal_align=CAUSAL_TOP_LEFT):
    """A :class:`Problem`; ``scale=None`` becomes 0, the library's 1/sqrt(head_dim).
    ``heads`` and ``seq_len`` are the query side's; ``heads_kv`` and ``len_kv`` (None: the
    same) the key/value side's. Sizes must be integers from 0 to :data:`INT_MAX` (what a C
    int holds; the library then refuses 0 and whatever else it cannot compute, saying why):
    anything else raises TypeError or ValueError naming it, as do a ``scale`` that is not a
    number, a ``causal_align`` other than the two constants (or their names) and a
    ``dtype`` a C int cannot hold."""
    heads_kv = heads if heads_kv is None else heads_kv
    len_kv = seq_len if len_kv is None else len_kv
    sizes = [_size(name, value) for name, value in (
        ("batch", batch), ("heads", heads), ("heads_kv", heads_kv), ("seq_len", seq_len),
        ("len_kv", len_kv), ("head_dim", head_dim))]
    return Problem(*sizes, 1 if causal else 0, _align(causal_align),
                   0.0 if scale is None else _scale(scale), _dtype_value(dtype))


def _size(name, value):
    """value as one of ft_problem's int sizes, or an exception naming it: never wrapped."""
    try:
        n = operator.index(value)  # an int, numpy's, torch's; not 64.5 (int() would cut it)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if n < 0:
        raise ValueError(f"{name} is {n}: a size cannot be negative; pass a {name} of at least 1")
    if n > INT_MAX:
        raise ValueError(f"{name} is {n}, more than {INT_MAX} (2**31 - 1), the largest size "
                         f"ft_problem's C int fields hold: pass a smaller {name}")
    return n


def _dtype_value(dtype):
    """dtype as ft_problem's int (the library names the values it refuses), never wrapped."""
    try:
        n = operator.index(dtype)
    except TypeError:
        n = None
    if n is None or not -INT_MAX - 1 <= n <= INT_MAX:
        raise ValueError(f"dtype must be flashtut.DTYPE_FLOAT32, DTYPE_BF16 or DTYPE_FP16, "
                         f"got {dtype!r}")
    return n


def _scale(scale):
    """scale as a float (None stays None), or a TypeError naming it."""
    if scale is None:
        return None
    try:
        if isinstance(scale, (str, bytes)):  # float("0.5") would take it
            raise TypeError
        return float(scale)
    except (TypeError, ValueError):
        raise TypeError(f"scale must be a number (or None for 1/sqrt(head_dim)), "
                        f"got {scale!r}") from None


def workspace_bytes(impl, prob, kind="forward"):
    """``ft_forward_workspace_bytes(impl, prob)`` (or the backward's): the scratch bytes
    implementation ``impl`` (a name or alias) needs for ``prob`` (0 is a true answer).
    FT_WORKSPACE_ERROR, the library's way of saying it cannot run this problem, raises
    :class:`FlashtutError` with ``ft_last_error()``. ``kind``: "forward" or "backward"."""
    if not isinstance(impl, str):
        raise TypeError(f"impl must be an implementation's name, a str such as 'ch07' "
                        f"(flashtut.available(kind) lists them), got {impl!r}")
    _check_kind(kind)
    if not isinstance(prob, Problem):
        raise TypeError(f"prob must be a flashtut.Problem (make one with flashtut.problem()), "
                        f"got {type(prob).__name__}")
    name = f"ft_{kind}_workspace_bytes"
    n = _function(name)(impl.encode(), prob)
    if n == WORKSPACE_ERROR:
        raise FlashtutError(name, None, last_error())
    return n


def _check_status(function, rc):
    if rc != 0:
        raise FlashtutError(function, rc, last_error())


# ---- Checking tensors (no torch needed) ---------------------------------------------------


def _shape(t):
    return tuple(int(x) for x in t.shape)


def check_tensors(tensors, *, dtypes=None, who=None, views=False):
    """Checks attention tensors before any of their addresses reach the library.

    ``tensors`` is a list of ``(name, tensor)``; the first one sets the dtype, device and
    shape the others must share, but for the key/value side (names in :data:`KV_NAMES`: k,
    v, dk, dv), whose first sets theirs: ``[batch, heads_kv, len_kv, head_dim]`` with q's
    batch and head_dim and heads_kv dividing q's heads (grouped heads). Each must be on a
    CUDA device, have 4 dimensions ``[batch, heads, seq_len, head_dim]``, be float32, bfloat16 or float16 (and one of
    ``dtypes``, the implementation's, when given; ``who`` names it in the message), have no
    dimension longer than :data:`INT_MAX` (the C struct's sizes are ints), be
    contiguous (with ``views``: a view the kernels read, see :func:`view_strides`), and start
    at a multiple of 16 bytes. Returns the FT_DTYPE_* of the first.

    Only ``.dtype``, ``.shape``, ``.device``, ``.is_contiguous()``, ``.data_ptr()`` (and for
    views ``.stride()`` and ``.element_size()``) are used, so a small stand-in object works
    as well as a torch tensor (the CPU tests use one). Raises TypeError (not a tensor; a
    dtype the library does not compute in) or ValueError (device, shape, layout,
    alignment), each saying what to change.
    """
    first_name, first = tensors[0]
    ft_dtype = None
    kv_first = None  # (name, tensor) of the first key/value-side tensor
    for name, t in tensors:
        if not all(hasattr(t, a) for a in ("dtype", "shape", "device", "is_contiguous", "data_ptr")):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        device = getattr(t.device, "type", str(t.device))
        if device != "cuda":
            raise ValueError(f"{name} is on {t.device}, the kernels run on a CUDA device: "
                             f"pass {name}.cuda()")
        shape = _shape(t)
        if len(shape) != 4:
            raise ValueError(f"{name} has shape {shape}: expected 4 dimensions, "
                             f"[batch, heads, seq_len, head_dim]")
        for dim, n in zip(_KV_DIMS if name in KV_NAMES else _DIMS, shape):
            if n > INT_MAX:  # ctypes would wrap it around (problem() refuses it too)
                raise ValueError(f"{name} has shape {shape}: its {dim} {n} is more than "
                                 f"{INT_MAX} (2**31 - 1), the largest size the library's C int "
                                 f"fields hold; pass a smaller {dim}")
        dt = str(t.dtype)
        if dt not in _DTYPES:
            raise TypeError(f"{name} is {dt}: the library computes in torch.float32, "
                            f"torch.bfloat16 or torch.float16: pass {name}.float() "
                            f"(or .bfloat16(), .half())")
        this = _DTYPES[dt][0]
        if t is first:
            ft_dtype = this
            if dtypes is not None and this not in dtypes:
                allowed = " or ".join(_DTYPE_WORDS[x] for x in dtypes)
                fix = " or ".join(f"{name}{_CONVERT[x]}" for x in dtypes)
                raise TypeError(f"{who or 'this implementation'} computes {allowed}: got {dt}: "
                                f"pass {fix}")
        else:
            if this != ft_dtype:
                raise TypeError(f"{name} is {dt} but {first_name} is {first.dtype}: "
                                f"give {first_name} and {name} the same dtype")
            if str(t.device) != str(first.device):
                raise ValueError(f"{name} is on {t.device} but {first_name} on {first.device}: "
                                 f"put them on the same device")
            side = kv_first if name in KV_NAMES else (first_name, first)
            if side is None:  # the key/value side's first tensor: its own shape, q's B and d
                kv_first = (name, t)
                b, h, _, d = _shape(first)
                if shape[0] != b or shape[3] != d or shape[1] < 1 or h % shape[1]:
                    raise ValueError(
                        f"{name} has shape {shape} but {first_name} {_shape(first)}: {name} "
                        f"must be [batch, heads_kv, len_kv, head_dim] with {first_name}'s batch "
                        f"{b} and head_dim {d}, and heads_kv dividing its {h} heads")
            elif shape != _shape(side[1]):
                raise ValueError(f"{name} has shape {shape} but {side[0]} {_shape(side[1])}: "
                                 f"they must have the same [batch, heads, seq_len, head_dim]")
        if views:
            _check_view(name, t)
        else:
            _check_layout(name, t)
    return ft_dtype


_DTYPE_WORDS = {DTYPE_FLOAT32: "float32", DTYPE_BF16: "bf16", DTYPE_FP16: "fp16"}
#: The names check_tensors treats as the key/value side ([batch, heads_kv, len_kv, head_dim]).
KV_NAMES = ("k", "v", "dk", "dv", "key", "value")
_DIMS, _KV_DIMS = ("batch", "heads", "seq_len", "head_dim"), ("batch", "heads_kv", "len_kv", "head_dim")


def _check_layout(name, t):
    """Contiguous and 16-byte aligned: the two things a view into another tensor breaks."""
    if not t.is_contiguous():
        raise ValueError(f"{name} is not contiguous: call {name}.contiguous()")
    if t.data_ptr() % ALIGNMENT != 0:
        raise ValueError(f"{name}.data_ptr() is not {ALIGNMENT}-byte aligned "
                         f"(a view into a larger tensor?): pass {name}.clone()")


def view_strides(t):
    """``(batch, head, row)`` strides in elements if ``t`` (a ``[B, H, N, d]`` tensor) is a
    view the strided functions read, else None: head_dim contiguous, no negative stride,
    every stride of a dimension longer than 1 a multiple of 16 bytes, the data 16-byte
    aligned. A transposed view of a model's QKV projection is one; ``t.contiguous()`` always
    is."""
    try:
        if t.data_ptr() % ALIGNMENT:
            return None
    except (AttributeError, TypeError):
        return None
    return _readable_strides(t)


def _readable_strides(t):
    """view_strides' rule on the shape and strides alone (no data pointer: what torch.compile
    can trace, flashtut.ops uses it so)."""
    try:
        strides, shape, size = t.stride(), t.shape, t.element_size()
    except (AttributeError, TypeError):
        return None
    if len(strides) != 4 or (shape[3] > 1 and strides[3] != 1):
        return None
    chunk = ALIGNMENT // size
    for s, n in zip(strides[:3], shape[:3]):
        if s < 0 or (n > 1 and s % chunk):
            return None
    # A dimension of size 1 is never stepped along, so its stride is whatever PyTorch left
    # there (a decode step's q, one row cut from a fused qkv, keeps the row stride 3·width
    # even after .contiguous()): given as a contiguous tensor's, so that such a q is one.
    out = [0, 0, 0, 1]
    for i in (2, 1, 0):
        out[i] = strides[i] if shape[i] > 1 else out[i + 1] * shape[i + 1]
    return tuple(out[:3])


def _check_view(name, t):
    """A view the kernels read (view_strides), or a ValueError saying why not and what to do."""
    if view_strides(t) is not None:
        return
    if not hasattr(t, "stride"):
        return _check_layout(name, t)
    strides = tuple(t.stride())
    if t.data_ptr() % ALIGNMENT != 0:
        raise ValueError(f"{name}.data_ptr() is not {ALIGNMENT}-byte aligned "
                         f"(a view into a larger tensor?): pass {name}.clone()")
    raise ValueError(f"{name} has strides {strides}: the kernels read views whose head_dim is "
                     f"contiguous (stride 1) and whose other strides are non-negative "
                     f"multiples of {ALIGNMENT} bytes; pass {name}.contiguous()")


def _contiguous(tensors):
    """Whether every tensor is contiguous (False for one that cannot say)."""
    try:
        return all(t.is_contiguous() for t in tensors)
    except AttributeError:
        return False


def _tokens_outside(t):
    """Whether t's heads lie inside its tokens ([B, N, H, d] memory, seen as [B, H, N, d]):
    then the outputs are laid out so too, as SDPA's FlashAttention backend returns them."""
    s = t.stride()
    return t.shape[1] > 1 and t.shape[2] > 1 and s[1] < s[2]


def _layout_of(pairs):
    """A :class:`Layout` from (field, strides) pairs (the fields not given stay 0)."""
    layout = Layout()
    for name, s in pairs:
        setattr(layout, name, Strides(*s))
    return layout


def _check_lse(lse, like):
    """lse: float32 [batch, heads, seq_len] on q's device, contiguous, aligned."""
    if not all(hasattr(lse, a) for a in ("dtype", "shape", "device", "is_contiguous", "data_ptr")):
        raise TypeError(f"lse must be a torch.Tensor, got {type(lse).__name__}")
    if str(lse.dtype) != "torch.float32":
        raise TypeError(f"lse is {lse.dtype}: the log-sum-exp is float32 whatever the dtype of "
                        f"q (pass the lse forward() returned, or lse.float())")
    if str(lse.device) != str(like.device):
        raise ValueError(f"lse is on {lse.device} but q on {like.device}: put them on the same device")
    want = _shape(like)[:3]
    if _shape(lse) != want:
        raise ValueError(f"lse has shape {_shape(lse)}: expected {want}, [batch, heads, seq_len]")
    _check_layout("lse", lse)


def _problem_of(q, k, ft_dtype, causal, scale, causal_align):
    b, h, n, d = _shape(q)
    _, h_kv, n_kv, _ = _shape(k)
    return problem(b, h, n, d, causal=causal, scale=scale, dtype=ft_dtype, heads_kv=h_kv,
                   len_kv=n_kv, causal_align=causal_align)


# ---- What a call works out, kept for the next call of the same problem ---------------------
#
# A training step calls the same pass on tensors of the same shape over and over. All that a
# call works out before the library runs (the full checks, the ctypes struct, the C function,
# the workspace size) depends only on the implementation, the tensors' shape, dtype and
# device, causal and scale. So the first call of each such problem does it in full and keeps
# the result, a _Call; a later call of the same problem looks it up and then checks, for each
# tensor, what a kept _Call cannot vouch for: the same shape, dtype and device as the first
# (one comparison each), contiguous, 16-byte aligned. Anything else, or nothing kept, and the
# call takes the full path, check_tensors(), which raises the error that says what to change.
# Every check still runs on every call; what is skipped is the work of building messages and
# of finding the one to give. (Measured on a CPU machine with a stub library, see
# python/README.md: 12 µs of checks for q, k, v became 2 µs.)

_FORWARD_CALLS, _BACKWARD_CALLS = {}, {}  # key -> _Call, key as _lookup() makes it
_KEEP = 64  # problems kept per table; past that the table starts again (a sweep, a test)


class _Call:
    """What one problem needs from the library, worked out once: the implementation's name,
    the C function (``fn``) and its name, the :class:`Problem`, the workspace bytes, the CUDA
    device's index; for a backward, the lse's shape and dtype, and ``first``, the (name,
    function) of the forward the materializing baseline runs before it (None for the
    others)."""
    __slots__ = ("impl", "function", "fn", "prob", "nbytes", "device_index", "lse_shape",
                 "lse_dtype", "first", "layout", "tokens")

    def __init__(self, impl, function, fn, prob, nbytes, device_index, lse_shape, lse_dtype=None,
                 first=None):
        self.impl = impl.encode()  # the registry's name, as the C functions take it
        self.function, self.fn, self.prob, self.nbytes = function, fn, prob, nbytes
        self.device_index, self.lse_shape, self.lse_dtype = device_index, lse_shape, lse_dtype
        self.first = first
        # Views (the strided functions): the Layout passed by reference, and whether the
        # outputs are laid out [B, N, H, d] (tokens outside); None, False otherwise.
        self.layout, self.tokens = None, False


def _lookup(calls, impl, tensors, causal, scale, lse=None, views=False):
    """(the kept _Call, or None; the key to keep a new one under, or None if there is none).

    The _Call is returned only when every tensor (and lse) has what it was checked for.
    ``views``: the implementation reads views, and the tensors' strides are part of the key
    (a kept call's Layout is theirs), unless they are all contiguous."""
    q, k = tensors[0], tensors[1]
    try:
        shape, kv_shape, dtype, device = q.shape, k.shape, q.dtype, q.device
        strides = None if not views or _contiguous(tensors) else tuple(t.stride() for t in tensors)
        key = (impl, shape, kv_shape, dtype, device, causal, scale, strides)
        call = calls.get(key)
    except (AttributeError, TypeError):  # not a tensor, or a stand-in that cannot be a key
        return None, None
    if call is None:
        return None, key
    try:
        for i, t in enumerate(tensors):
            if (t.shape != (kv_shape if i in (1, 2) else shape) or t.dtype != dtype or t.device != device
                    or (strides is None and not t.is_contiguous()) or t.data_ptr() % ALIGNMENT):
                return None, key
        if lse is not None and (lse.shape != call.lse_shape or lse.dtype != call.lse_dtype
                                or lse.device != device or not lse.is_contiguous()
                                or lse.data_ptr() % ALIGNMENT):
            return None, key
    except AttributeError:  # k, v, ... not a tensor: check_tensors says so
        return None, key
    return call, key


def _keep(calls, key, call):
    if key is not None:
        if len(calls) >= _KEEP:
            calls.clear()
        calls[key] = call


def _forward_call(impl, q, k, v, causal, scale, align):
    """The full path of :func:`forward`: every check with its message, the struct, the
    function, the workspace query (which refuses an unsupported problem)."""
    spec = _impl(impl, "forward")
    views = bool(spec.strided) and not _contiguous((q, k, v))
    ft_dtype = check_tensors([("q", q), ("k", k), ("v", v)], dtypes=spec.dtypes,
                             who=_who(impl, spec), views=views)
    prob = _problem_of(q, k, ft_dtype, causal, scale, align)
    nbytes = workspace_bytes(spec.name, prob)  # refuses an unsupported problem here
    call = _Call(spec.name, "ft_forward", _function("ft_forward"), prob, nbytes,
                 getattr(q.device, "index", None), _shape(q)[:3])
    if views:
        call.function, call.fn = "ft_forward_strided", _function("ft_forward_strided")
        call.tokens = _tokens_outside(q)
        o = _output_strides(q, call.tokens)
        call.layout = ctypes.byref(_layout_of([("Q", view_strides(q)), ("K", view_strides(k)),
                                               ("V", view_strides(v)), ("O", o)]))
    return call


def _output_strides(q, tokens):
    """The strides of an output shaped like q (or like k, for dk and dv): [B, N, H, d] memory
    (tokens) or [B, H, N, d]."""
    b, h, n, d = _shape(q)
    return (n * h * d, d, h * d) if tokens else (h * n * d, n * d, d)


def _backward_call(impl, q, k, v, o, lse, do, causal, scale, align):
    """The full path of :func:`backward` (see :func:`_forward_call`)."""
    spec = _impl(impl, "backward")
    views = bool(spec.strided) and not _contiguous((q, k, v, o, do))
    ft_dtype = check_tensors([("q", q), ("k", k), ("v", v), ("o", o), ("do", do)],
                             dtypes=spec.dtypes, who=_who(impl, spec), views=views)
    _check_lse(lse, q)
    prob = _problem_of(q, k, ft_dtype, causal, scale, align)
    nbytes = workspace_bytes(spec.name, prob, "backward")
    first = None
    # A paired forward that keeps something in its workspace (the materializing baseline's
    # P) must run into the backward's workspace first; the flash backwards' forwards keep
    # nothing there (their workspace is 0) and read only O and lse.
    forward_bytes = workspace_bytes(spec.pairs_with, prob)
    if forward_bytes:
        nbytes = max(nbytes, forward_bytes)
        first = (spec.pairs_with.encode(), _function("ft_forward"))
    call = _Call(spec.name, "ft_backward", _function("ft_backward"), prob, nbytes,
                 getattr(q.device, "index", None), _shape(q)[:3], lse.dtype, first)
    if views:
        call.function, call.fn = "ft_backward_strided", _function("ft_backward_strided")
        call.tokens = _tokens_outside(q)
        g, gk = _output_strides(q, call.tokens), _output_strides(k, call.tokens)
        call.layout = ctypes.byref(_layout_of(
            [("Q", view_strides(q)), ("K", view_strides(k)), ("V", view_strides(v)),
             ("O", view_strides(o)), ("dO", view_strides(do)), ("dQ", g), ("dK", gk),
             ("dV", gk)]))
    return call


# ---- The passes (torch from here on) -------------------------------------------------------

_torch_module = None   # torch, once a pass has needed it
_current_stream = None  # device index -> the address of PyTorch's current stream there


def _torch():
    """torch, imported on the first pass (later calls read it from here: an `import` of a
    loaded module still goes through the import machinery, about half a µs)."""
    global _torch_module, _current_stream
    if _torch_module is None:
        try:
            import torch
        except ImportError as e:
            raise ImportError(f"flashtut's passes allocate their outputs with PyTorch: "
                              f"install it (pip install torch) ({e})") from None
        # torch.cuda.current_stream(i).cuda_stream builds a torch.cuda.Stream (Python) to
        # read one integer, 2-3 µs; torch._C._cuda_getCurrentRawStream(i) returns the integer
        # (it is what PyTorch's own compiler emits for its kernels). Private, hence the
        # fallback to the public way should a PyTorch not have it.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _current_stream = raw or (lambda index: torch.cuda.current_stream(index).cuda_stream)
        _torch_module = torch
    return _torch_module


def _workspace(torch, nbytes, like):
    """A workspace of `nbytes` (None for 0) on `like`'s device. PyTorch's caching allocator
    hands a freed block back out only for work queued after the free on this same stream, so
    dropping the workspace once the call is queued is safe (and reusing one tensor across
    calls would not be cheaper: the allocator's free list is a lookup)."""
    return like.new_empty(nbytes, dtype=torch.uint8) if nbytes else None


def _ptr(t):
    return None if t is None else t.data_ptr()


def forward(q, k, v, *, causal=False, scale=None, impl="ch07", causal_align=CAUSAL_TOP_LEFT):
    """Attention forward: ``o = softmax(scale·q·kᵀ)·v`` and its log-sum-exp.

    q: a CUDA tensor ``[batch, heads, seq_len, head_dim]``; k, v ``[batch, heads_kv, len_kv,
    head_dim]`` (heads_kv dividing heads: grouped heads; len_kv any length, for the
    implementations whose :class:`Impl` says ``lengths`` and ``grouped``: chapter 07's; the
    others refuse them), one dtype (float32 for chapters 01-05, bf16 or fp16 for chapter 07),
    contiguous; for an implementation that reads views (``forwards()[impl].strided``:
    chapter 07), any views :func:`view_strides` accepts, such as
    ``qkv.view(B, N, 3, H, d)[:, :, 0].transpose(1, 2)``, read in place.
    ``causal``: key j visible to query i iff j <= i, or, with ``causal_align`` =
    ``CAUSAL_BOTTOM_RIGHT``, iff j <= i + len_kv - seq_len (the same when the lengths
    agree). ``scale``: None for 1/sqrt(head_dim).
    ``impl``: a key of :func:`forwards` (default ``"ch07"``, FlashAttention-2 on the tensor
    cores).

    Returns ``(o, lse)``: o shaped like q, contiguous, or, when q is a view whose heads lie
    inside its tokens, a view of ``[batch, seq_len, heads, head_dim]`` memory (what SDPA's
    FlashAttention backend returns, so that ``o.transpose(1, 2).reshape(B, N, H·d)`` is
    free); lse float32 ``[batch, heads, seq_len]``, natural log,
    ``lse_i = m_i + ln l_i``. Queued on PyTorch's current stream (asynchronous, like any
    torch operation).
    """
    causal, scale = bool(causal), None if scale is None else _scale(scale)  # what Problem holds
    align = _align(causal_align)
    spec = _table("forward").get(impl) if isinstance(impl, str) else None  # None: _impl says why
    call, key = _lookup(_FORWARD_CALLS, impl, (q, k, v), (causal, align), scale,
                        views=bool(spec and spec.strided))
    if call is None:
        call = _forward_call(impl, q, k, v, causal, scale, align)
        _keep(_FORWARD_CALLS, key, call)
    torch = _torch()
    o = _empty_output(torch, q, call.tokens)
    lse = q.new_empty(call.lse_shape, dtype=torch.float32)
    ws = _workspace(torch, call.nbytes, q)
    head = (call.impl, call.prob) if call.layout is None else (call.impl, call.prob, call.layout)
    # The library launches on the current device, into a stream of q's device: make them one.
    with torch.cuda.device(call.device_index):
        rc = call.fn(*head, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                     lse.data_ptr(), _ptr(ws), _current_stream(call.device_index))
    _check_status(call.function, rc)
    return o, lse


_ALIGNS = {CAUSAL_TOP_LEFT: CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT: CAUSAL_BOTTOM_RIGHT,
           "top-left": CAUSAL_TOP_LEFT, "bottom-right": CAUSAL_BOTTOM_RIGHT}


def _align(causal_align):
    """CAUSAL_TOP_LEFT or CAUSAL_BOTTOM_RIGHT from either constant or its name."""
    try:
        return _ALIGNS[causal_align]
    except (KeyError, TypeError):
        raise ValueError(f"causal_align must be flashtut.CAUSAL_TOP_LEFT or CAUSAL_BOTTOM_RIGHT "
                         f"(or 'top-left', 'bottom-right'), got {causal_align!r}") from None


def _empty_output(torch, q, tokens):
    """An output shaped like q: contiguous [B, H, N, d], or (tokens) a [B, H, N, d] view of
    [B, N, H, d] memory, the layout SDPA's FlashAttention backend returns for such inputs."""
    if not tokens:  # new_empty rather than torch.empty(..., device=): 1-2 µs less a call
        return q.new_empty(q.shape)
    b, h, n, d = q.shape
    return q.new_empty((b, n, h, d)).transpose(1, 2)


def backward(q, k, v, o, lse, do, *, causal=False, scale=None, impl="ch05",
             causal_align=CAUSAL_TOP_LEFT):
    """Attention backward: the gradients of q, k and v for the output gradient ``do``.

    q, k, v, o, do: CUDA tensors ``[batch, heads, seq_len, head_dim]`` of one dtype (float32:
    chapter 05 computes in float32), contiguous (views, for ``"ch08"``, as in
    :func:`forward`); o and lse the outputs of :func:`forward`
    on the same q, k, v, causal and scale (any forward's: the flash backwards recompute P
    from q, k and lse). ``impl``: a key of :func:`backwards` (default ``"ch05"``, the flash
    backward with dQ by atomics).

    ``"ch05_materialize"``, the baseline, reads the P its own forward kept in the workspace,
    so for it this function first runs that forward, ``"ch05_materialize_forward"`` (into scratch outputs)
    and needs that workspace's B·H·N² floats.

    Returns ``(dq, dk, dv)``, dq shaped and laid out as :func:`forward` lays out o, dk and dv
    likewise shaped like k.
    """
    causal, scale = bool(causal), None if scale is None else _scale(scale)
    align = _align(causal_align)
    spec = _table("backward").get(impl) if isinstance(impl, str) else None
    call, key = _lookup(_BACKWARD_CALLS, impl, (q, k, v, o, do), (causal, align), scale, lse,
                        views=bool(spec and spec.strided))
    if call is None:
        call = _backward_call(impl, q, k, v, o, lse, do, causal, scale, align)
        _keep(_BACKWARD_CALLS, key, call)
    torch = _torch()
    dq = _empty_output(torch, q, call.tokens)
    dk, dv = (_empty_output(torch, k, call.tokens) for _ in range(2))
    ws = _workspace(torch, call.nbytes, q)
    with torch.cuda.device(call.device_index):
        stream = _current_stream(call.device_index)
        if call.first is not None:  # the baseline: its forward leaves P in the workspace
            name, fwd = call.first
            o_p, lse_p = torch.empty_like(o), torch.empty_like(lse)
            _check_status("ft_forward", fwd(name, call.prob, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                            o_p.data_ptr(), lse_p.data_ptr(), _ptr(ws), stream))
        head = (call.impl, call.prob) if call.layout is None else (call.impl, call.prob, call.layout)
        rc = call.fn(*head, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                     lse.data_ptr(), do.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                     _ptr(ws), stream)
    _check_status(call.function, rc)
    return dq, dk, dv


_SOFTMAX_VARIANTS = {"safe": 0, "online": 1}


def row_softmax(x, *, variant="online"):
    """Chapter 03's softmax over the last dimension of a float32 CUDA tensor (contiguous;
    only float alignment needed): ``variant`` "safe" (three passes: max, sum, normalize) or
    "online" (the running max and sum, one read). Returns a new tensor like x."""
    if variant not in _SOFTMAX_VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: choose safe or online")
    if not all(hasattr(x, a) for a in ("dtype", "shape", "device", "is_contiguous", "data_ptr")):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if str(x.dtype) != "torch.float32":
        raise TypeError(f"chapter 03's row softmax computes float32: got {x.dtype}: pass x.float()")
    if getattr(x.device, "type", str(x.device)) != "cuda":
        raise ValueError(f"x is on {x.device}, the kernels run on a CUDA device: pass x.cuda()")
    if not x.is_contiguous():
        raise ValueError("x is not contiguous: call x.contiguous()")
    shape = _shape(x)
    if not shape:
        raise ValueError("x is a scalar: give it at least one dimension")
    cols = shape[-1]
    if cols > INT_MAX:  # a C int in ft_ch03_row_softmax (rows is an int64_t)
        raise ValueError(f"x has {cols} columns, more than {INT_MAX} (2**31 - 1), the most "
                         f"chapter 03's row softmax takes (a C int): use torch.softmax(x, -1) "
                         f"for rows this long")
    rows = 1
    for s in shape[:-1]:
        rows *= s
    fn = _function("ft_ch03_row_softmax")
    torch = _torch()
    with torch.cuda.device(x.device):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        stream = torch.cuda.current_stream(x.device).cuda_stream
        _check_status("ft_ch03_row_softmax",
                      fn(_SOFTMAX_VARIANTS[variant], x.data_ptr(), out.data_ptr(), rows, cols, stream))
    return out


# ---- Autograd ------------------------------------------------------------------------------
# forward() and backward() are the two halves a torch.autograd.Function needs: its forward
# calls forward() and saves q, k, v, o and lse; its backward calls backward() with them and
# the incoming gradient. That Function, FlashAttention, and attention(), SDPA's call on top
# of it, live in python/flashtut/autograd.py, so that this file stays the plain C API and
# `import flashtut` never imports torch: the submodule is imported on first use of the
# attribute flashtut.autograd (or by `import flashtut.autograd`). It is not in __all__, so
# that `from flashtut import *` does not import torch either.


def __getattr__(name):
    """``flashtut.autograd``, ``flashtut.ops`` and ``flashtut.attention`` (the operators'
    SDPA call), imported when first asked for (PEP 562): they import torch."""
    import importlib
    if name in ("autograd", "ops"):
        return importlib.import_module(__name__ + "." + name)
    if name == "attention":
        return importlib.import_module(__name__ + ".ops").attention
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
