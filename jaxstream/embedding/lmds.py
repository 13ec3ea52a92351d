"""Landmark MDS (V. de Silva and J. B. Tenenbaum, 2004): classical MDS of the
landmarks and the out-of-sample map of any point from its distances to them."""
from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from .. import _ops
from .._checks import check_points
from .._linalg import eigh as _safe_eigh
from ..geometry import safe_sqrt
from .distances import Metric, _make_dist

Array = jax.Array

__all__ = ["LMDSModel", "lmds_fit", "lmds_transform", "check_eigen", "lmds_embed"]


class LMDSModel(NamedTuple):
    """Classical MDS of the landmarks and the out-of-sample map.

    A point with squared distances ``delta`` (n,) to the landmarks is embedded
    at ``delta @ weights + offset`` which is ``-1/2 · L# (delta - delta_mu)``.

    Attributes:
      coords: (n, k) landmark coordinates, rows ``sqrt(λ_i) v_i`` (zero rows
        for masked landmarks).
      weights: (n, k) equal to ``-1/2 · L#ᵀ`` (masked rows zero).
      offset: (k,) equal to ``1/2 · L# delta_mu``.
      eigvals: (k,) the top k eigenvalues of B, descending.
      n_positive: int32, number of eigenvalues of B that are positive (above a
        relative tolerance). Coordinates for the dimensions ``i >= n_positive``
        are zero.
      mask: (n,) bool, which landmarks were used.
    """

    coords: Array
    weights: Array
    offset: Array
    eigvals: Array
    n_positive: Array
    mask: Array


@functools.partial(jax.jit, static_argnames=("n_components", "rtol"))
def lmds_fit(sq_dist, n_components: int, mask=None, rtol: Optional[float] = None, weights=None) -> LMDSModel:
    """Classical MDS of the landmarks (traceable; flags instead of raising).

    B = -1/2 · H Δ H with H the centring over the unmasked landmarks; its top
    k eigenpairs (eigh) give the landmark coordinates and the pseudo-inverse
    transpose L# (rows ``v_iᵀ / sqrt(λ_i)``).

    With ``weights`` w (an option beyond de Silva and Tenenbaum), landmark i
    counts as w_i points: the centring is the w-weighted mean, and with
    W = diag(w / mean(w)) the top eigenpairs (λ, v) of W^½ B W^½ give
    coordinates ``W^-½ v sqrt(λ)`` and the map's rows ``W^½ v / sqrt(λ)``.
    For integer weights this is exactly the landmark MDS of a landmark set
    in which landmark i is repeated w_i times. Weighting each landmark by
    the number of points it stands for (`jaxstream.embedding.landmark_weights`) makes the
    landmarks' MDS follow the data's distribution rather than the spread of
    a dominating set (a landmark on an outlier or a small cluster counts
    for the few points it covers).

    Args:
      sq_dist: (n, n) squared distances between landmarks.
      n_components: k, the embedding dimension (static).
      mask: optional (n,) bool, landmarks to use (the others are ignored and
        get zero coordinates).
      rtol: eigenvalues <= ``rtol · max|λ|`` count as non-positive; default
        ``10 · n · machine epsilon``.
      weights: optional (n,) non-negative landmark weights; a landmark of
        weight 0 is ignored like a masked one, and so is a negative or NaN
        weight (the function is traceable, so values are not checked; a
        wrong shape raises ValueError). None: the classical landmark
        MDS (all-one weights give it up to rounding).

    Returns:
      `LMDSModel`. If fewer than k eigenvalues are positive,
      ``n_positive < k`` and the missing dimensions are zero (see
      `check_eigen` for a host-side error).
    """
    sq = jnp.asarray(sq_dist)
    n = sq.shape[0]
    if sq.ndim != 2 or sq.shape[1] != n:
        raise ValueError(f"sq_dist must be square (n, n); got {tuple(sq.shape)}")
    k = int(n_components)
    if not 1 <= k <= n:
        raise ValueError(f"n_components must be in [1, n_landmarks={n}]; got {k}")
    mask = jnp.ones((n,), bool) if mask is None else jnp.asarray(mask, bool)
    if weights is not None:
        if jnp.shape(weights) != (n,):
            raise ValueError(f"weights must have shape ({n},) (one per landmark); got {tuple(jnp.shape(weights))}")
        weights = jnp.asarray(weights, sq.dtype)
        mask = mask & (weights > 0)
    w = mask.astype(sq.dtype)
    mm = mask[:, None] & mask[None, :]
    sq = jnp.where(mm, sq, 0.0)
    if weights is not None:  # relative weights, mean 1 over the used landmarks (all 1 = the unweighted fit)
        w = jnp.where(mask, weights, 0.0)
        w = w * (jnp.sum(mask) / jnp.maximum(jnp.sum(w), jnp.finfo(sq.dtype).tiny))
    cnt = jnp.maximum(jnp.sum(w), 1.0)
    delta_mu = _ops.matmul(sq, w) / cnt
    total = jnp.sum(delta_mu * w) / cnt
    B = -0.5 * (sq - delta_mu[:, None] - delta_mu[None, :] + total)
    B = jnp.where(mm, B, 0.0)
    if weights is not None:
        root_w = safe_sqrt(w)
        B = root_w[:, None] * B * root_w[None, :]
    lam_all, V = _safe_eigh(B)  # derivative finite with masked (zero) rows and repeated eigenvalues
    if rtol is None:
        rtol = 10.0 * n * float(jnp.finfo(sq.dtype).eps)
    tol = rtol * jnp.max(jnp.abs(lam_all))
    n_pos = jnp.sum(lam_all > tol).astype(jnp.int32)
    lam = lam_all[::-1][:k]
    V = V[:, ::-1][:, :k] * mask[:, None]
    pos = lam > tol
    root = jnp.sqrt(jnp.where(pos, lam, 1.0))
    if weights is None:
        coords = jnp.where(pos, V * root, 0.0)
        pinv_t = jnp.where(pos, V / root, 0.0)  # (n, k): L#ᵀ
    else:
        inv_root_w = jnp.where(mask, 1.0 / jnp.where(mask, root_w, 1.0), 0.0)
        coords = jnp.where(pos, V * inv_root_w[:, None] * root, 0.0)
        pinv_t = jnp.where(pos, V * root_w[:, None] / root, 0.0)
    weights = -0.5 * pinv_t
    offset = 0.5 * _ops.matmul(delta_mu, pinv_t)
    return LMDSModel(coords, weights, offset, lam, n_pos, mask)


@jax.jit
def lmds_transform(model: LMDSModel, sq_dist_x) -> Array:
    """Out-of-sample embedding ``y = -1/2 · L# (δ_x − δ_μ)``.

    Args:
      model: from `lmds_fit`.
      sq_dist_x: (..., n) squared distances from points to the landmarks.

    Returns:
      (..., k) coordinates.
    """
    delta = jnp.where(model.mask, jnp.asarray(sq_dist_x), 0.0)
    return _ops.matmul(delta, model.weights) + model.offset


def check_eigen(n_positive, n_components: int) -> None:
    """Host-side error when fewer eigenvalues are positive than the embedding needs."""
    n_positive = int(n_positive)
    if n_positive < n_components:
        raise ValueError(
            f"landmark MDS: only {n_positive} eigenvalue(s) of the centred landmark matrix are positive, "
            f"fewer than n_components={n_components}; the landmarks span fewer dimensions than asked "
            "(too few or degenerate landmarks, or a strongly non-Euclidean metric). Lower n_components "
            "or use more landmarks.")


def lmds_embed(landmarks, points, n_components: int = 2, metric: Metric = None):
    """Host-side convenience: landmark MDS of `points` with the given landmarks.

    Args:
      landmarks: (n, p) landmark points.
      points: (m, p) points to embed.
      n_components: k.
      metric: as in `pairwise_distances`.

    Returns:
      ``(Y (m, k), landmark_coords (n, k))``.

    Raises:
      ValueError: on fewer than k positive eigenvalues, or bad input.
    """
    L = check_points(landmarks, "landmarks", min_rows=1)
    X = check_points(points, "points", dim=L.shape[1])
    if n_components >= L.shape[0]:
        raise ValueError(f"n_components={n_components} needs at least {n_components + 1} landmarks; got {L.shape[0]}")
    model, Y = _lmds_embed_jit(L, X, n_components, _make_dist(metric))
    check_eigen(model.n_positive, n_components)
    return Y, model.coords


@functools.partial(jax.jit, static_argnums=(2, 3))
def _lmds_embed_jit(L, X, k, dist):
    model = lmds_fit(dist.sqdist(None, L, L), k)
    return model, lmds_transform(model, dist.sqdist(None, X, L))
