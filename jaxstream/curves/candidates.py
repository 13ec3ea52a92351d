"""slpc's candidate set: the window of replaced vertices and the lines that replace it.

Every candidate of a round differs from the current line f̂ only in a window
of at most ``window`` consecutive vertices, v_a … v_{b−1} (the run (ii) of
the paper's neighbourhood U(f̂)). Candidates (a static number, candidate 0 is
f̂): all window vertices moved jointly to one of their per-vertex options,
one vertex moved, one vertex inserted in each gap (at the gap's midpoint or
at x), one vertex deleted. A vertex's options are: itself, a step towards
the mean of the points attached to it (Lloyd/Hastie–Stuetzle-like), that
mean snapped to the lattice, and a step towards x. Vertices are integer
lattice coordinates, so every move is exact.
"""
from __future__ import annotations

import functools

import numpy as np
import jax
import jax.numpy as jnp

MOVE_KEEP, MOVE_SHIFT, MOVE_INSERT, MOVE_DELETE, MOVE_REVERSE = 0, 1, 2, 3, 4
MOVE_NAMES = ("keep", "move", "insert", "delete", "reverse")


def seg_d2_points(P, A, B):
    """Squared distances from points to segments, unrolled over coordinates.

    Writing the d coordinates out (instead of reducing over a coordinate axis)
    lets XLA fuse the whole expression into one loop; on CPU that is up to
    ~15x faster at the sizes of a round (candidates × segments × points).
    The reciprocal squared lengths are computed once per segment, keeping
    divisions out of the points loop.

    Args:
      P: (M, d) points.
      A, B: (..., d) segment ends.

    Returns:
      ``(d2, t)`` of shape (..., M).
    """
    d = P.shape[-1]
    ab = [B[..., k] - A[..., k] for k in range(d)]
    den = sum(u * u for u in ab)
    inv = jnp.where(den > 0, 1.0 / jnp.where(den > 0, den, 1.0), 0.0)[..., None]
    ab = [u[..., None] for u in ab]
    ap = [P[:, k] - A[..., k, None] for k in range(d)]
    t = jnp.clip(sum(u * v for u, v in zip(ap, ab)) * inv, 0.0, 1.0)
    d2 = sum((u - t * v) ** 2 for u, v in zip(ap, ab))
    # Past the far end, |P − B|² computed from P − B itself (t = 0 already
    # gives |P − A|² exactly): two segments sharing the vertex nearest to P
    # then tie exactly, and the first wins everywhere (jit, eager, vmap)
    # instead of by rounding.
    d2 = jnp.where(t >= 1.0, sum((P[:, k] - B[..., k, None]) ** 2 for k in range(d)), d2)
    return d2, t


def toward(v_idx, target, delta, steps):
    """Integer lattice point at most `steps` steps from v_idx towards target."""
    return v_idx + jnp.clip(jnp.round((target - v_idx * delta) / delta), -steps, steps).astype(jnp.int32)


def window_run(vertices, nv, anchor_seg, centre, radius, W):
    """The run (ii) of vertices inside B(centre, radius) around a segment.

    Returns (a, b): the replaced vertices are a .. b−1 (b − a <= W). If neither
    end of the anchor segment lies in the ball the run is empty and
    a = b = anchor_seg + 1 (an insertion point inside that segment).
    """
    inside = jnp.linalg.norm(vertices - centre, axis=1) <= radius
    inside = inside & (jnp.arange(vertices.shape[0]) < nv)
    i = anchor_seg
    core = jnp.where(inside[i], i, i + 1)
    has_core = inside[i] | inside[i + 1]
    a = jnp.where(has_core, core, i + 1)
    b = jnp.where(has_core, core + 1, i + 1)
    for _ in range(W - 1):
        ext_r = has_core & (b < nv) & inside[jnp.minimum(b, vertices.shape[0] - 1)] & (b - a < W)
        b = b + ext_r
        ext_l = has_core & (a > 0) & inside[jnp.maximum(a - 1, 0)] & (b - a < W)
        a = a - ext_l
    return a, b


@functools.lru_cache(maxsize=None)
def candidate_table(W: int, Q: int):
    """Static description of the candidate list (NumPy, built once per config).

    Candidates pick their W + 1 new window vertices from a pool
    ``[cur (W), opts (W·Q), gap midpoints (W+1), x]``.

    Returns:
      ``(index[C, W+1], dm[C], need[C], gap_mid[C], move[C])``: pool indices,
      change in vertex count, the candidate is valid iff ``need < n_old``,
      the gap whose midpoint it inserts (−1 if none), and the move kind.
    """
    cur = list(range(W))
    opt = lambda w, q: W + w * Q + q
    mid = lambda g: W + W * Q + g
    xi = W + W * Q + W + 1
    rows = []

    def add(idx, dm, need, gap, move):
        idx = list(idx) + [idx[-1] if idx else 0] * (W + 1 - len(idx))
        rows.append((idx, dm, need, gap, move))

    add(cur, 0, -1, -1, MOVE_KEEP)
    for q in range(1, Q):
        add([opt(w, q) for w in range(W)], 0, 0, -1, MOVE_SHIFT)
    for w in range(W):
        for q in range(1, Q):
            add(cur[:w] + [opt(w, q)] + cur[w + 1:], 0, w, -1, MOVE_SHIFT)
    for g in range(W + 1):
        add(cur[:g] + [mid(g)] + cur[g:], 1, g - 1, g, MOVE_INSERT)
        add(cur[:g] + [xi] + cur[g:], 1, g - 1, -1, MOVE_INSERT)
    for w in range(W):
        add(cur[:w] + cur[w + 1:], -1, w, -1, MOVE_DELETE)
    cols = list(zip(*rows))
    return tuple(np.asarray(c, np.int32) for c in cols)


def build_candidates(cur, n_old, opts, ins_mid, mid_ok, ins_x, W):
    """The static candidate list of a round, as one gather.

    Args:
      cur: (W, d) the window's vertices (rows >= n_old are padding).
      n_old: number of replaced vertices.
      opts: (W, Q, d) per-vertex options (option 0 is the vertex itself).
      ins_mid: (W+1, d) midpoints of the window's gaps; mid_ok (W+1,) says
        which gaps have two ends.
      ins_x: (d,) x on the lattice.

    Returns:
      ``(U[C, W+1, d], m[C], ok[C], move[C])``: the new window vertices, their
      number, validity and move kind. Candidate 0 is f̂.
    """
    Q = opts.shape[1]
    index, dm, need, gap_mid, move = candidate_table(W, Q)
    pool = jnp.concatenate([cur, opts.reshape(W * Q, -1), ins_mid, ins_x[None]])
    U = pool[index]
    ok = (need < n_old) & ((gap_mid < 0) | mid_ok[np.maximum(gap_mid, 0)])
    return U, n_old + dm, ok, jnp.asarray(move)


def n_candidates(window: int, n_options: int = 4) -> int:
    """Number of candidates evaluated per round (f̂ included)."""
    return 1 + (n_options - 1) + window * (n_options - 1) + 2 * (window + 1) + window


def local_sequences(U, m, has_l, has_r, left, right):
    """Each candidate's local run of vertices ``[left?] + U[:m] + [right?]``.

    Args:
      U: (C, W+1, d) new window vertices (float coordinates).
      m: (C,) how many of them each candidate uses.
      has_l, has_r: whether the window has a fixed left / right neighbour.
      left, right: (d,) those neighbours.

    Returns:
      ``(seq[C, W+3, d], seq_len[C], seg_ok[C, W+2], local_len[C])``: the
      padded local vertex runs, their lengths, which local segments exist and
      the length of each run.
    """
    C, Wp1, d = U.shape
    S = Wp1 + 2
    sl = jnp.arange(S)
    rel = sl[None] - has_l
    Upad = jnp.concatenate([U, jnp.zeros((C, 2, d), U.dtype)], 1)
    body = jnp.take_along_axis(Upad, jnp.clip(rel, 0, Wp1 + 1)[..., None], 1)
    seq = jnp.where(((sl == 0) & has_l)[None, :, None], left, body)
    seq = jnp.where((rel == m[:, None])[..., None] & has_r, right, seq)
    seq_len = has_l.astype(jnp.int32) + m + has_r.astype(jnp.int32)
    seg_ok = sl[None, : S - 1] < (seq_len[:, None] - 1)
    vec = seq[:, 1:] - seq[:, :-1]
    local_len = jnp.sum(jnp.where(seg_ok, jnp.sqrt(jnp.sum(vec * vec, -1)), 0.0), 1)
    return seq, seq_len, seg_ok, local_len
