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
from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp

from .. import _ops
from .types import Draws, Observation

Array = jax.Array

#: The moves of the local search, the codes of ``Info.move``: keep the line, move a vertex,
#: insert one, delete one, reverse an end of the line, swap two segments (2-opt), exchange two
#: neighbouring stretches (or-opt).
MOVE_KEEP, MOVE_SHIFT, MOVE_INSERT, MOVE_DELETE, MOVE_REVERSE, MOVE_SWAP, MOVE_RELOCATE = 0, 1, 2, 3, 4, 5, 6
#: The moves' names, indexed by their codes (``MOVE_NAMES[MOVE_INSERT] == "insert"``).
MOVE_NAMES = ("keep", "move", "insert", "delete", "reverse", "swap", "relocate")


def seg_d2_points(P, A, B):
    """Squared distances from points P (M, d) to segments [A, B] (..., d), and the
    projection parameter: ``(d2, t)`` of shape (..., M) (`jaxstream._ops.segment_sq_dist`)."""
    return _ops.segment_sq_dist(P, A, B)


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


# ---------------------------------------------------------------------------
# A round's window and candidates


class Window(NamedTuple):
    """The run of replaced vertices a … b − 1 of a round, and its step size.

    Attributes:
      a, b: the replaced vertices are a … b − 1 (b − a <= window).
      explore: whether the round explores.
      steps: lattice steps of a vertex move (``explore_steps`` when exploring, else 1).
    """

    a: Array
    b: Array
    explore: Array
    steps: Array


def choose_window(draws: Draws, obs: Observation, W: int, explore_steps: int) -> Window:
    """Anchor segment (x_t's, or a random one when exploring) and the run a … b − 1.

    Exploration anchors the window at a segment drawn with probability
    ∝ 1/(1 + points attached to it), so that segments the data have left get
    revisited and pruned, and takes ``explore_steps`` lattice steps.
    """
    verts, nv, hx, seg, valid = obs.verts, obs.nv, obs.hx, obs.seg, obs.valid
    V, dt = verts.shape[0], verts.dtype
    H = hx.shape[0] - 1
    seg_ok = jnp.arange(V - 1) < nv - 1
    counts = jnp.zeros((V - 1,), dt).at[seg].add(valid.astype(dt))
    logits = jnp.where(seg_ok, -jnp.log1p(counts) + draws.gumbel, -jnp.inf)
    rnd_seg = jnp.argmax(logits).astype(jnp.int32)
    anchor = jnp.where(draws.explore, rnd_seg, seg[H])
    steps = jnp.where(draws.explore, float(explore_steps), 1.0).astype(dt)
    # Neighbourhood N(x): the points whose nearest segment is anchor−1 … anchor+1.
    in_n = valid & (jnp.abs(seg - anchor) <= 1)
    cnt = jnp.sum(in_n)
    nbar = jnp.sum(jnp.where(in_n[:, None], hx, 0.0), 0) / jnp.maximum(cnt, 1)
    nbar = jnp.where(cnt > 0, nbar, 0.5 * (verts[anchor] + verts[anchor + 1]))
    rad = jnp.sqrt(jnp.max(jnp.where(in_n, _ops.coord_sum((hx - nbar) ** 2), 0.0)))
    a, b = window_run(verts, nv, anchor, nbar, rad, W)
    return Window(a, b, draws.explore, steps)


class Candidates(NamedTuple):
    """A round's local candidates (C of them; candidate 0 is f̂).

    Attributes:
      U_i: (C, W+1, d) int lattice coordinates of the new window vertices.
      m: (C,) how many of them each candidate uses.
      ok: (C,) valid candidates.
      move: (C,) move kind.
      seq: (C, W+3, d) each candidate's local run of vertices (see `local_sequences`).
      lseg_ok: (C, W+2) which local segments exist.
      local_len: (C,) the local run's length.
      has_l: whether the window has a fixed left neighbour.
      n_old: the number of replaced vertices.
    """

    U_i: Array
    m: Array
    ok: Array
    move: Array
    seq: Array
    lseg_ok: Array
    local_len: Array
    has_l: Array
    n_old: Array


def make_candidates(win: Window, obs: Observation, delta, W: int) -> Candidates:
    """The static candidate list of a round around the window (see the module docstring)."""
    vidx, verts, nv, hx, u = obs.vidx, obs.verts, obs.nv, obs.hx, obs.u
    seg, tpar, valid = obs.seg, obs.tpar, obs.valid
    V = vidx.shape[0]
    a, b = win.a, win.b
    n_old = b - a
    has_l, has_r = a >= 1, b <= nv - 1
    left_i, right_i = vidx[jnp.maximum(a - 1, 0)], vidx[jnp.minimum(b, V - 1)]
    widx = jnp.minimum(a + jnp.arange(W), V - 1)
    cur_i, cur = vidx[widx], verts[widx]
    # Points attached to vertex v: projecting onto its half of an adjacent segment.
    att = ((seg[None] == widx[:, None] - 1) & (tpar[None] >= 0.5)) | ((seg[None] == widx[:, None]) & (tpar[None] < 0.5))
    att = att & valid[None]
    natt = jnp.sum(att, 1)
    mu = _ops.matmul(att.astype(hx.dtype), hx) / jnp.maximum(natt, 1)[:, None]
    mu = jnp.where(natt[:, None] > 0, mu, cur)
    snap = lambda v: jnp.round(v / delta).astype(jnp.int32)  # noqa: E731
    opts = jnp.stack([cur_i, toward(cur_i, mu, delta, win.steps), snap(mu), toward(cur_i, u, delta, win.steps)], 1)
    # Gap g sits between local vertices g−1 and g of [left?] + cur[:n_old] + [right?].
    gi = jnp.arange(W + 1)
    prev_pt = jnp.concatenate([left_i[None], cur_i])[: W + 1]
    next_pt = jnp.concatenate([cur_i, right_i[None]])
    prev_pt = jnp.where((gi == 0)[:, None], left_i, prev_pt)
    next_pt = jnp.where((gi == n_old)[:, None], right_i, next_pt)
    mid_ok = ((gi > 0) | has_l) & ((gi < n_old) | has_r)
    U_i, m, ok, move = build_candidates(cur_i, n_old, opts, (prev_pt + next_pt) // 2, mid_ok, snap(u), W)
    U = U_i.astype(hx.dtype) * delta
    seq, _, lseg_ok, local_len = local_sequences(U, m, has_l, has_r, verts[jnp.maximum(a - 1, 0)],
                                                 verts[jnp.minimum(b, V - 1)])
    # Duplicates of f̂ are not separate candidates.
    C = U.shape[0]
    same = (m == n_old) & jnp.all(jnp.where((gi < m[:, None])[..., None], U_i == U_i[0:1], True), (1, 2))
    ok = ok & ~(same & (jnp.arange(C) > 0))
    return Candidates(U_i, m, ok, move, seq, lseg_ok, local_len, has_l, n_old)


def score_candidates(c: Candidates, win: Window, obs: Observation) -> Array:
    """Exact change of the weighted cumulative capped loss of every candidate, all rows, dense.

    Each row's loss is min(squared distance, cap) (`jaxstream.curves.objective.loss_cap`).

    Returns:
      (C,) the change relative to f̂.
    """
    hx, hD, row_seg, nv, w, cap = obs.hx, obs.hD, obs.row_seg, obs.nv, obs.w, obs.cap
    keep = (row_seg < nv - 1) & ((row_seg <= win.a - 2) | (row_seg >= win.b))
    base = jnp.minimum(_ops.rows_reduce(hD.shape[0], lambda k: jnp.where(keep[k], hD[k], jnp.inf)), cap)
    # One (C, H+1) distance table per local segment slot, folded into a
    # running minimum, so that the (C, W+2, H+1) distances only feed
    # elementwise work and are never materialised.
    new = jnp.broadcast_to(base[None], (c.seq.shape[0], hx.shape[0]))
    for k in range(c.seq.shape[1] - 1):
        d2k, _ = seg_d2_points(hx, c.seq[:, k], c.seq[:, k + 1])  # (C, H+1)
        new = jnp.minimum(new, jnp.where(c.lseg_ok[:, k, None], d2k, jnp.inf))
    return jnp.sum(jnp.where(w[None] > 0, w[None] * (new - jnp.minimum(obs.dmin, cap)[None]), 0.0), 1)


def winner_rows(c: Candidates, winner, hx) -> Array:
    """The winner's W+2 local distance rows (W+2, H+1), for the cache.

    Recomputed for the one winning candidate (the same formula as in
    `score_candidates`, so the same values) rather than gathered from the
    scores: the scores' distances are then never materialised (in a batch of
    streams they would not fit in cache).
    """
    seq, ok = _ops.materialize((c.seq[winner], c.lseg_ok[winner]))
    d2, _ = seg_d2_points(hx, seq[:-1], seq[1:])
    return jnp.where(ok[:, None], d2, jnp.inf)
