"""Algorithms 1 and 2 of Li & Guedj: exhaustive FTPL over every lattice line.

Only for tiny lattices (there are about |Q|^(p+1) lines): the ground truth
that the local search of `jaxstream.curves.learner` approximates, and a way
to check the regret bounds numerically.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import jax
import jax.numpy as jnp

from .. import geometry
from .objective import Params, learning_rate, penalty

Array = jax.Array


def enumerate_lines(lattice_points, max_segments: int, max_length: float = np.inf):
    """All polygonal lines with vertices in a finite point set.

    Lines have 1..max_segments segments, no two consecutive vertices equal, and
    length <= max_length; a line and its reversal are distinct (as in F_p).
    Only for tiny sets: there are about |Q|^(p+1) of them.

    Args:
      lattice_points: (q, d) array.
      max_segments: p.
      max_length: L.

    Returns:
      ``(vertices[F, p+1, d], n_vertices[F])`` as NumPy arrays (padding rows
      repeat the last vertex).
    """
    pts = np.asarray(lattice_points, float)
    q = len(pts)
    lines = []
    frontier = [[i] for i in range(q)]
    for _ in range(max_segments):
        nxt = []
        for seq in frontier:
            for j in range(q):
                if j != seq[-1]:
                    s2 = seq + [j]
                    v = pts[s2]
                    if np.linalg.norm(np.diff(v, axis=0), axis=1).sum() <= max_length + 1e-12:
                        nxt.append(s2)
                        lines.append(s2)
        frontier = nxt
    F = len(lines)
    verts = np.zeros((F, max_segments + 1, pts.shape[1]))
    nv = np.zeros(F, np.int32)
    for f, seq in enumerate(lines):
        verts[f, :len(seq)] = pts[seq]
        verts[f, len(seq):] = pts[seq[-1]]
        nv[f] = len(seq)
    return verts, nv


class ExhaustiveResult(NamedTuple):
    """Output of `exhaustive_ftpl`.

    Attributes:
      choice: (T,) index of the line f̂_t used at round t (chosen before x_t).
      losses: (T,) Δ(f̂_t, x_t).
      line_losses: (F, T) Δ(f, x_t) for every line.
      penalties: (F,) h(f).
      z: (F,) the Exp(1) perturbations, drawn once.
    """

    choice: Array
    losses: Array
    line_losses: Array
    penalties: Array
    z: Array


def exhaustive_ftpl(key, xs, vertices, n_vertices, params: Params, *, max_segments: int,
                    constant_eta: Optional[float] = None) -> ExhaustiveResult:
    """Algorithms 1 (constant η) and 2 (η_t) of the paper, by brute force.

    z_f ~ Exp(1) is drawn once per line; at round t the chosen line is
    argmin_f Σ_{s<t} Δ(f, x_s) + (h_scale·h(f) − z_scale·z_f)/η_{t−1} (η_0 := η_1),
    over all lines given (e.g. from `enumerate_lines`).

    Args:
      key: PRNG key for the perturbations.
      xs: (T, d) stream.
      vertices, n_vertices: (F, p+1, d) and (F,) candidate lines.
      params: resolved `Params` (delta, R, L set).
      max_segments: p (enters the constants).
      constant_eta: if given, Algorithm 1 with this η; else Algorithm 2.

    Returns:
      `ExhaustiveResult`.
    """
    xs = jnp.asarray(xs, params.delta.dtype)
    T, d = xs.shape
    vertices = jnp.asarray(vertices, xs.dtype)
    n_vertices = jnp.asarray(n_vertices)
    ll = geometry.polyline_sq_dist(xs[None], vertices, n_vertices)  # (F, T)
    h = penalty((n_vertices - 1).astype(xs.dtype), geometry.polyline_length(vertices, n_vertices),
                max_segments, d, params)
    z = jax.random.exponential(key, h.shape, xs.dtype)
    past = jnp.concatenate([jnp.zeros((ll.shape[0], 1), xs.dtype), jnp.cumsum(ll, 1)[:, :-1]], 1)
    t_idx = jnp.maximum(jnp.arange(T), 1)
    if constant_eta is None:
        eta = learning_rate(t_idx, max_segments, d, params)
    else:
        eta = jnp.full((T,), constant_eta, xs.dtype)
    obj = past + (params.h_scale * h - params.z_scale * z)[:, None] / eta[None]
    choice = jnp.argmin(obj, 0)
    return ExhaustiveResult(choice, ll[choice, jnp.arange(T)], ll, h, z)
