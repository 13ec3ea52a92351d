"""slpc's global moves: single-vertex deletions and end reversals anywhere on the line.

The local window only ever sees the line near x_t (or one random place), so
vertices the data have left behind, and lines that visit clusters in the
wrong order, would wait for an exploration round. Each round G deletions and
G reversals at each end (a run of G consecutive ones starting at a uniform
place; all of them when the line is short) compete with the local winner.
With each cache column's three smallest distances (`cache.row_minima`) each
move's objective is exact in O(H).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _ops, geometry
from . import cache
from .candidates import MOVE_DELETE, MOVE_REVERSE, seg_d2_points
from .objective import Params, price
from .types import Draws, Observation

Array = jax.Array

__all__ = ["n_global", "rotating", "Deletions", "score_deletions", "deletion_move", "Reversals",
           "score_reversals", "reversal_move", "Contest", "compete"]


def n_global(global_moves, V: int) -> int:
    """G, the number of deletions (and of reversals per end) scored per round."""
    return V if global_moves is None else min(global_moves, V)


def rotating(offset, n, G: int):
    """G indices (offset·n + i) mod n, i < G, and which are distinct (i < n):
    a run of G consecutive items starting at a uniform place, wrapping round."""
    n = jnp.maximum(n, 1)
    i = jnp.arange(G)
    start = jnp.minimum((offset * n.astype(offset.dtype)).astype(jnp.int32), n - 1)
    return (start + i) % n, i < n


class Deletions(NamedTuple):
    delta_loss: Array  # (G,) change of the weighted loss when deleting vertex js[i]
    new_len: Array  # (G,)
    ok: Array  # (G,)
    chord: Array  # (G, H+1) distances to the chord v_{j−1} v_{j+1}


def score_deletions(hx, sm: cache.Smallest, w, verts, nv, length, js, distinct) -> Deletions:
    """Deleting vertex j of f̂, for each j of js (G,) at once (dense).

    Deleting vertex j replaces segments j−1 and j by the chord v_{j−1} v_{j+1}
    (none at an end). ``distinct`` (G,) marks the entries of js that are not
    repeats.
    """
    V = verts.shape[0]
    big = jnp.asarray(jnp.inf, sm.m1.dtype)
    prev, nxt = _ops.materialize((verts[jnp.clip(js - 1, 0, V - 1)], verts[jnp.clip(js + 1, 0, V - 1)]))
    chord, _ = seg_d2_points(hx, prev, nxt)  # (G, H+1)
    interior = (js >= 1) & (js <= nv - 2)
    kept = cache.min_without(sm, js[:, None] - 1, js[:, None])  # (G, H+1)
    new = jnp.minimum(kept, jnp.where(interior[:, None], chord, big))
    dl = jnp.sum(jnp.where(w[None] > 0, w[None] * (new - sm.m1[None]), 0.0), 1)
    seg_len = jnp.sqrt(jnp.sum((verts[1:] - verts[:-1]) ** 2, 1))
    seg_len = jnp.where(jnp.arange(V - 1) < nv - 1, seg_len, 0.0)
    left_len = jnp.where(js >= 1, seg_len[jnp.clip(js - 1, 0, V - 2)], 0.0)  # segment j−1
    right_len = seg_len[jnp.clip(js, 0, V - 2)] * (js <= V - 2)  # segment j (0 past the last)
    chord_len = jnp.sqrt(jnp.sum((nxt - prev) ** 2, 1))
    new_len = length - left_len - right_len + jnp.where(interior, chord_len, 0.0)
    ok = distinct & (js < nv) & (nv >= 3) & jnp.isfinite(dl)
    return Deletions(dl, new_len, ok, chord)


def deletion_move(j, vidx, nv) -> cache.Move:
    """Deleting vertex j: segments j − 1 and j (one of them at an end) are
    replaced by the chord v_{j−1} v_{j+1} (none at an end)."""
    V = vidx.shape[0]
    out = jnp.arange(V)
    interior = (j >= 1) & (j <= nv - 2)
    return cache.move(vidx[jnp.minimum(out + (out >= j), V - 1)], nv - 1, jnp.maximum(j - 1, 0), interior,
                      1 + interior.astype(jnp.int32))


class Reversals(NamedTuple):
    delta_loss: Array  # (2, G) change of the weighted loss when reversing the prefix / suffix at ks[i]
    new_len: Array  # (2, G)
    ok: Array  # (2, G)
    new_seg: Array  # (2, G, H+1) distances to the new segment


def score_reversals(hx, sm: cache.Smallest, w, verts, nv, length, ks, distinct) -> Reversals:
    """2-opt moves at an end of the line, at each segment k of ks (G,) (dense).

    Reversing the prefix v_0 … v_k replaces segment k by (v_0, v_{k+1});
    reversing the suffix v_{k+1} … v_last replaces it by (v_k, v_last). The
    other segments are kept (reversed), so each move costs O(H). The local
    search cannot make these moves: a line that visits clusters in the wrong
    order keeps a chord across an empty region between them, however the
    vertices move. ``distinct`` (G,) marks the entries of ks that are not
    repeats.
    """
    V = verts.shape[0]
    kept = cache.min_without(sm, ks[:, None])  # (G, H+1)
    last = verts[jnp.maximum(nv - 1, 0)]
    v_k, v_k1 = verts[jnp.clip(ks, 0, V - 1)], verts[jnp.clip(ks + 1, 0, V - 1)]
    ends_a = jnp.stack([jnp.broadcast_to(verts[0], v_k.shape), v_k])  # (2, G, d)
    ends_b = jnp.stack([v_k1, jnp.broadcast_to(last, v_k.shape)])
    ends_a, ends_b = _ops.materialize((ends_a, ends_b))
    new_seg, _ = seg_d2_points(hx, ends_a, ends_b)  # (2, G, H+1)
    new = jnp.minimum(kept[None], new_seg)
    dl = jnp.sum(jnp.where(w > 0, w * (new - sm.m1), 0.0), -1)
    seg_len = jnp.sqrt(jnp.sum((v_k1 - v_k) ** 2, 1))
    new_len = length - seg_len[None] + jnp.sqrt(jnp.sum((ends_b - ends_a) ** 2, -1))
    ok = jnp.stack([(ks >= 1) & (ks <= nv - 2), ks <= nv - 3]) & distinct[None] & jnp.isfinite(dl)
    return Reversals(dl, new_len, ok, new_seg)


def reversal_move(side, k, vidx, nv) -> cache.Move:
    """Reversing the prefix (side 0) or suffix (side 1) at segment k: the
    new segment replaces segment k, the segments before k (prefix) or after
    it (suffix) are the old ones in reverse order."""
    V = vidx.shape[0]
    i = jnp.arange(V)
    src_v = jnp.where(side == 0, jnp.where(i <= k, k - i, i),
                      jnp.where((i > k) & (i < nv), nv + k - i, i))
    return cache.move(vidx[jnp.clip(src_v, 0, V - 1)], nv, k, 1, 1, c=jnp.where(side == 0, k - 1, nv + k - 1),
                      rev_lo=side == 0, rev_hi=side != 0)


class Contest(NamedTuple):
    """The local winner a round's global moves compete with.

    Attributes:
      objective: its objective (change of the capped loss plus price).
      move: its `cache.Move`.
      rows: its new segments' cache rows, (W+2, H+1).
      kind: its move kind.
    """

    objective: Array
    move: cache.Move
    rows: Array
    kind: Array


def compete(draws: Draws, obs: Observation, local: Contest, prm: Params, p: int, penalty: str) -> Contest:
    """Score G single-vertex deletions and G end reversals at each end (all
    of them when the line has at most G vertices; otherwise a run of G
    consecutive ones starting at a uniform place, so each is scored every
    ~nv/G rounds); the best of them replaces the local winner if its
    objective is lower. Returns the winner (its objective is the local one's,
    unused after), with its new rows (the cache is written once, for it)."""
    hx, verts, vidx, nv, w = obs.hx, obs.verts, obs.vidx, obs.nv, obs.w
    sm = cache.smallest(obs.minima, obs.cap)
    V, d = verts.shape
    G = draws.z_del.shape[0]
    dt = verts.dtype
    length = geometry.polyline_length(verts, nv)
    js, js_ok = rotating(draws.offset[0], nv, G)
    ks, ks_ok = rotating(draws.offset[1], nv - 1, G)
    dels = score_deletions(hx, sm, w, verts, nv, length, js, js_ok)
    revs = score_reversals(hx, sm, w, verts, nv, length, ks, ks_ok)
    ns_del = jnp.full((G,), nv - 2, dt)
    ns_rev = jnp.full((2, G), nv - 1, dt)
    price_del = price(penalty, ns_del, dels.new_len, draws.z_del, obs.sigma2, obs.n_tot, p, d, prm, obs.spread)
    price_rev = price(penalty, ns_rev, revs.new_len, draws.z_rev, obs.sigma2, obs.n_tot, p, d, prm, obs.spread)
    obj_del = jnp.where(dels.ok & (dels.new_len <= prm.L), dels.delta_loss + price_del, jnp.inf)
    i_del = jnp.argmin(obj_del)
    j_del = js[i_del]
    use_del = obj_del[i_del] < local.objective
    obj_rev = jnp.where(revs.ok & (revs.new_len <= prm.L), revs.delta_loss + price_rev, jnp.inf).reshape(-1)
    i_rev = jnp.argmin(obj_rev)
    use_rev = obj_rev[i_rev] < jnp.minimum(local.objective, obj_del[i_del])
    side, k_rev = i_rev // G, ks[i_rev % G]
    mv = cache.select_move(use_rev, reversal_move(side, k_rev, vidx, nv),
                           cache.select_move(use_del, deletion_move(j_del, vidx, nv), local.move))
    # A global move has one new segment, the chord v_{j−1} v_{j+1} or the
    # reversal's: its row (recomputed, see `candidates.winner_rows`) goes first in the block.
    jc = jnp.clip(j_del - 1, 0, V - 3)
    last = verts[jnp.maximum(nv - 1, 0)]
    rev_a = jnp.where(side == 0, verts[0], verts[k_rev])
    rev_b = jnp.where(side == 0, verts[jnp.minimum(k_rev + 1, V - 1)], last)
    glob, ga, gb = _ops.materialize((use_rev | use_del, jnp.where(use_rev, rev_a, verts[jc]),
                                     jnp.where(use_rev, rev_b, verts[jc + 2])))
    row, _ = seg_d2_points(hx, ga, gb)  # (H+1,)
    block = jnp.where(glob, jnp.concatenate([row[None], local.rows[1:]]), local.rows)
    kind = jnp.where(use_rev, MOVE_REVERSE, jnp.where(use_del, MOVE_DELETE, local.kind))
    return Contest(local.objective, mv, block, kind)
