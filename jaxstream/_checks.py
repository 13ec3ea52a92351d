"""Host-side input validation shared by every learner.

Checks run on concrete (NumPy or committed JAX) arrays before anything is
traced. Inside `jit` nothing can raise on values, so the traced code paths
follow the documented policies of `run_stream` instead.
"""
from __future__ import annotations

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


def check_points(x, name: str = "x", *, dim: int | None = None, min_rows: int = 0,
                 allow_nonfinite: bool = False) -> jnp.ndarray:
    """Validate a (n, d) array of points and return it as a JAX array.

    Args:
      x: array-like of shape (n, d).
      name: name used in error messages.
      dim: expected d, or None to accept any d >= 1.
      min_rows: smallest acceptable n.
      allow_nonfinite: when False, NaN or inf raise (only checked for concrete
        inputs).

    Returns:
      `x` as a floating JAX array of shape (n, d): float32/float64 inputs keep
      their dtype (float64 becomes float32 unless ``jax_enable_x64``);
      integers, booleans and float16 become JAX's default float.

    Raises:
      ValueError: on a ragged, complex or non-numeric input, a wrong rank,
        dimension, too few rows or non-finite values.
    """
    refuse_sparse(x, name)
    if is_concrete(x):
        try:
            x = np.asarray(x)
        except ValueError:
            raise ValueError(f"{name} must be a rectangular numeric array of shape (n, d); "
                             "got rows of different lengths") from None
        if x.dtype.kind == "c":
            raise ValueError(f"{name} is complex ({x.dtype}): Complex data not supported; pass real coordinates, e.g. "
                             "np.stack([z.real, z.imag], -1)")
        if x.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got an array of dtype {x.dtype}")
        if x.dtype.kind != "f" or x.dtype.itemsize < 4:
            # integers, booleans and half precision learn in JAX's default float
            x = x.astype(jnp.zeros(()).dtype)
    if is_concrete(x) and x.dtype == np.float64 and not jax.config.jax_enable_x64:
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
    if is_concrete(x) and not allow_nonfinite:
        bad = ~np.isfinite(np.asarray(x)).all(axis=1)
        if bad.any():
            idx = np.flatnonzero(bad)
            raise ValueError(
                f"{name} has {idx.size} row(s) with NaN or inf (first at index {idx[0]}); "
                "drop them, or pass nonfinite='skip' to run_stream to mask them out")
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
