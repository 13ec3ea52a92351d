"""slpc's distance cache (`jaxstream.curves.cache`) and moves against NumPy recomputations."""
import chex
import pytest
import numpy as np
import jax
import jax.numpy as jnp

from jaxstream.curves import cache, global_moves
from _refs import np_segment_table


@pytest.mark.parametrize("K", [1, 2, 3, 7, 50, 130])
def test_row_minima_against_a_sort(K):
    """Each column's three smallest cache entries in (value, segment) order,
    the rows in a random order (``row_seg``), with ties and inf (inactive
    segments), against NumPy's lexicographic sort: the written-out tree
    (K <= TREE_ROWS) and the reductions above it (K = 130). c2 is the
    second segment where no other segment ties with it and K (none) where
    one does; the minimum over all segments but any one or two, as
    `cache.min_without` takes it from them, against a direct masked minimum."""
    rng = np.random.default_rng(K)
    n = 300
    D = rng.integers(0, 6, (K, n)).astype(np.float32)  # many ties
    D[rng.random((K, n)) < 0.2] = np.inf
    D[:, :3] = np.inf  # whole columns of inactive segments
    D[:, 3:120] = rng.random((K, 117)).astype(np.float32)  # no ties
    if K >= 3:
        srt = np.argsort(D, 0)
        c = np.arange(40, 80)  # exactly two segments at the minimum
        D[srt[1, c], c] = D[srt[0, c], c]
        c = np.arange(80, 120)  # exactly two segments at the second smallest value
        D[srt[2, c], c] = D[srt[1, c], c]
    row_seg = rng.permutation(K).astype(np.int32)
    got = jax.jit(cache.row_minima)(jnp.asarray(D), jnp.asarray(row_seg))
    chex.assert_shape(got, [(n,)] * 5)
    for col in range(n):
        order = sorted(zip(D[:, col], row_seg))  # (value, segment)
        order += [(np.inf, K)] * 2
        ref = (order[0][0], order[0][1], order[1][0], order[1][1], order[2][0])
        out = tuple(np.asarray(g)[col] for g in got)
        assert out[0] == ref[0] and out[2] == ref[2] and out[4] == ref[4], (col, out, ref)
        assert out[1] == ref[1]
        tied = sum(1 for v, s in order[1:K] if v == ref[2])  # segments other than c1 at m2
        assert out[3] == (ref[3] if tied == 1 else K), (col, out, ref, tied)
    # every exclusion of one or two segments (a sample of the pairs for large
    # K); -1 and K stand for no segment, as at the line's ends
    pairs = np.array([(a, b) for a in range(-1, K + 1) for b in range(a, K + 1)], np.int32)
    if len(pairs) > 400:
        pairs = pairs[rng.choice(len(pairs), 400, replace=False)]
    sm = cache.Smallest(*got)
    two = np.asarray(cache.min_without(sm, jnp.asarray(pairs[:, :1]), jnp.asarray(pairs[:, 1:])))
    one = np.asarray(cache.min_without(sm, jnp.asarray(pairs[:, :1])))
    Dseg = D[np.argsort(row_seg)]  # segment order
    seg = np.arange(K)
    for (a, b), g2, g1 in zip(pairs, two, one):
        np.testing.assert_array_equal(g1, np.min(np.where((seg != a)[:, None], Dseg, np.inf), 0))
        keep = (seg != a) & (seg != b)
        np.testing.assert_array_equal(g2, np.min(np.where(keep[:, None], Dseg, np.inf), 0))




def test_row_minima_in_float64():
    """`cache.row_minima` under x64 (float64 cache, int64 row_seg) equals the
    float32 computation on values exact in both."""
    rng = np.random.default_rng(1)
    D = rng.integers(0, 4, (9, 64)).astype(np.float32)
    row_seg = rng.permutation(9)
    ref = jax.jit(cache.row_minima)(jnp.asarray(D), jnp.asarray(row_seg, jnp.int32))
    with jax.enable_x64(True):
        got = jax.jit(cache.row_minima)(jnp.asarray(D, jnp.float64), jnp.asarray(row_seg, jnp.int64))
        assert got[0].dtype == jnp.float64
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(r))




def test_apply_writes_only_the_moves_rows():
    """`cache.apply_move` against a NumPy recomputation, for every move on random
    lines of V = 6 vertices (nv = 2 … 6) with the cache's rows in a random
    order: every run of kept segments with 0 … 4 new ones between them (an
    insertion, a shift or a deletion anywhere, windows at either end), every
    single-vertex deletion and every prefix/suffix reversal, and a random
    reservoir column. The new permutation is a permutation; active segments'
    rows are the new line's distances; freed rows are inf; no other row
    changes but for the reservoir column."""
    rng = np.random.default_rng(0)
    V, d, n, K = 6, 2, 7, 4
    apply = jax.jit(cache.apply_move)

    def check(vidx, P, perm, hD, nv, mv, new_line, new_rows):
        n_new, nv2, lo = int(mv.n_new), int(mv.nv), int(mv.lo)
        block = np.full((K, n), 1e6, np.float32)  # junk past the move's rows
        block[:n_new] = new_rows
        slot = int(rng.integers(0, n))
        got_perm, got = apply(mv, jnp.int32(nv), jnp.asarray(perm), jnp.asarray(hD), jnp.asarray(block),
                              jnp.int32(slot), jnp.asarray(hD[:, -1]))
        got_perm, got = np.asarray(got_perm), np.asarray(got)
        np.testing.assert_array_equal(np.asarray(mv.vidx)[:nv2], new_line)
        assert sorted(got_perm) == list(range(V - 1))
        ref = np_segment_table(P, new_line.astype(np.float64)).T
        ref[:, slot] = ref[:, -1]
        np.testing.assert_allclose(got[got_perm[:nv2 - 1]], ref, rtol=1e-5, atol=1e-4)
        assert np.all(np.isinf(got[got_perm[nv2 - 1:]]))
        touched = set(got_perm[lo:lo + n_new]) | set(perm[lo:lo + int(mv.n_rem)])
        for r in set(range(V - 1)) - touched:
            np.testing.assert_array_equal(np.delete(got[r], slot), np.delete(hD[r], slot))

    cases = 0
    for nv in range(2, V + 1):
        vidx = rng.integers(-20, 20, (V, d)).astype(np.int32)
        P = rng.normal(size=(n, d)) * 10
        perm = rng.permutation(V - 1).astype(np.int32)
        hD = np.full((V - 1, n), np.inf, np.float32)
        hD[perm[:nv - 1]] = np_segment_table(P, vidx[:nv].astype(np.float64)).T
        line = vidx[:nv]
        for lo in range(nv):
            for n_rem in range(min(nv - lo, K + 1)):  # a block of K rows frees at most K
                for n_new in range(K + 1):
                    left, right = lo > 0, lo + n_rem < nv - 1
                    n_mid = n_new - 1 + (not left) + (not right)
                    nv2 = nv + n_new - n_rem
                    if n_mid < 0 or not 2 <= nv2 <= V or not (left or right or n_new):
                        continue
                    new_line = np.concatenate([line[:lo + 1]] * left + [rng.integers(-20, 20, (n_mid, d))]
                                              + [line[lo + n_rem:]] * right).astype(np.int32)
                    vfull = np.concatenate([new_line, np.zeros((V - nv2, d), np.int32)])
                    mv = cache.move(jnp.asarray(vfull), nv2, lo, n_new, n_rem)
                    rows = np_segment_table(P, new_line.astype(np.float64)).T[lo:lo + n_new]
                    check(vidx, P, perm, hD, nv, mv, new_line, rows)
                    cases += 1
        for j in range(nv if nv >= 3 else 0):
            mv = global_moves.deletion_move(jnp.int32(j), jnp.asarray(vidx), jnp.int32(nv))
            new_line = np.delete(line, j, 0)
            rows = np_segment_table(P, new_line.astype(np.float64)).T[j - 1:j] if 1 <= j <= nv - 2 else np.zeros((0, n))
            check(vidx, P, perm, hD, nv, mv, new_line, rows)
            cases += 1
        for side in (0, 1):
            for k in range(nv - 1):
                mv = global_moves.reversal_move(jnp.int32(side), jnp.int32(k), jnp.asarray(vidx), jnp.int32(nv))
                new_line = (np.concatenate([line[:k + 1][::-1], line[k + 1:]]) if side == 0
                            else np.concatenate([line[:k + 1], line[k + 1:][::-1]]))
                check(vidx, P, perm, hD, nv, mv, new_line, np_segment_table(P, new_line.astype(np.float64)).T[k:k + 1])
                cases += 1
    assert cases >= 200
