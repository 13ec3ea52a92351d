"""slpc's global moves: deletions, end reversals, swaps and relocations anywhere on the line.

The local window only ever sees the line near x_t (or one random place), so
vertices the data have left behind, and lines that visit stretches of the
data in the wrong order, would wait for an exploration round, or for ever:
no local move undoes a wrong order. Each round G deletions, G reversals at
each end, G/2 swaps (2-opt: two segments replaced by the two that join their
ends crosswise, the vertices between them reversed) and G/4 relocations
(or-opt: two neighbouring stretches exchanged, three variants) compete with
the local winner. Deletions, reversals and the first segment of a swap or a
relocation are runs of consecutive ones starting at a uniform place (all of
them when the line is short); the other segments are uniform among those
after it. With each cache column's three smallest distances
(`cache.row_minima`) each move's objective is exact in O(H) (a relocation's
is an upper bound where a point's two nearest segments are both removed).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import _ops, geometry
from . import cache
from .candidates import MOVE_DELETE, MOVE_RELOCATE, MOVE_REVERSE, MOVE_SWAP, seg_d2_points
from .objective import Params, price
from .types import Draws, Observation

Array = jax.Array

__all__ = ["n_global", "rotating", "Deletions", "score_deletions", "deletion_move", "Reversals",
           "score_reversals", "reversal_move", "n_swaps", "swap_pairs", "Swaps", "score_swaps", "swap_order",
           "n_relocations", "relocation_triples", "RELOCATION_SEGMENTS", "RELOCATION_VARIANTS", "Relocations", "score_relocations",
           "relocation_order", "Contest", "compete"]


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


def n_relocations(G: int) -> int:
    """How many relocations a round scores when it scores G deletions: a quarter as many (each
    scores three variants, seven new segments' distances)."""
    return max(G // 4, 1)


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


def swap_order(a, b, V: int):
    """The swap of segments (a, b) as a vertex order (V,) for `cache.apply_reorder`:
    v_0 … v_a, v_b … v_{a+1}, v_{b+1} …"""
    j = jnp.arange(V)
    return jnp.where((j > a) & (j <= b), a + 1 + b - j, j).astype(jnp.int32)


def relocation_triples(offset, uv, nv, R: int):
    """R triples of segments (a, b, c), a < b < c <= nv − 2, for `score_relocations`.

    a runs over R consecutive segments from a uniform place (`rotating`); b is
    uniform among a + 1 … nv − 3 and c among b + 1 … nv − 2 (``uv`` (2, R) uniforms).

    Returns:
      ``(a, b, c, ok)``, (R,) each; ``ok`` false where a repeats, and on lines of
      fewer than four segments.
    """
    a, distinct = rotating(offset, nv - 3, R)

    def pick(u, lo, hi):  # uniform in lo … hi (hi >= lo where ok)
        n = jnp.maximum(hi - lo + 1, 1)
        return lo + jnp.clip((u * n.astype(u.dtype)).astype(jnp.int32), 0, n - 1)

    b = pick(uv[0], a + 1, nv - 3)
    c = pick(uv[1], b + 1, nv - 2)
    return a, b, c, distinct & (nv >= 5)


#: A relocation's new segments, as pairs of its end vertices (0: v_a, 1: v_{a+1},
#: 2: v_b, 3: v_{b+1}, 4: v_c, 5: v_{c+1}), and which three each variant makes.
RELOCATION_SEGMENTS = ((0, 3), (4, 1), (2, 5), (4, 2), (1, 5), (0, 4), (3, 1))
RELOCATION_VARIANTS = ((0, 1, 2), (0, 3, 4), (5, 6, 2))  # Q S, Q S^r, Q^r S


class Relocations(NamedTuple):
    delta_loss: Array  # (3, R) change of the weighted loss, per variant (`RELOCATION_VARIANTS`)
    new_len: Array  # (3, R)
    ok: Array  # (3, R)
    new_seg: Array  # (7, R, H+1) distances to the new segments (`RELOCATION_SEGMENTS`)


# Wide signature: the round's history, line and triples, as `compete` holds them.
def score_relocations(hx, sm: cache.Smallest, cap, w, verts, nv, length, a, b, c, ok) -> Relocations:
    """Or-opt: two neighbouring stretches of the line exchanged, for each triple (a, b, c) (R,).

    With S = v_{a+1} … v_b and Q = v_{b+1} … v_c, the line P S Q R becomes
    P Q S R, P Q S^r R or P Q^r S R (``^r``: reversed): segments a, b and c
    are replaced by three new ones, the others kept. A line that visits the
    legs of a route in a wrong order (leg 3 after leg 4) needs a stretch moved
    elsewhere, which no vertex move, deletion, end reversal or 2-opt swap does.

    The loss over the kept segments is exact where a point's two nearest
    segments are not both removed, and ``cap`` (an upper bound) where they
    are: the change of loss is then never underestimated.
    """
    V = verts.shape[0]
    at = lambda i: verts[jnp.clip(i, 0, V - 1)]  # noqa: E731
    ends = [at(a), at(a + 1), at(b), at(b + 1), at(c), at(c + 1)]  # 6 × (R, d)
    # static indexing throughout: XLA:CPU runs a gather with constant indices as a gather
    ends_a, ends_b = _ops.materialize((jnp.stack([ends[i] for i, _ in RELOCATION_SEGMENTS]),
                                       jnp.stack([ends[j] for _, j in RELOCATION_SEGMENTS])))  # (7, R, d)
    new_seg, _ = seg_d2_points(hx, ends_a, ends_b)  # (7, R, H+1)
    ka, kb, kc = a[:, None], b[:, None], c[:, None]
    out1 = (sm.c1[None] == ka) | (sm.c1[None] == kb) | (sm.c1[None] == kc)
    out2 = (sm.c2[None] == ka) | (sm.c2[None] == kb) | (sm.c2[None] == kc)
    kept = jnp.where(~out1, sm.m1[None], jnp.where(~out2, sm.m2[None], cap))  # (R, H+1)
    new = jnp.stack([jnp.minimum(kept, jnp.minimum(jnp.minimum(new_seg[i], new_seg[j]), new_seg[k]))
                     for i, j, k in RELOCATION_VARIANTS])  # (3, R, H+1)
    dl = jnp.sum(jnp.where(w > 0, w * (new - sm.m1), 0.0), -1)
    norm = lambda v: jnp.sqrt(jnp.sum(v ** 2, -1))  # noqa: E731
    seg_len = norm(ends_b - ends_a)  # (7, R)
    old = norm(ends[1] - ends[0]) + norm(ends[3] - ends[2]) + norm(ends[5] - ends[4])
    new_len = length - old[None] + jnp.stack([seg_len[i] + seg_len[j] + seg_len[k] for i, j, k in RELOCATION_VARIANTS])
    ok = ok & (c <= nv - 2) & (a < b) & (b < c)
    return Relocations(dl, new_len, ok[None] & jnp.isfinite(dl), new_seg)


def relocation_order(variant, a, b, c, V: int):
    """The relocation ``variant`` (`RELOCATION_VARIANTS`) of (a, b, c) as a vertex order (V,) for
    `cache.apply_reorder`: v_0 … v_a, then Q (v_{b+1} … v_c, or reversed), then S
    (v_{a+1} … v_b, or reversed), then v_{c+1} …"""
    j = jnp.arange(V)
    i = j - a - 1  # the position in the exchanged stretch
    nq = c - b
    q = jnp.where(variant == 2, c - i, b + 1 + i)
    t = i - nq
    s_ = jnp.where(variant == 1, b - t, a + 1 + t)
    return jnp.where((j > a) & (j <= c), jnp.where(i < nq, q, s_), j).astype(jnp.int32)


class Contest(NamedTuple):
    """The local winner a round's global moves compete with, and the winner.

    Attributes:
      objective: its objective (change of the capped loss plus price).
      move: its `cache.Move`.
      rows: its new segments' cache rows, (W+2, H+1).
      kind: its move kind.
      order: (V,) a reordering of the vertices applied after ``move`` (a swap's or a
        relocation's, `cache.apply_reorder`; the identity otherwise), or None.
    """

    objective: Array
    move: cache.Move
    rows: Array
    kind: Array
    order: Array | None = None


def compete(draws: Draws, obs: Observation, local: Contest, prm: Params, p: int, penalty: str) -> Contest:
    """Score G single-vertex deletions, G end reversals at each end, G/2 swaps and G/4 relocations
    in three variants each (all of them when the line is short enough; otherwise runs of
    consecutive ones starting at a uniform place, so each is scored every ~nv/G rounds); the best
    of them replaces the local winner if its objective is lower. Returns the winner (its
    objective is the local one's, unused after), with its new rows; a swap or a relocation is
    committed as a reordering of the vertices (``order``, `cache.apply_reorder`)."""
    hx, verts, vidx, nv, w = obs.hx, obs.verts, obs.vidx, obs.nv, obs.w
    sm = cache.smallest(obs.minima, obs.cap)
    V, d = verts.shape
    G = draws.z_del.shape[0]
    dt = verts.dtype
    length = geometry.polyline_length(verts, nv)
    js, js_ok = rotating(draws.offset[0], nv, G)
    ks, ks_ok = rotating(draws.offset[1], nv - 1, G)
    sa, sb, s_ok = swap_pairs(draws.offset[2], draws.pair, nv, draws.pair.shape[0])
    ra, rb, rc, r_ok = relocation_triples(draws.offset_rel, draws.triple, nv, draws.triple.shape[1])
    dels = score_deletions(hx, sm, w, verts, nv, length, js, js_ok)
    revs = score_reversals(hx, sm, w, verts, nv, length, ks, ks_ok)
    swaps = score_swaps(hx, sm, w, verts, nv, length, sa, sb, s_ok)
    rels = score_relocations(hx, sm, obs.cap, w, verts, nv, length, ra, rb, rc, r_ok)

    def objective(dl, new_len, ok, n_segs, z):
        pr = price(penalty, jnp.full(z.shape, n_segs, dt), new_len, z, obs.sigma2, obs.n_tot, p, d, prm, obs.spread)
        return jnp.where(ok & (new_len <= prm.L), dl + pr, jnp.inf)

    obj_del = objective(dels.delta_loss, dels.new_len, dels.ok, nv - 2, draws.z_del)
    obj_rev = objective(revs.delta_loss, revs.new_len, revs.ok, nv - 1, draws.z_rev).reshape(-1)
    obj_swap = objective(swaps.delta_loss, swaps.new_len, swaps.ok, nv - 1, draws.z_swap)
    obj_rel = objective(rels.delta_loss, rels.new_len, rels.ok, nv - 1, draws.z_rel).reshape(-1)
    i_del, i_rev, i_swap, i_rel = jnp.argmin(obj_del), jnp.argmin(obj_rev), jnp.argmin(obj_swap), jnp.argmin(obj_rel)
    j_del = js[i_del]
    use_del = obj_del[i_del] < local.objective
    best = jnp.minimum(local.objective, obj_del[i_del])
    use_rev = obj_rev[i_rev] < best
    best = jnp.minimum(best, obj_rev[i_rev])
    use_swap = obj_swap[i_swap] < best
    use_rel = obj_rel[i_rel] < jnp.minimum(best, obj_swap[i_swap])
    use_swap = use_swap & ~use_rel
    use_rev = use_rev & ~use_swap & ~use_rel
    side, k_rev = i_rev // G, ks[i_rev % G]
    R = rb.shape[0]
    variant, t = i_rel // R, i_rel % R
    chain = use_swap | use_rel
    order = jnp.where(use_rel, relocation_order(variant, ra[t], rb[t], rc[t], V),
                      jnp.where(use_swap, swap_order(sa[i_swap], sb[i_swap], V), jnp.arange(V, dtype=jnp.int32)))
    mv = cache.select_move(chain, cache.move(vidx, nv, 0, 0, 0), cache.select_move(
        use_rev, reversal_move(side, k_rev, vidx, nv),
        cache.select_move(use_del, deletion_move(j_del, vidx, nv), local.move)))
    # A deletion or an end reversal has one new segment, the chord v_{j−1} v_{j+1} or the
    # reversal's: its row (recomputed, see `candidates.winner_rows`) goes first in the block.
    jc = jnp.clip(j_del - 1, 0, V - 3)
    last = verts[jnp.maximum(nv - 1, 0)]
    rev_a = jnp.where(side == 0, verts[0], verts[k_rev])
    rev_b = jnp.where(side == 0, verts[jnp.minimum(k_rev + 1, V - 1)], last)
    glob, ga, gb = _ops.materialize((use_rev | use_del, jnp.where(use_rev, rev_a, verts[jc]),
                                     jnp.where(use_rev, rev_b, verts[jc + 2])))
    row, _ = seg_d2_points(hx, ga, gb)  # (H+1,)
    block = jnp.where(glob, jnp.concatenate([row[None], local.rows[1:]]), local.rows)
    kind = jnp.where(use_rel, MOVE_RELOCATE, jnp.where(use_swap, MOVE_SWAP, jnp.where(
        use_rev, MOVE_REVERSE, jnp.where(use_del, MOVE_DELETE, local.kind))))
    return Contest(local.objective, mv, block, kind, order)
