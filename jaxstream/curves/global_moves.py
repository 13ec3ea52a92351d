"""slpc's global moves: single-vertex deletions, end reversals and swaps anywhere on the line.

The local window only ever sees the line near x_t (or one random place), so
vertices the data have left behind, and lines that visit stretches of the
data in the wrong order, would wait for an exploration round, or for ever:
no local move undoes a wrong order. Each round G deletions, G reversals at
each end and G swaps (2-opt: two segments replaced by the two that join
their ends crosswise, the vertices between them reversed) compete with the
local winner (G/2 swaps: each costs two segments' distances). Deletions,
reversals and the swaps' first segments are runs of consecutive ones
starting at a uniform place (all of them when the line is short); each
swap's second segment is uniform among those after it. With
each cache column's three smallest distances (`cache.row_minima`) each
move's objective is exact in O(H).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _ops, geometry
from . import cache
from .candidates import MOVE_DELETE, MOVE_REVERSE, MOVE_SWAP, seg_d2_points
from .objective import Params, price
from .types import Draws, Observation

Array = jax.Array

__all__ = ["n_global", "rotating", "Deletions", "score_deletions", "deletion_move", "Reversals",
           "score_reversals", "reversal_move", "n_swaps", "swap_pairs", "Swaps", "score_swaps", "swap_moves", "Contest",
           "compete"]


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


def n_swaps(G: int) -> int:
    """How many swaps a round scores when it scores G deletions: half as many (each swap costs two
    new segments' distances, a deletion or an end reversal one)."""
    return max(G // 2, 1)


def swap_pairs(offset, pair, nv, G: int):
    """G pairs of segments (a, b) with a + 2 <= b <= nv − 2 for `score_swaps`.

    a runs over G consecutive segments from a uniform place (`rotating`); b is
    uniform among the segments from a + 2 on (``pair`` (G,) uniforms).

    Returns:
      ``(a, b, ok)``, (G,) each; ``ok`` false where a has no b or repeats.
    """
    a, distinct = rotating(offset, nv - 1, G)
    span = nv - 3 - a  # the b's: a + 2 … nv − 2
    b = a + 2 + jnp.clip((pair * jnp.maximum(span, 1).astype(pair.dtype)).astype(jnp.int32), 0,
                         jnp.maximum(span - 1, 0))
    return a, b, distinct & (span >= 1)


class Swaps(NamedTuple):
    delta_loss: Array  # (G,) change of the weighted loss
    new_len: Array  # (G,)
    ok: Array  # (G,)
    new_seg: Array  # (2, G, H+1) distances to the new segments (v_a, v_b) and (v_{a+1}, v_{b+1})


# Wide signature: the round's history, line and swap pairs, as `compete` holds them.
def score_swaps(hx, sm: cache.Smallest, w, verts, nv, length, a, b, ok) -> Swaps:
    """2-opt inside the line, for each pair (a, b) (G,) of segments (dense).

    Segments a = (v_a, v_{a+1}) and b = (v_b, v_{b+1}) are replaced by
    (v_a, v_b) and (v_{a+1}, v_{b+1}); the vertices v_{a+1} … v_b between them
    are reversed, so the other segments are kept and each move costs O(H).
    A line that runs through stretches of the data in the wrong order joins
    them by chords; a swap of two chords puts them in order.
    """
    V = verts.shape[0]
    kept = cache.min_without(sm, a[:, None], b[:, None])  # (G, H+1)
    at = lambda i: verts[jnp.clip(i, 0, V - 1)]  # noqa: E731
    va, va1, vb, vb1 = at(a), at(a + 1), at(b), at(b + 1)
    ends_a, ends_b = _ops.materialize((jnp.stack([va, va1]), jnp.stack([vb, vb1])))  # (2, G, d)
    new_seg, _ = seg_d2_points(hx, ends_a, ends_b)  # (2, G, H+1)
    new = jnp.minimum(kept, jnp.minimum(new_seg[0], new_seg[1]))
    dl = jnp.sum(jnp.where(w > 0, w * (new - sm.m1), 0.0), -1)
    norm = lambda v: jnp.sqrt(jnp.sum(v ** 2, -1))  # noqa: E731
    new_len = length - norm(va1 - va) - norm(vb1 - vb) + norm(vb - va) + norm(vb1 - va1)
    return Swaps(dl, new_len, ok & (b <= nv - 2) & jnp.isfinite(dl), new_seg)


def swap_moves(a, b, vidx, nv) -> tuple[cache.Move, cache.Move, cache.Move]:
    """The swap of segments (a, b) as three prefix reversals, each a `cache.Move` of one new segment.

    Reversing v_{a+1} … v_b is reversing the prefix at b, then at b − a − 1, then
    at b again. The first's new segment (v_0, v_{b+1}) is removed by the third
    (its cache row may hold anything); the second's is (v_b, v_a) and the
    third's (v_{a+1}, v_{b+1}), `score_swaps`'s ``new_seg`` rows 0 and 1.
    """
    first = reversal_move(0, b, vidx, nv)
    second = reversal_move(0, b - a - 1, first.vidx, nv)
    return first, second, reversal_move(0, b, second.vidx, nv)


class Contest(NamedTuple):
    """The local winner a round's global moves compete with, and the winner.

    Attributes:
      objective: its objective (change of the capped loss plus price).
      move: its `cache.Move`.
      rows: its new segments' cache rows, (W+2, H+1).
      kind: its move kind.
      then: moves applied after ``move``, each with one new segment (a swap's
        second and third prefix reversals; no-ops otherwise), or ().
      then_rows: their new segments' rows, (len(then), H+1).
    """

    objective: Array
    move: cache.Move
    rows: Array
    kind: Array
    then: tuple = ()
    then_rows: tuple = ()


def _noop(mv: cache.Move) -> cache.Move:
    """A move that changes nothing after ``mv`` (its line, no new or removed segment)."""
    return cache.move(mv.vidx, mv.nv, 0, 0, 0)


def compete(draws: Draws, obs: Observation, local: Contest, prm: Params, p: int, penalty: str) -> Contest:
    """Score G single-vertex deletions, G end reversals at each end and G/2 swaps (all of them when
    the line is short enough; otherwise runs of G consecutive ones starting at a uniform place,
    so each is scored every ~nv/G rounds); the best of them replaces the local winner if its
    objective is lower. Returns the winner (its objective is the local one's, unused after),
    with its new rows (the cache is written once per prefix reversal, for it)."""
    hx, verts, vidx, nv, w = obs.hx, obs.verts, obs.vidx, obs.nv, obs.w
    sm = cache.smallest(obs.minima, obs.cap)
    V, d = verts.shape
    G = draws.z_del.shape[0]
    dt = verts.dtype
    length = geometry.polyline_length(verts, nv)
    js, js_ok = rotating(draws.offset[0], nv, G)
    ks, ks_ok = rotating(draws.offset[1], nv - 1, G)
    sa, sb, s_ok = swap_pairs(draws.offset[2], draws.pair, nv, draws.pair.shape[0])
    dels = score_deletions(hx, sm, w, verts, nv, length, js, js_ok)
    revs = score_reversals(hx, sm, w, verts, nv, length, ks, ks_ok)
    swaps = score_swaps(hx, sm, w, verts, nv, length, sa, sb, s_ok)

    def objective(dl, new_len, ok, n_segs, z):
        pr = price(penalty, jnp.full(z.shape, n_segs, dt), new_len, z, obs.sigma2, obs.n_tot, p, d, prm, obs.spread)
        return jnp.where(ok & (new_len <= prm.L), dl + pr, jnp.inf)

    obj_del = objective(dels.delta_loss, dels.new_len, dels.ok, nv - 2, draws.z_del)
    obj_rev = objective(revs.delta_loss, revs.new_len, revs.ok, nv - 1, draws.z_rev).reshape(-1)
    obj_swap = objective(swaps.delta_loss, swaps.new_len, swaps.ok, nv - 1, draws.z_swap)
    i_del, i_rev, i_swap = jnp.argmin(obj_del), jnp.argmin(obj_rev), jnp.argmin(obj_swap)
    j_del = js[i_del]
    use_del = obj_del[i_del] < local.objective
    best = jnp.minimum(local.objective, obj_del[i_del])
    use_rev = obj_rev[i_rev] < best
    use_swap = obj_swap[i_swap] < jnp.minimum(best, obj_rev[i_rev])
    use_rev = use_rev & ~use_swap
    side, k_rev = i_rev // G, ks[i_rev % G]
    first, second, third = swap_moves(sa[i_swap], sb[i_swap], vidx, nv)
    mv = cache.select_move(use_swap, first, cache.select_move(
        use_rev, reversal_move(side, k_rev, vidx, nv),
        cache.select_move(use_del, deletion_move(j_del, vidx, nv), local.move)))
    then = (cache.select_move(use_swap, second, _noop(mv)), cache.select_move(use_swap, third, _noop(mv)))
    # A global move has one new segment, the chord v_{j−1} v_{j+1} or the
    # reversal's: its row (recomputed, see `candidates.winner_rows`) goes first in the block.
    # A swap's first prefix reversal makes a segment the third removes: its row is never read.
    jc = jnp.clip(j_del - 1, 0, V - 3)
    last = verts[jnp.maximum(nv - 1, 0)]
    rev_a = jnp.where(side == 0, verts[0], verts[k_rev])
    rev_b = jnp.where(side == 0, verts[jnp.minimum(k_rev + 1, V - 1)], last)
    glob, ga, gb = _ops.materialize((use_rev | use_del | use_swap, jnp.where(use_rev, rev_a, verts[jc]),
                                     jnp.where(use_rev, rev_b, verts[jc + 2])))
    row, _ = seg_d2_points(hx, ga, gb)  # (H+1,)
    row = jnp.where(use_swap, jnp.inf, row)
    block = jnp.where(glob, jnp.concatenate([row[None], local.rows[1:]]), local.rows)
    kind = jnp.where(use_swap, MOVE_SWAP, jnp.where(use_rev, MOVE_REVERSE, jnp.where(use_del, MOVE_DELETE,
                                                                                       local.kind)))
    return Contest(local.objective, mv, block, kind, then, (swaps.new_seg[0, i_swap], swaps.new_seg[1, i_swap]))
