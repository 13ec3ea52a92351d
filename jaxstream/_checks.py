"""Host-side input validation shared by every learner.

Checks run on concrete (NumPy or committed JAX) arrays before anything is
traced. Inside `jit` nothing can raise on values, so the traced code paths
follow the documented policies of `run_stream` instead.
"""
from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp


def is_concrete(x) -> bool:
    """True when `x` holds values (not a tracer)."""
    return not isinstance(x, jax.core.Tracer)


def refuse_sparse(x, name: str = "x") -> None:
    """Raise TypeError for a scipy.sparse matrix or array (recognised without importing scipy)."""
    if hasattr(x, "toarray") and hasattr(x, "nnz"):
        raise TypeError(f"{name} is a sparse matrix: sparse input is not supported; pass a dense array "
                        f"({name}.toarray())")


#: How far below sqrt(finfo(dtype).max) the largest accepted |x| lies (2**10): squared
#: distances between points of up to 2**18 coordinates, and sums of many of them, stay finite.
MAGNITUDE_MARGIN = 2.0 ** 10

_NONFINITE_HINT = "drop them, or pass nonfinite='skip' to run_stream to mask them out"


def magnitude_limit(dtype) -> float:
    """The largest |x| that the learners accept in `dtype`: ``sqrt(finfo(dtype).max) / 2**10``.

    Every learner works with squared distances, so a coordinate whose square
    overflows the working dtype would turn summaries into inf or NaN. The
    limit is about 1.8e16 in float32 and 1.3e151 in float64.
    """
    return float(np.sqrt(np.finfo(dtype).max)) / MAGNITUDE_MARGIN


def spread_limit(dtype) -> float:
    """The smallest non-zero spread of a batch that the learners accept in `dtype`:
    ``sqrt(finfo(dtype).tiny) * 2**10`` (about 1.1e-16 in float32, 1.5e-151 in float64).

    Below it, squared distances between the points underflow to zero (or to
    subnormals, which XLA on CPU flushes to zero), so the points would look
    identical to every learner.
    """
    return float(np.sqrt(np.finfo(dtype).tiny)) * MAGNITUDE_MARGIN


def check_magnitude(x: np.ndarray, name: str = "x", dtype=None) -> None:
    """The documented policy for values out of the working dtype's range: an error.

    Two cases raise a `ValueError` naming what to do (rescale the data, or
    compute in float64), instead of a summary that is silently inf, NaN or
    degenerate:

    * finite values beyond `magnitude_limit` (their squares overflow);
    * a batch of points (n >= 2) whose spread (the largest range of a
      column) is not zero but below `spread_limit` (their squared distances
      underflow to zero).

    Non-finite values are left to the caller's NaN/inf policy. An array in
    range costs one pass for its largest and smallest values and one per
    column (small d) for the columns' ranges: a few ms for 10^6 x 3 float32
    (`benchmarks/bench_checks.py`).

    Args:
      x: the (n, d) (or any-shaped) array.
      name: name used in the error message.
      dtype: the dtype it will be learned in (default: its own).

    Raises:
      ValueError: as above.
    """
    if x.size == 0 or x.dtype.kind != "f":
        return
    dtype = np.dtype(x.dtype if dtype is None else dtype)
    lim = magnitude_limit(dtype)
    rows = x.reshape(x.shape[0], -1) if x.ndim >= 1 else x.reshape(1, 1)
    x64 = (" or compute in float64 (jax.config.update('jax_enable_x64', True); --float64 on the command line)"
           if dtype != np.float64 else "")
    flat = rows.reshape(-1)
    hi, lo = flat.max(), flat.min()  # contiguous SIMD reductions; NaN propagates
    finite = bool(np.isfinite(hi) and np.isfinite(lo))
    with np.errstate(invalid="ignore", over="ignore"):
        if not finite or hi > lim or -lo > lim:
            big = np.isfinite(rows) & (np.abs(rows) > lim)
            if big.any():
                first = int(np.flatnonzero(big.any(axis=1))[0])
                m = float(np.max(np.abs(rows[big])))
                raise ValueError(
                    f"{name} has {int(big.any(axis=1).sum())} row(s) with values beyond +-{lim:.3g} (first at "
                    f"index {first}; largest |x| = {m:.3g}): the learners work with squared distances, which "
                    f"overflow {dtype} there; rescale the data (e.g. divide it by "
                    f"{10.0 ** math.floor(math.log10(m)):.0e}){x64}")
        if rows.shape[0] < 2 or (finite and hi == lo):
            return
        if finite:
            if rows.shape[1] <= 16:  # strided column views: much faster than an axis-0 reduction for small d
                ranges = np.array([rows[:, j].max() - rows[:, j].min() for j in range(rows.shape[1])])
            else:
                ranges = rows.max(axis=0) - rows.min(axis=0)
        else:  # NaN/inf rows (allowed by the caller) are left out
            ranges = np.fmax.reduce(rows, axis=0) - np.fmin.reduce(rows, axis=0)
        spread = np.fmax.reduce(ranges)
    if np.isfinite(spread) and 0 < spread < spread_limit(dtype):
        raise ValueError(
            f"{name} spans only {float(spread):.3g} (the largest range of a column): squared distances between "
            f"its points underflow {dtype} (below a spread of {spread_limit(dtype):.3g} they all look "
            f"identical); rescale the data (e.g. multiply it by {10.0 ** -math.floor(math.log10(float(spread))):.0e}){x64}")


def _all_finite(x: np.ndarray) -> bool:
    """Whether a float array has no NaN/inf, from its max and min (NaN propagates): one fast pass."""
    if x.size == 0 or x.dtype.kind != "f":
        return True
    flat = x.reshape(-1)
    return bool(np.isfinite(flat.max()) and np.isfinite(flat.min()))


def host_array(x, name: str = "x") -> np.ndarray:
    """A concrete array-like as a NumPy array, with the package's errors.

    A masked array's masked entries become NaN, so the caller's NaN policy
    (an error, or ``nonfinite="skip"``) applies to them instead of their fill
    values being learned as data. A ragged list is a ValueError.
    """
    if np.ma.isMaskedArray(x):
        if np.ma.getmaskarray(x).any():
            if np.asarray(x).dtype.kind not in "biuf":
                raise ValueError(f"{name} must be numeric; got a masked array of dtype {np.asarray(x).dtype}")
            return np.ma.filled(np.ma.asarray(x).astype(np.result_type(np.asarray(x).dtype, np.float32)), np.nan)
        return np.ma.getdata(x)
    try:
        return np.asarray(x)
    except ValueError:  # NumPy's "inhomogeneous shape"
        raise ValueError(f"{name} must be a rectangular numeric array of shape (n, d); "
                         "got rows of different lengths") from None


def check_points(x, name: str = "x", *, dim: int | None = None, min_rows: int = 0,
                 allow_nonfinite: bool = False, nonfinite_hint: str = _NONFINITE_HINT) -> jnp.ndarray:
    """Validate a (n, d) array of points and return it as a JAX array.

    Concrete inputs are checked for values: NaN/inf (unless
    `allow_nonfinite`) and finite values too large for the working dtype
    (`check_magnitude`: beyond ``sqrt(finfo.max)/2**10``, about 1.8e16 in
    float32), which raise.

    Args:
      x: array-like of shape (n, d).
      name: name used in error messages.
      dim: expected d, or None to accept any d >= 1.
      min_rows: smallest acceptable n.
      allow_nonfinite: when False, NaN or inf raise (only checked for concrete
        inputs).
      nonfinite_hint: what the NaN/inf error advises (the caller's options).

    Returns:
      `x` as a floating JAX array of shape (n, d): float32/float64 inputs keep
      their dtype (float64 becomes float32 unless ``jax_enable_x64``);
      integers, booleans and float16 become JAX's default float.

    Raises:
      ValueError: on a ragged, complex or non-numeric input, a wrong rank,
        dimension, too few rows, non-finite values or values out of range.
    """
    refuse_sparse(x, name)
    if is_concrete(x):
        x = host_array(x, name)
        if x.dtype.kind == "c":
            raise ValueError(f"{name} is complex ({x.dtype}): Complex data not supported; pass real coordinates, e.g. "
                             "np.stack([z.real, z.imag], -1)")
        if x.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got an array of dtype {x.dtype}")
        if x.dtype.kind != "f" or x.dtype.itemsize < 4:
            # integers, booleans and half precision learn in JAX's default float
            x = x.astype(jnp.zeros(()).dtype)
    if is_concrete(x) and x.dtype == np.float64 and not jax.config.jax_enable_x64 and x.size and (
            max(np.fmax.reduce(x.reshape(-1)), -np.fmin.reduce(x.reshape(-1))) > np.finfo(np.float32).max):
        big = np.abs(x) > np.finfo(np.float32).max
        if (big & np.isfinite(x)).any():
            raise ValueError(f"{name} has finite values beyond the float32 range (|x| > 3.4e38), which "
                             "would become inf; rescale the data or enable jax_enable_x64")
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n, d); got shape {tuple(x.shape)}")
    if x.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column (d >= 1); got shape {tuple(x.shape)}: "
                         f"0 feature(s) (shape={tuple(x.shape)}) while a minimum of 1 is required.")
    if dim is not None and x.shape[1] != dim:
        raise ValueError(f"{name} has dimension d={x.shape[1]} but the learner state has d={dim} "
                         f"({name} has {x.shape[1]} features, but it is expecting {dim} features as input)")
    if x.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows; got {x.shape[0]}")
    if is_concrete(x) and not allow_nonfinite and not _all_finite(np.asarray(x)):
        bad = ~np.isfinite(np.asarray(x)).all(axis=1)
        if bad.any():
            idx = np.flatnonzero(bad)
            raise ValueError(f"{name} has {idx.size} row(s) with NaN or inf (first at index {idx[0]}); "
                             f"{nonfinite_hint}")
    if is_concrete(x):
        xn = np.asarray(x)
        # checked against the dtype it will be learned in
        check_magnitude(xn, name, np.float32 if xn.dtype == np.float64 and not jax.config.jax_enable_x64 else None)
    return jnp.asarray(x)


def check_point(x, dim: int, name: str = "x") -> None:
    """Static (trace-time) shape check of one observation of shape (d,)."""
    if x.ndim != 1 or x.shape[0] != dim:
        raise ValueError(f"{name} must have shape ({dim},) to match the learner state; got {tuple(x.shape)}")


def check_capacity(value: int, name: str, minimum: int = 1) -> int:
    """Validate a static capacity (a Python int >= minimum)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a Python int (it is a static capacity); got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def memory_limit() -> int:
    """Bytes the default device can hold: its allocator's limit (GPU, TPU) or the host's RAM (CPU)."""
    dev = jax.devices()[0]
    stats = dev.memory_stats() if dev.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): no limit known
        return 2 ** 62


def check_fits(n_values: int, what: str, fix: str) -> None:
    """Refuse a configuration whose state alone cannot fit the device (an allocation that large
    swaps or hangs before XLA reports it), counting ``n_values`` values of the default float."""
    check_bytes_fit(n_values * jnp.zeros(()).dtype.itemsize, what, fix)


def check_bytes_fit(need: int, what: str, fix: str, n_devices: int = 1) -> None:
    """Refuse ``need`` bytes spread over ``n_devices`` devices where they exceed the devices' memory."""
    have = memory_limit() * n_devices
    if need > have:
        where = "this device's memory" if n_devices == 1 else f"the memory of its {n_devices} devices"
        raise ValueError(f"{what} needs {need / 2 ** 30:,.1f} GiB, more than {where} "
                         f"({have / 2 ** 30:,.1f} GiB); {fix}")


def tree_nbytes(tree) -> int:
    """Bytes of a pytree's array leaves (arrays or `jax.ShapeDtypeStruct`; key arrays count their key data)."""
    total = 0
    for leaf in jax.tree_util.tree_leaves(tree):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.eval_shape(jax.random.key_data, leaf)
        total += int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
    return total


class Range(NamedTuple):
    """The valid values of one numeric hyper-parameter.

    Attributes:
      lo, hi: the bounds.
      lo_open, hi_open: whether the bound itself is excluded.
      nan_ok: NaN is a valid value (it means "automatic").
      what: a few words saying what the parameter is, for error messages.
      integer: the value must be a whole number.
    """

    lo: float
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = True
    nan_ok: bool = False
    what: str = ""
    integer: bool = False

    def describe(self) -> str:
        """The range in words, e.g. ``"> 0 and finite"`` or ``"NaN (automatic) or in [1, inf]"``."""
        if self.hi == math.inf:
            core = f"{'>' if self.lo_open else '>='} {self.lo:g}" + (" and finite" if self.hi_open else " (inf allowed)")
        else:
            core = f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"
        if self.integer:
            core = "a whole number " + core
        return f"NaN (automatic) or {core}" if self.nan_ok else core

    def ok(self, v) -> np.ndarray:
        """Elementwise: which values are valid (bounds rounded to v's float dtype, so that
        ``float32(1e-6)`` passes ``>= 1e-6``)."""
        v = np.asarray(v)
        dt = v.dtype if v.dtype.kind == "f" else np.dtype(np.float64)
        v = v.astype(dt)
        lo, hi = dt.type(self.lo), dt.type(self.hi)
        with np.errstate(invalid="ignore", over="ignore"):
            good = (v > lo) if self.lo_open else (v >= lo)
            good &= (v < hi) if self.hi_open else (v <= hi)
            if self.integer:
                good &= np.floor(v) == v
        return good | (np.isnan(v) & self.nan_ok)


_POS = dict(lo=0.0, lo_open=True)
INF = math.inf

#: The valid range of every numeric hyper-parameter, by learner name (``config.name``).
PARAM_RANGES = {
    "slpc": {
        "delta": Range(1e-6, what="the lattice spacing in standardised units (vertex coordinates are "
                                  "int32 multiples of it)"),
        "R": Range(0.0, what="the theory's radius (0: automatic)"),
        "L": Range(0.0, what="the largest length of a line (0: automatic)"),
        "h_scale": Range(**_POS, what="the multiplier of the segment price"),
        "length_scale": Range(0.0, what="the multiplier of the length price"),
        "eta_scale": Range(**_POS, what="the multiplier of eta_t"),
        "z_scale": Range(0.0, what="the multiplier of the perturbations"),
        "epsilon": Range(0.0, 1.0, hi_open=False, what="the exploration probability"),
        "outlier_scale": Range(**_POS, hi_open=False, what="the cap on one point's loss, in noise variances"),
        "memory": Range(1.0, hi_open=False, nan_ok=True, what="the forgetting time scale in rounds"),
    },
    "pacbo": {
        "radius": Range(**_POS, nan_ok=True, what="the bound R on ||x|| (None/NaN: learned)"),
        "lambda_scale": Range(**_POS, what="the multiplier of lambda_t"),
        "lambda_power": Range(0.0, 1.0, hi_open=False,
                              what="the power of n in lambda_t (theory: 0.5; larger powers make "
                                   "R*sigma*n**power overflow float32 and lambda_t 0)"),
        "lambda2_scale": Range(**_POS, what="the multiplier of lambda_2"),
        "lambda_cap": Range(**_POS, hi_open=False, what="the cap lambda_t <= lambda_cap/(2 sigma^2) (inf: no cap, "
                                                         "the paper's preset)"),
        "prior_scale": Range(**_POS, what="the prior ball's radius in units of R"),
        "price_scale": Range(0.0, what="the price of a centre"),
        "log_n_weight": Range(0.0, what="the log n weight of the prior rate"),
        "noise_scale": Range(**_POS, nan_ok=True, what="the noise scale sigma (None/NaN: estimated)"),
        "noise_prior_points": Range(0.0, hi_open=False, what="the weight of the noise scale's guess in points "
                                                              "(inf: sigma = noise_scale exactly)"),
        "proposal_scale": Range(**_POS, what="the initial multiplier of the proposal scales"),
        "scale_spread": Range(1.0, what="the ratio between the two proposal scales"),
        "adapt_rate": Range(0.0, what="the adaptation step of the proposal scale"),
        "stay_prob": Range(0.0, 1.0, hi_open=False, what="the probability of a proposal from the current k"),
        "drift_level": Range(0.0, 1.0, what="the level of the per-cluster drift test (0: never forget)"),
        "provisional_level": Range(0.0, 1.0, what="the level below which an unexplained recent point "
                                                  "predicts as a provisional centre (0: never)"),
    },
    "landmark_mds": {
        "eps0": Range(0.0, what="the initial threshold epsilon"),
        "min_support": Range(0.0, integer=True, what="the noise-robust replacement's support m"),
        "density_shift": Range(0.0, 1.0, hi_open=False, what="the density shift c"),
    },
}


def check_params(learner: str, params) -> None:
    """Check a learner's numeric hyper-parameters against `PARAM_RANGES` where they are concrete.

    Args:
      learner: the learner's name (``config.name``: "slpc", "pacbo", "landmark_mds").
      params: its params NamedTuple (or a dict name: value). Traced values
        (inside `jit`/`vmap`) are not checked: nothing can raise on them.
        Arrays (a grid of values to vmap over) are checked elementwise.

    Raises:
      ValueError: naming the parameter, its value and its valid range.
    """
    ranges = PARAM_RANGES.get(learner)
    if ranges is None or params is None:
        return
    items = params.items() if isinstance(params, dict) else params._asdict().items()
    for name, value in items:
        rng = ranges.get(name)
        if rng is None or value is None or not is_concrete(value):
            continue
        try:
            v = np.asarray(value)
            if v.dtype.kind not in "biuf":
                raise TypeError
        except (TypeError, ValueError):
            raise ValueError(f"{learner}: {name} must be a number ({rng.what}); got {value!r:.60}") from None
        bad = ~rng.ok(v)
        if bad.any():
            shown = v if v.ndim == 0 else v[bad].ravel()[0]
            where = "" if v.ndim == 0 else f" (in an array of shape {v.shape})"
            if v.dtype.kind == "f" and v.dtype != np.float64:
                where += f" (as {v.dtype}, the learner's dtype)"
            raise ValueError(f"{learner}: {name} must be {rng.describe()} ({rng.what}); got "
                             f"{float(shown)!r}{where}")
