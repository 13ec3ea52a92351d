"""Geometry of masked polygonal lines and of the lattice δ·Z^d.

A polygonal line is a fixed-capacity vertex array ``vertices[V, d]`` and a
count ``n_vertices`` (2 <= n_vertices <= V); segment j joins vertices j and
j + 1, so there are ``n_vertices - 1`` active segments. Everything is exact
(the projection parameter is clamped to [0, 1]; a zero-length segment is a
point) and broadcasts over leading axes, so a call can cover
candidates × points × segments at once.
"""
from __future__ import annotations

import itertools

import numpy as np
import jax
import jax.numpy as jnp

__all__ = [
    "safe_sqrt", "safe_norm", "segment_sq_dist", "segment_mask", "polyline_sq_dist",
    "polyline_projection", "polyline_length", "soft_polyline_sq_dist", "snap_to_lattice",
    "lattice_stencil", "lattice_neighbours",
]

Array = jax.Array


def safe_sqrt(x: Array) -> Array:
    """``sqrt(max(x, 0))`` whose derivative at 0 is 0 instead of inf/NaN.

    The square root of a squared length is not differentiable at 0 (a
    zero-length padding segment, the zero diagonal of a distance matrix,
    coincident points); this form takes the subgradient 0 there, and the
    ordinary derivative 1/(2·sqrt(x)) for x > 0, in forward and reverse mode.
    """
    x = jnp.asarray(x)
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def safe_norm(x: Array, axis: int = -1) -> Array:
    """Euclidean norm along `axis` with derivative 0 at the zero vector (see `safe_sqrt`)."""
    return safe_sqrt(jnp.sum(x * x, axis=axis))


def segment_sq_dist(p: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """Squared distance from points to segments, and the projection parameter.

    Args:
      p: points, shape (..., d).
      a, b: segment end points, shapes broadcastable with `p`, (..., d).

    Returns:
      ``(sqdist, t)`` with shape of the broadcast leading axes; ``t`` in [0, 1]
      is the position of the projection on [a, b] (0 for a degenerate
      segment).
    """
    ab = b - a
    ap = p - a
    denom = jnp.sum(ab * ab, axis=-1)
    safe = denom > 0
    t = jnp.where(safe, jnp.sum(ap * ab, axis=-1) / jnp.where(safe, denom, 1.0), 0.0)
    t = jnp.clip(t, 0.0, 1.0)
    diff = ap - t[..., None] * ab
    return jnp.sum(diff * diff, axis=-1), t


def segment_mask(n_vertices: Array, capacity: int) -> Array:
    """Boolean mask of the active segments, shape (capacity - 1,)."""
    return jnp.arange(capacity - 1) < (n_vertices - 1)


def _all_segment_sq_dist(points, vertices, n_vertices):
    d2, t = segment_sq_dist(points[..., :, None, :], vertices[..., None, :-1, :], vertices[..., None, 1:, :])
    mask = jnp.arange(vertices.shape[-2] - 1) < (jnp.asarray(n_vertices)[..., None] - 1)
    return jnp.where(mask[..., None, :], d2, jnp.inf), t


def polyline_sq_dist(points: Array, vertices: Array, n_vertices: Array) -> Array:
    """Exact squared distance from points to a masked polygonal line.

    Args:
      points: (..., n, d).
      vertices: (..., V, d) vertex capacity V; leading axes broadcast with
        `points` (e.g. a leading candidate axis).
      n_vertices: number of active vertices (>= 2): an int, or an int array
        with the leading (batch) shape of `vertices`.

    Returns:
      (..., n) squared distances (the slpc loss Δ(f, x)).
    """
    d2, _ = _all_segment_sq_dist(points, vertices, n_vertices)
    return jnp.min(d2, axis=-1)


def polyline_projection(points: Array, vertices: Array, n_vertices: Array) -> dict:
    """Projection of points onto a masked polygonal line.

    Args:
      points: (n, d).
      vertices: (V, d).
      n_vertices: number of active vertices (>= 2).

    Returns:
      A dict with ``sqdist`` (n,), ``segment`` (n,) index of the nearest segment
      (first one on ties), ``t`` (n,) position on that segment in [0, 1],
      ``point`` (n, d) the projected point and ``arclength`` (n,) its
      arc-length position from vertex 0.
    """
    d2, t = _all_segment_sq_dist(points, vertices, n_vertices)
    seg = jnp.argmin(d2, axis=-1)
    tt = jnp.take_along_axis(t, seg[..., None], axis=-1)[..., 0]
    a = vertices[seg]
    b = vertices[seg + 1]
    proj = a + tt[..., None] * (b - a)
    seg_len = safe_norm(vertices[1:] - vertices[:-1], axis=-1)
    seg_len = jnp.where(segment_mask(n_vertices, vertices.shape[0]), seg_len, 0.0)
    cum = jnp.concatenate([jnp.zeros((1,), seg_len.dtype), jnp.cumsum(seg_len)])
    arclength = cum[seg] + tt * seg_len[seg]
    return dict(sqdist=jnp.min(d2, axis=-1), segment=seg, t=tt, point=proj, arclength=arclength)


def polyline_length(vertices: Array, n_vertices: Array) -> Array:
    """Length ℓ(f) of a masked polygonal line (sum of active segment lengths).

    Differentiable in `vertices` everywhere: a zero-length segment (two
    equal vertices, or the padding rows, which usually repeat a vertex or
    are zero) contributes derivative 0 (`safe_norm`), never NaN.

    Args:
      vertices: (..., V, d).
      n_vertices: active vertex count, int or int array of the leading shape.

    Returns:
      (...) lengths.
    """
    diff = vertices[..., 1:, :] - vertices[..., :-1, :]
    seg_len = safe_norm(diff, axis=-1)
    mask = jnp.arange(vertices.shape[-2] - 1) < (jnp.asarray(n_vertices)[..., None] - 1)
    return jnp.sum(jnp.where(mask, seg_len, 0.0), axis=-1)


def soft_polyline_sq_dist(points: Array, vertices: Array, n_vertices: Array, temperature) -> Array:
    """Smooth relaxation of `polyline_sq_dist` (soft-min over segments).

    ``-τ·log Σ_j exp(-d_j/τ)`` over the active segments only: differentiable
    everywhere in the points, the vertices and τ > 0, never above the exact
    value, and within τ·log(#segments) of it. Masked (padding) segments are
    excluded with finite placeholders, so no inf·0 reaches a derivative
    (w.r.t. τ included) whatever the capacity. τ = 0 gives the exact
    `polyline_sq_dist` (its derivative w.r.t. τ is then 0, one-sided).

    Args:
      points: (..., n, d).
      vertices: (..., V, d).
      n_vertices: active vertex count (>= 2).
      temperature: τ >= 0 (scalar or broadcastable to (..., n)).

    Returns:
      (..., n) soft squared distances.
    """
    d2, _ = segment_sq_dist(points[..., :, None, :], vertices[..., None, :-1, :], vertices[..., None, 1:, :])
    mask = jnp.arange(vertices.shape[-2] - 1) < (jnp.asarray(n_vertices)[..., None] - 1)
    mask = jnp.broadcast_to(mask[..., None, :], d2.shape)
    hard = jnp.min(jnp.where(mask, d2, jnp.inf), axis=-1)
    d2 = jnp.where(mask, d2, 0.0)
    tau = jnp.asarray(temperature, d2.dtype)
    pos = tau > 0
    safe_tau = jnp.where(pos, tau, 1.0)
    # Shift by the hard minimum so the exponentials stay in range for small τ.
    z = -(d2 - jax.lax.stop_gradient(jnp.where(jnp.isfinite(hard), hard, 0.0))[..., None]) / safe_tau[..., None]
    soft = jax.lax.stop_gradient(jnp.where(jnp.isfinite(hard), hard, 0.0)) - safe_tau * jax.nn.logsumexp(
        z, axis=-1, where=mask)
    return jnp.where(pos, soft, hard)


def snap_to_lattice(v: Array, delta) -> Array:
    """Nearest point of the lattice δ·Z^d (round half to even, coordinatewise)."""
    return jnp.round(v / delta) * delta


def lattice_stencil(d: int, radius: int = 1) -> np.ndarray:
    """Integer offsets {-radius..radius}^d, shape ((2·radius+1)^d, d), origin first."""
    offs = [o for o in itertools.product(range(-radius, radius + 1), repeat=d) if any(o)]
    return np.array([(0,) * d] + offs, dtype=np.int32).reshape(-1, d)


def lattice_neighbours(v: Array, delta, radius: int = 1) -> Array:
    """Lattice points around v: snap(v) + δ·stencil, shape (..., (2r+1)^d, d)."""
    st = jnp.asarray(lattice_stencil(v.shape[-1], radius), dtype=jnp.result_type(v))
    return snap_to_lattice(v, delta)[..., None, :] + delta * st
