"""slpc's distance cache: every stored point's squared distance to every segment.

The cache ``hist_D`` is (V − 1, H + 1): one row per segment of the current
line, one column per history row (row H is the scratch row of x_t). Rows are
indexed through a segment-to-row permutation (``seg_slot``): a change of the
line writes only its new segments' rows, into the rows it frees (the others
it frees are set to inf), and the reservoir's column; no other row moves.

Each column's three smallest entries (`row_minima`) make every candidate's
objective exact in O(H): the minimum over all segments but any one or two of
them is m1, m2 or m3 (`min_without`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _ops
from .candidates import Candidates, Window

Array = jax.Array

__all__ = ["segment_table", "row_minima", "Smallest", "smallest", "min_without", "Move", "move",
           "select_move", "local_move", "apply_move", "apply_reorder"]


def segment_table(P, verts, nv, seg=None):
    """(V−1, n) squared distances of the line's segments to points P (n, d), inf where inactive.

    Row r is segment ``seg[r]`` (seg (V−1,); default r: segment order).
    """
    if seg is None:
        seg = jnp.arange(verts.shape[0] - 1)
        A, B = verts[:-1], verts[1:]
    else:
        s = jnp.minimum(seg, verts.shape[0] - 2)
        A, B = verts[s], verts[s + 1]
    d2, _ = _ops.segment_sq_dist(P, A, B)  # (V−1, n)
    return jnp.where((seg < nv - 1)[:, None], d2, jnp.inf)


def nearest_segment(hD, row_seg):
    """Each column's smallest entry of hD (K, n) and the first segment, in segment order, at it:
    ``(m1, c1)``, (n,) each (`row_minima`'s first two; row_seg (K,) the segment in each row)."""
    m1 = jnp.min(hD, 0)
    return m1, _ops.rows_reduce(hD.shape[0], lambda k: jnp.where(hD[k] == m1, row_seg[k], hD.shape[0]))


def inverse_slots(seg_slot):
    """(K,) int32: the segment whose distances each row of hist_D holds (the inverse of ``seg_slot``)."""
    k = jnp.arange(seg_slot.shape[-1], dtype=jnp.int32)
    return jnp.sum(jnp.where(seg_slot[None, :] == k[:, None], k[None, :], 0), 1)


def position(x, verts, seg):
    """Each point's position in [0, 1] on its segment: x (n, d), verts (V, d), seg (n,) int."""
    V = verts.shape[0]
    A, B = verts[seg], verts[jnp.minimum(seg + 1, V - 1)]
    ab = B - A
    return jnp.clip(_ops.coord_sum((x - A) * ab) / jnp.maximum(_ops.coord_sum(ab * ab), 1e-30), 0.0, 1.0)


def row_minima(hD, row_seg):
    """Each column's three smallest entries of hD (K, n), row_seg (K,) giving
    the segment in each row: ``(m1, c1, m2, c2, m3)``, (n,) each.

    m1 <= m2 <= m3 are the three smallest values, counted with multiplicity
    (m2 over every segment but c1, m3 over every segment but c1 and c2); c1
    is the first segment, in segment order, at m1. c2 is the segment of m2
    where only one segment other than c1 has the value m2; where several
    do, m3 = m2 and c2 is K (no segment). Either way the minimum over every
    segment but any one or two is m1, m2 or m3 as `min_without` picks it.

    Every pass over the cache does at most three operations per entry (see
    `jaxstream._ops` on XLA:CPU's thread split). The segments are minima of
    segment indices where hD equals a minimum — exact, as the minimum is one
    of hD's values. The number of segments at m2 and the sum of their
    indices (c2 when there are at most two) come from one int32 sum of
    ``base + segment`` over them, base > 2K: exact up to two segments, and
    never below three for three or more (their index sum may carry into the
    count, only upwards); above `jaxstream._ops.TREE_ROWS` rows, where that
    sum could overflow int32 for very large K, from two sums.
    """
    K = hD.shape[0]
    inf = jnp.asarray(jnp.inf, hD.dtype)
    m1, c1 = nearest_segment(hD, row_seg)
    m2 = _ops.rows_reduce(K, lambda k: jnp.where(row_seg[k] != c1, hD[k], inf))
    if K <= _ops.TREE_ROWS:
        base = 1 << (2 * K).bit_length()
        tagged = row_seg + base  # per row, before the per-entry loop
        at_m2 = _ops.rows_reduce(K, lambda k: jnp.where(hD[k] == m2, tagged[k], 0), "sum")
        n_at_m2, idx_sum = at_m2 // base, at_m2 % base
    else:
        n_at_m2 = _ops.rows_reduce(K, lambda k: (hD[k] == m2).astype(jnp.int32), "sum")
        idx_sum = _ops.rows_reduce(K, lambda k: jnp.where(hD[k] == m2, row_seg[k], 0), "sum")
    above = _ops.rows_reduce(K, lambda k: jnp.where(hD[k] > m2, hD[k], inf))
    c1_at_m2 = m1 == m2
    others = n_at_m2 - c1_at_m2  # segments other than c1 at m2 (>= 2 if more)
    c2 = jnp.where(others == 1, idx_sum - jnp.where(c1_at_m2, c1, 0), K)
    m3 = jnp.where(others >= 2, m2, above)
    return m1, c1, m2, c2.astype(c1.dtype), m3


class Smallest(NamedTuple):
    """Each row's three smallest cached distances (over segments, with
    multiplicity) and their segments c1, c2 as `row_minima` defines them,
    capped at the round's loss cap."""

    m1: Array  # (H+1,)
    c1: Array  # (H+1,) int32
    m2: Array
    c2: Array
    m3: Array


def smallest(minima, cap) -> Smallest:
    """`Smallest` from `row_minima`'s output, the three values capped at ``cap``
    (so that every minimum taken from them is the capped loss)."""
    m1, c1, m2, c2, m3 = minima
    return Smallest(jnp.minimum(m1, cap), c1, jnp.minimum(m2, cap), c2, jnp.minimum(m3, cap))


def min_without(sm: Smallest, k1, k2=None):
    """Minimum over all segments except k1 (and k2): (K, H+1) for k1, k2 of shape (K, 1)."""
    if k2 is None:
        return jnp.where(sm.c1[None] != k1, sm.m1[None], sm.m2[None])
    out1 = (sm.c1[None] == k1) | (sm.c1[None] == k2)
    out2 = (sm.c2[None] == k1) | (sm.c2[None] == k2)
    return jnp.where(~out1, sm.m1[None], jnp.where(~out2, sm.m2[None], sm.m3[None]))


class Move(NamedTuple):
    """A chosen line and how its segments' cache rows come from the old ones.

    In the new segment order: segments j < lo are old segments (j, or c − j
    if rev_lo); segments lo <= j < lo + n_new are the move's new ones; the
    others are old segments j + n_rem − n_new (or c − j if rev_hi). The move
    removes the n_rem old segments lo … lo + n_rem − 1 (a reversal at k
    removes segment k, whose row its new segment takes: n_rem = n_new = 1).
    Every move (an insertion, a shift, a deletion, an end reversal) keeps
    the old segments in at most two runs, each in order or reversed.
    """

    vidx: Array  # (V, d)
    nv: Array
    lo: Array
    n_new: Array
    n_rem: Array
    c: Array
    rev_lo: Array
    rev_hi: Array


def move(vidx, nv, lo, n_new, n_rem, c=0, rev_lo=False, rev_hi=False) -> Move:
    """A `Move` with int32 counts and boolean flags."""
    i32 = lambda v: jnp.asarray(v, jnp.int32)  # noqa: E731
    return Move(vidx, i32(nv), i32(lo), i32(n_new), i32(n_rem), i32(c), jnp.asarray(rev_lo), jnp.asarray(rev_hi))


def select_move(flag, a: Move, b: Move) -> Move:
    """``a`` where flag, else ``b``."""
    return jax.tree_util.tree_map(lambda u, v: jnp.where(flag, u, v), a, b)


def local_move(c: Candidates, win: Window, winner, vidx, nv) -> Move:
    """The local winner; its new segments are rows 0 … W+1 of `candidates.winner_rows`."""
    V, W = vidx.shape[0], c.U_i.shape[1] - 1
    a = win.a
    mw = c.m[winner]
    out = jnp.arange(V)
    src_old = jnp.clip(jnp.where(out < a, out, out - mw + c.n_old), 0, V - 1)
    new_vidx = jnp.where(((out >= a) & (out < a + mw))[:, None], c.U_i[winner][jnp.clip(out - a, 0, W)],
                         vidx[src_old])
    shift = mw - c.n_old
    start = a - c.has_l.astype(jnp.int32)
    n_local = c.has_l.astype(jnp.int32) + mw + (win.b <= nv - 1).astype(jnp.int32) - 1
    return move(new_vidx, nv + shift, start, n_local, n_local - shift)


def apply_move(mv: Move, nv, perm, hD, block, slot=None, x_col=None):
    """The new segment-to-row permutation (V−1,) and cache (V−1, H+1).

    The move's new segments take the rows the move frees (then the free
    rows) and are written there: block (K, H+1) holds their distances in
    its first n_new rows, K >= the move's n_new and n_rem; rows the move
    frees and does not reuse are set to inf. No other row of the cache is
    read or written. ``slot``: the history row that takes the scratch row
    H's distances (the reservoir's choice; H for none): the new rows' column
    there is their column H. With ``x_col`` (V−1,), the scratch column
    hD[:, H] (passed rather than read back from hD, so that the round's only
    writes to the cache are in place), the column every row changes is
    written too (once a round: a swap's later moves pass ``slot`` alone).
    """
    Vm1, K = hD.shape[0], block.shape[0]
    mv, nv, slot = _ops.materialize((mv, nv, slot))
    j = jnp.arange(Vm1)
    i = jnp.arange(K)

    def pool(q):  # the rows the move frees, then the free rows
        return perm[jnp.clip(jnp.where(q < mv.n_rem, mv.lo + q, nv - 1 + q - mv.n_rem), 0, Vm1 - 1)]

    old = jnp.where(j < mv.lo, jnp.where(mv.rev_lo, mv.c - j, j),
                    jnp.where(mv.rev_hi, mv.c - j, j + mv.n_rem - mv.n_new))
    new_perm = jnp.where((j >= mv.lo) & (j < mv.lo + mv.n_new), pool(j - mv.lo),
                         jnp.where(j < mv.nv - 1, perm[jnp.clip(old, 0, Vm1 - 1)],
                                   pool(mv.n_new + j - (mv.nv - 1))))
    rows = jnp.where((i < jnp.maximum(mv.n_new, mv.n_rem)), pool(i), Vm1)  # Vm1: dropped
    block = jnp.where((i < mv.n_new)[:, None], block, jnp.inf)
    if slot is not None:
        col = jnp.arange(hD.shape[1])
        block = jnp.where(col == slot, block[:, -1:], block)
    if x_col is not None:
        hD = hD.at[:, slot].set(x_col)
    return new_perm, hD.at[rows].set(block, mode="drop")


def apply_reorder(vsrc, nv, perm, hD, hx, verts, slot=None, k: int = 3):
    """The segment-to-row permutation (V−1,) and cache (V−1, H+1) after the line's vertices are
    reordered: new vertex j is old vertex ``vsrc[j]`` (vsrc (V,), a permutation of 0 … nv − 1
    on the active vertices, the identity past them).

    A new segment joining two vertices adjacent on the old line is that old segment (its row
    moves with it); the others, at most ``k`` (a swap makes two, a relocation three), take the
    rows of the old segments no longer used, and their distances to hx (H+1, d) are computed
    here (verts (V, d): the old line). ``slot``: as in `apply_move`. With the identity nothing
    is written.
    """
    Vm1 = hD.shape[0]
    j = jnp.arange(Vm1)
    p, q = vsrc[:-1], vsrc[1:]
    active = j < nv - 1
    kept = active & (jnp.abs(p - q) == 1)
    oseg = jnp.where(kept, jnp.minimum(p, q), j)
    new = active & ~kept
    used = jnp.zeros((Vm1,), bool).at[jnp.where(kept, oseg, Vm1)].set(True, mode="drop")
    free = jnp.nonzero(active & ~used, size=k, fill_value=Vm1 - 1)[0]  # (k,) old segments freed
    pos = jnp.nonzero(new, size=k, fill_value=0)[0]  # (k,) positions of the new segments
    n_new = jnp.sum(new)
    rank = jnp.clip(jnp.cumsum(new) - 1, 0, k - 1)
    new_perm = jnp.where(new, perm[free[rank]], perm[oseg])
    nverts = verts[vsrc]
    block, _ = _ops.segment_sq_dist(hx, nverts[pos], nverts[jnp.minimum(pos + 1, Vm1)])  # (k, H+1)
    if slot is not None:
        col = jnp.arange(hD.shape[1])
        block = jnp.where(col == slot, block[:, -1:], block)
    rows = jnp.where(jnp.arange(k) < n_new, perm[free], Vm1)  # Vm1: dropped
    return new_perm, hD.at[rows].set(block, mode="drop")
