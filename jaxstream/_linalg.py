"""Linear algebra with derivatives that stay finite on degenerate spectra."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _ops

Array = jax.Array

__all__ = ["eigh"]


@jax.custom_jvp
def eigh(a: Array) -> tuple[Array, Array]:
    """``jnp.linalg.eigh`` (ascending eigenvalues) with a degenerate-safe derivative.

    JAX's derivative of `eigh` divides by every eigenvalue gap, so a matrix
    with repeated eigenvalues anywhere in its spectrum (the zero rows of
    masked landmarks, the n − rank zero eigenvalues of an exactly low-rank
    Gram matrix) gives inf·0 = NaN in reverse mode even when only the top,
    well-separated eigenpairs are used. Here the coupling between two
    eigenvalues closer than 10·n·ε·max|λ| is set to 0: the derivative of an
    eigenvalue, and of the eigenvector of any eigenvalue separated from the
    rest of the spectrum, is exact; only eigenvectors inside a degenerate
    group (which are not differentiable) get the convention "no rotation
    inside the group".

    Args:
      a: (n, n) symmetric matrix (symmetrised as ``(a + aᵀ)/2``).

    Returns:
      ``(w, v)``: (n,) ascending eigenvalues and (n, n) eigenvectors in columns.
    """
    w, v = jnp.linalg.eigh(a)
    return w, v


@eigh.defjvp
def _eigh_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    w, v = eigh(a)
    da = 0.5 * (da + da.T)
    m = _ops.matmul(_ops.matmul(v.T, da), v)
    gap = w[None, :] - w[:, None]  # gap[i, j] = w_j − w_i
    n = a.shape[-1]
    tol = 10.0 * n * jnp.finfo(w.dtype).eps * jnp.maximum(jnp.max(jnp.abs(w)), jnp.finfo(w.dtype).tiny)
    ok = jnp.abs(gap) > tol
    f = jnp.where(ok, 1.0 / jnp.where(ok, gap, 1.0), 0.0)
    dw = jnp.diagonal(m)
    dv = _ops.matmul(v, f * m)
    return (w, v), (dw, dv)
