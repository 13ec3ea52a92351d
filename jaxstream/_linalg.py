"""Linear algebra with derivatives that stay finite on degenerate spectra."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _ops

Array = jax.Array

__all__ = ["eigh", "polar"]


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


@jax.custom_jvp
def polar(m: Array) -> Array:
    """The orthogonal polar factor ``U Vᵀ`` of a square matrix ``m = U S Vᵀ``, with a finite derivative.

    Differentiating ``jnp.linalg.svd`` divides by the gaps between singular
    values, so ``U Vᵀ`` of a matrix with a repeated singular value (a
    multiple of the identity, a zero matrix) gets an inf·0 = NaN derivative
    although ``U Vᵀ`` itself is smooth wherever ``s_i + s_j > 0``. Here the
    derivative is ``U X Vᵀ`` with ``X_ij = (K_ij − K_ji) / (s_i + s_j)``,
    ``K = Uᵀ dm V``, and 0 where ``s_i + s_j`` is 0 to rounding (the factor is not
    unique there).

    Args:
      m: (k, k) matrix.

    Returns:
      (k, k) orthogonal matrix (a reflection when ``det m < 0``).
    """
    u, _, vt = jnp.linalg.svd(m)
    return _ops.matmul(u, vt)


@polar.defjvp
def _polar_jvp(primals, tangents):
    (m,), (dm,) = primals, tangents
    u, s, vt = jnp.linalg.svd(m)
    k = _ops.matmul(_ops.matmul(u.T, dm), vt.T)
    total = s[:, None] + s[None, :]
    tol = 10.0 * m.shape[-1] * jnp.finfo(s.dtype).eps * jnp.maximum(jnp.max(s), jnp.finfo(s.dtype).tiny)
    ok = total > tol
    x = jnp.where(ok, (k - k.T) / jnp.where(ok, total, 1.0), 0.0)
    return _ops.matmul(u, vt), _ops.matmul(_ops.matmul(u, x), vt)
