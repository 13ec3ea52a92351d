"""Numeric building blocks named for their intent, with backend-specific versions.

Algorithm modules call only these operations for the work that a backend's
compiler handles unevenly; every operation has a portable *reference*
version (plain `jax.numpy`, what any backend should compile well) and, where
it pays on a measured backend, a tuned version chosen at lowering time with
`jax.lax.platform_dependent` (the choice follows the device the code is
compiled for, not the host's default backend; `serial_scan` is the one
exception, see there). ``tests/test_ops.py`` checks
every tuned version against its reference (bit for bit, or within the
tolerance stated on the operation).

Why the CPU versions exist (measured on XLA:CPU, jax 0.10.2, a 2-core x86
host; `benchmarks/README.md` has the figures):

* XLA:CPU forms no multi-output fusions: each array a loop fusion produces
  is one pass over its inputs, and a cheap producer read by several
  consumers is recomputed inside each of them. `materialize` keeps a
  producer computed once: an integer remainder is an "expensive" operation
  that XLA does not duplicate into its consumers, so the leaves go through
  one that leaves them unchanged (`lax.optimization_barrier` would say the
  same, but XLA:CPU removes barriers before fusion).
* A reduction that goes to XLA:CPU's library call takes its input
  materialised (masking before ``jnp.min`` writes a masked copy); a tree of
  elementwise operations over row slices fuses instead (`rows_reduce`).
* A reduction over a short minor axis (the d coordinates) goes to the same
  library call, ~10 µs per call under `vmap`; written out it fuses into the
  elementwise loop (`coord_sum`, `sq_dist`, `segment_sq_dist`).
* XLA:CPU's parallel-task pass splits a loop fusion over the intra-op
  threads when its flops exceed its bytes (cost = flops + 10·bytes, one task
  per 100k); a split costs more the longer the thread pool has been idle.
  Light passes over large arrays should do at most about one operation per
  byte (slpc's row minima do at most three per float32 entry).

`reference_ops()` makes every operation traced inside it take its reference
version whatever the platform, so that the tests run whole learners on the
reference path on a CPU.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array

__all__ = ["materialize", "rows_reduce", "coord_sum", "segment_sum", "sq_dist", "segment_sq_dist", "first_argmin",
           "serial_scan", "matmul", "einsum", "EXACT", "reference_ops", "TREE_ROWS", "UNROLL_COORDS",
           "UNROLL_PAIRS", "SERIAL_UNROLL_GPU"]

_state = threading.local()


@contextlib.contextmanager
def reference_ops():
    """Within this context, operations traced take their reference version on every platform.

    Only code traced inside the context is affected: a function jitted
    before keeps the version it was compiled with (jit caches by function).
    """
    old = getattr(_state, "reference", False)
    _state.reference = True
    try:
        yield
    finally:
        _state.reference = old


def _dispatch(cpu: Callable, reference: Callable, *args):
    """``cpu(*args)`` when lowered for a CPU, ``reference(*args)`` elsewhere (or under `reference_ops`)."""
    if getattr(_state, "reference", False):
        return reference(*args)
    return lax.platform_dependent(*args, cpu=cpu, default=reference)


# ---------------------------------------------------------------------------
# materialize


def _pin_leaves(leaves):
    kinds, words = [], []
    for x in leaves:
        if x.dtype == jnp.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
            kinds.append(jnp.dtype(jnp.int32))
            words.append(x.astype(jnp.int32))
        elif x.dtype in (jnp.float32, jnp.float64):
            kinds.append(jnp.dtype(jnp.uint32 if x.dtype == jnp.float32 else jnp.uint64))
            words.append(lax.bitcast_convert_type(x, kinds[-1]))
        else:
            raise TypeError(f"materialize: unsupported dtype {x.dtype}")
    out = list(words)
    for kind in map(jnp.dtype, (jnp.int32, jnp.uint32, jnp.uint64)):
        idx = [k for k, kd in enumerate(kinds) if kd == kind]
        if not idx:
            continue
        modulus = 2 ** 31 - 1 if kind == jnp.int32 else int(jnp.iinfo(kind).max)
        flat = lax.rem(jnp.concatenate([words[k].reshape(-1) for k in idx]), jnp.asarray(modulus, kind))
        start = 0
        for k in idx:
            out[k] = flat[start:start + words[k].size].reshape(words[k].shape)
            start += words[k].size
    return [w.astype(x.dtype) if kd == jnp.int32 else lax.bitcast_convert_type(w, x.dtype)
            for w, x, kd in zip(out, leaves, kinds)]


def _materialize_cpu(*leaves):
    """Integers and booleans as int32 modulo 2³¹ − 1 (a round's integers are
    indices and counts, far below that); float32/float64 as their bits,
    unsigned words of the same width, modulo the largest one (every pattern
    but all ones, a NaN that no arithmetic produces, is unchanged)."""
    return tuple(_pin_leaves(list(leaves)))


def _materialize_reference(*leaves):
    return leaves


@jax.custom_jvp
def _materialize_flat(*leaves):
    return _dispatch(_materialize_cpu, _materialize_reference, *leaves)


@_materialize_flat.defjvp
def _materialize_jvp(primals, tangents):
    # The value is unchanged, so its derivative is the identity (the CPU
    # version's bit casts would otherwise cut the tangent).
    return _materialize_flat(*primals), tuple(tangents)


def materialize(tree):
    """`tree`, unchanged, computed once before the loops that read it.

    A hint for compilers that recompute cheap producers inside every
    consumer (XLA:CPU; module docstring). The reference version is the
    identity. Derivatives pass through unchanged.

    Raises:
      TypeError: for a floating-point leaf other than float32 or float64 (CPU).
    """
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves:
        return tree
    leaves = [jnp.asarray(x) for x in leaves]
    for x in leaves:
        if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype not in (jnp.float32, jnp.float64):
            raise TypeError(f"materialize: unsupported dtype {x.dtype}")
    return jax.tree_util.tree_unflatten(treedef, list(_materialize_flat(*leaves)))


# ---------------------------------------------------------------------------
# Reductions over rows and over coordinates

# Up to this many rows, `rows_reduce` on CPU is a written-out tree.
TREE_ROWS = 128
# Up to this many coordinates, coordinate sums on CPU are written out (and
# pairwise distances up to UNROLL_PAIRS: their loop is a plain elementwise
# accumulation, which stays cheaper than a reduction over a minor axis longer).
UNROLL_COORDS = 16
UNROLL_PAIRS = 64

_OPS = {"min": jnp.minimum, "sum": jnp.add}


def rows_reduce(K: int, row: Callable[[int], Array], op: str = "min") -> Array:
    """Elementwise minimum (``op="min"``) or sum (``"sum"``) of ``row(k)`` over k < K.

    ``row(k)`` builds row k (shape (n,)) from slices of the caller's arrays
    and their masks, so that no masked copy of the whole (K, n) array is
    written first. Reference: one reduction of the stacked rows. CPU: a tree
    of elementwise operations (for K <= `TREE_ROWS`), which XLA fuses, masks
    included, into one loop that reads each column's K entries once; its
    result goes through `materialize`. Minima are exact in both; sums agree bit for
    bit on integers and to rounding on floats (the order differs).

    Args:
      K: number of rows (static).
      row: ``k -> (n,)`` array.
      op: ``"min"`` or ``"sum"``.

    Returns:
      (n,) array.
    """
    if op not in _OPS:
        raise ValueError(f"op must be 'min' or 'sum'; got {op!r}")
    rows = [row(k) for k in range(K)]

    def reference(*rows):
        stacked = jnp.stack(rows)
        return jnp.min(stacked, 0) if op == "min" else jnp.sum(stacked, 0)

    if K > TREE_ROWS:
        return reference(*rows)

    def cpu(*rows):
        fn = _OPS[op]

        def tree(lo, hi):
            if hi - lo == 1:
                return rows[lo]
            mid = (lo + hi) // 2
            return fn(tree(lo, mid), tree(mid, hi))

        return materialize(tree(0, K))

    return _dispatch(cpu, reference, *rows)


def _coord_sum_cpu(a):
    return sum(a[..., k] for k in range(a.shape[-1]))


def _coord_sum_reference(a):
    return jnp.sum(a, -1)


def coord_sum(a: Array) -> Array:
    """Sum over the last (coordinate) axis of ``a`` (..., d).

    CPU, for d <= `UNROLL_COORDS`: the d terms written out, left to right
    (fused into the surrounding elementwise loop). Agrees with the reference
    to rounding (bit for bit for d <= 2).
    """
    if a.shape[-1] > UNROLL_COORDS:
        return _coord_sum_reference(a)
    return _dispatch(_coord_sum_cpu, _coord_sum_reference, a)


def _segment_sum_cpu(values, ids, n):
    ids = jnp.where((ids >= 0) & (ids < n), ids, n)  # negative indices would wrap round
    return jnp.zeros((n,), values.dtype).at[ids].add(values, mode="drop")


def _segment_sum_reference(values, ids, n):
    on = jnp.arange(n)[:, None] == ids[None, :]
    return jnp.sum(jnp.where(on, values[None, :], 0.0), 1)


def segment_sum(values: Array, ids: Array, n: int) -> Array:
    """(n,) the sums of ``values`` (m,) over each id in ``ids`` (m,) int (ids outside [0, n) dropped).

    Reference: a dense comparison with every id, summed (no scatter: colliding
    scatter-adds are slow on GPUs). CPU: a scatter-add, ~20× faster on
    XLA:CPU for slpc's 513 rows and 50 segments (the dense form's column
    sums are a strided pass). Agrees with the reference to rounding (the
    order of the additions differs).
    """
    return _dispatch(lambda v, i: _segment_sum_cpu(v, i, n), lambda v, i: _segment_sum_reference(v, i, n),
                     values, ids)


# ---------------------------------------------------------------------------
# Squared distances (difference form: exact to rounding, never negative)


def _sq_dist_cpu(A, B):
    acc = None
    for c in range(A.shape[-1]):
        diff = A[:, c, None] - B[None, :, c]
        acc = diff * diff if acc is None else acc + diff * diff
    return acc


def _sq_dist_reference(A, B):
    diff = A[:, None, :] - B[None, :, :]
    return jnp.sum(diff * diff, axis=-1)


def sq_dist(A: Array, B: Array) -> Array:
    """Pairwise squared Euclidean distances, (m, d) × (n, d) -> (m, n).

    Differences are taken explicitly (not ‖a‖² − 2a·b + ‖b‖²), so entries are
    exact to rounding, never negative, and zero for equal points. CPU (d <=
    `UNROLL_PAIRS`): coordinates written out, summed left to right, so an
    entry has the same value wherever it is computed. Agrees with the
    reference to rounding (bit for bit for d <= 2).
    """
    A = jnp.asarray(A)
    B = jnp.asarray(B)
    dt = jnp.result_type(A, B)
    A, B = A.astype(dt), B.astype(dt)
    if A.shape[-1] > UNROLL_PAIRS:
        return _sq_dist_reference(A, B)
    return _dispatch(_sq_dist_cpu, _sq_dist_reference, A, B)


def _segment_terms(P, A, B, csum):
    """Shared formula of `segment_sq_dist` (``csum`` sums a list of coordinate terms)."""
    d = P.shape[-1]
    ab = [B[..., k] - A[..., k] for k in range(d)]
    den = csum([u * u for u in ab])
    inv = jnp.where(den > 0, 1.0 / jnp.where(den > 0, den, 1.0), 0.0)[..., None]
    ab = [u[..., None] for u in ab]
    ap = [P[:, k] - A[..., k, None] for k in range(d)]
    t = jnp.clip(csum([u * v for u, v in zip(ap, ab)]) * inv, 0.0, 1.0)
    d2 = csum([(u - t * v) ** 2 for u, v in zip(ap, ab)])
    # Past the far end, |P − B|² computed from P − B itself (t = 0 already
    # gives |P − A|² exactly): two segments sharing the vertex nearest to P
    # then tie exactly, and the first wins everywhere (jit, eager, vmap)
    # instead of by rounding. B is taken also where it is no farther than
    # the projection: a GPU's fused multiply-adds can leave t a rounding
    # short of 1 at the vertex itself (an H100 read 1e-13 for 0).
    dB = csum([(P[:, k] - B[..., k, None]) ** 2 for k in range(d)])
    at_b = (t >= 1.0) | (dB <= d2)
    return jnp.where(at_b, dB, d2), jnp.where(at_b, 1.0, t)


def _segment_cpu(P, A, B):
    return _segment_terms(P, A, B, lambda terms: sum(terms[1:], terms[0]))


def _segment_reference(P, A, B):
    return _segment_terms(P, A, B, lambda terms: jnp.sum(jnp.stack(terms), 0))


def segment_sq_dist(P: Array, A: Array, B: Array) -> tuple[Array, Array]:
    """Squared distances from points to segments, and the projection parameter.

    Exact: the parameter t is clamped to [0, 1] (a zero-length segment is a
    point, t = 0), and past the far end the distance is computed from P − B
    itself, so two segments meeting at the vertex nearest to a point tie
    exactly. CPU (d <= `UNROLL_COORDS`): coordinates written out. Agrees with
    the reference to rounding (bit for bit for d <= 2).

    Args:
      P: (M, d) points.
      A, B: (..., d) segment ends.

    Returns:
      ``(d2, t)``, each of shape (..., M).
    """
    if P.shape[-1] > UNROLL_COORDS:
        return _segment_reference(P, A, B)
    return _dispatch(_segment_cpu, _segment_reference, P, A, B)


# ---------------------------------------------------------------------------
# Index of the minimum


def first_argmin(x: Array, axis: int = -1) -> Array:
    """First index of the minimum along `axis`, as int32.

    Equals ``jnp.argmin`` on inputs without NaN; written as a minimum then
    a minimum over the indices where it is reached (two plain reductions,
    which every backend fuses; XLA:CPU's variadic argmin reduction is several
    times slower). One version for every platform.
    """
    x = jnp.asarray(x)
    axis = axis % x.ndim
    n = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = n
    idx = jnp.arange(n, dtype=jnp.int32).reshape(shape)
    mn = jnp.min(x, axis=axis, keepdims=True)
    return jnp.min(jnp.where(x == mn, idx, n), axis=axis)


# ---------------------------------------------------------------------------
# Long chains of tiny sequential steps

# Steps per loop iteration of `serial_scan` on a GPU. Measured on one H100
# (jax 0.11.2): PACBO's 500-step accept chain took 3,589 µs as a plain scan
# (~7 µs of loop overhead a step), 929 µs unrolled by 10 and 741 µs by 25;
# a whole one-stream round 6,512 -> 3,735 µs, and 4,096 streams batched
# 231k -> 286k stream-updates/s. On XLA:CPU unrolling made the chain slower
# (92 -> 318 µs) and its compile longer, so the CPU keeps the plain scan.
SERIAL_UNROLL_GPU = 25


def _serial_scan_reference(body, init, xs):
    return lax.scan(body, init, xs)


def _serial_scan_gpu(body, init, xs):
    return lax.scan(body, init, xs, unroll=SERIAL_UNROLL_GPU)


def serial_scan(body: Callable, init, xs):
    """``lax.scan(body, init, xs)`` for a long chain of cheap steps (each a few scalar operations).

    On a GPU each loop iteration costs a few microseconds of control flow,
    far more than such a step's arithmetic, so where the default backend is
    a GPU the loop is unrolled (`SERIAL_UNROLL_GPU` steps an iteration);
    elsewhere it is the plain scan.
    The same steps in the same order either way (bit for bit on a CPU, where
    `tests/test_ops.py` runs both).

    Returns:
      ``(final_carry, stacked_outputs)`` as `lax.scan`.
    """
    # Chosen by the default backend at trace time, not by `lax.platform_dependent` as the other
    # operations: wrapped in it, the plain scan made a whole PACBO round 8-11 % slower on XLA:CPU
    # (ab_speed.py, twice), although the compiled program has no conditional. A program traced
    # with a GPU as the default backend but compiled for a CPU gets the unrolled scan (slower there,
    # the same results).
    if getattr(_state, "reference", False) or jax.default_backend() not in ("gpu", "cuda", "rocm"):
        return _serial_scan_reference(body, init, xs)
    return _serial_scan_gpu(body, init, xs)


# ---------------------------------------------------------------------------
# Matrix products at full float32 precision

# JAX's default float32 matmul on recent NVIDIA GPUs (and TPUs) rounds the
# operands to TensorFloat32 (10-bit mantissa). On an H100 that moved a
# landmark embedding by 6e-4, left an exact MDS with stress 2e-4 (under 1e-5
# on a CPU) and made the batch principal curve's loss NaN (reproduced on a
# CPU by rounding the operands to 10 bits). The
# learners' products are small; they are all taken at full precision, on
# every backend and whatever the user's `jax_default_matmul_precision`.
EXACT = lax.Precision.HIGHEST


def matmul(a: Array, b: Array) -> Array:
    """``a @ b`` at full float32 precision (`EXACT`) on every backend."""
    return jnp.matmul(a, b, precision=EXACT)


def einsum(subscripts: str, *operands: Array) -> Array:
    """``jnp.einsum`` at full float32 precision (`EXACT`) on every backend."""
    return jnp.einsum(subscripts, *operands, precision=EXACT)
