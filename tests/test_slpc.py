"""slpc versus independent NumPy references, exact cases, invariants and statistics."""
import functools
import math

import chex
import numpy as np
import jax
import jax.numpy as jnp
import pytest
from scipy import stats

import jaxstream as js
from jaxstream import curves as pc
from jaxstream.curves import cache, global_moves, history
from jaxstream._stats import chi2_lower_wh
from jaxstream import datasets

from _refs import np_arc_weighted_median, np_knot_median, np_polyline_sqdist, np_segment_table


def np_constants(p, d, delta, R):
    vd = math.pi ** (d / 2) / math.gamma(d / 2 + 1)
    c1 = math.log(8 * p * math.e * vd) + 3 * d ** 1.5 - d
    c2 = math.log(2) / (math.sqrt(d) * delta) + d / delta
    c3 = d * math.log(math.sqrt(d) * (2 * R + delta) / delta)
    c0 = d * (2 * R + delta) ** 2
    return c0, c1, c2, c3


def user_history(s):
    """Stored points (data units) and their count."""
    n = int(s.n_stored)
    return np.asarray(s.hist_x[:n], np.float64) * float(s.scale) + np.asarray(s.centre, np.float64), n


# Compiling slpc's round takes seconds and dominates these tests' time, so
# every test of a configuration shares its compiled programs: one learner
# object per configuration, its functions jitted once (`_jit`) and whole
# streams run as chunks of CHUNK rounds through one compiled scan
# (`run_chunked`). Checks on shapes that cannot share (other dimensions,
# capacities, batches) compile their own.
CHUNK = 20


@functools.lru_cache(maxsize=None)
def _jit(fn):
    """One `jax.jit` per function object, reused by every test."""
    return jax.jit(fn)


def run_chunked(learner, key, xs, state):
    """`run_stream(learner, key, xs, state, trace="info")` as chunks of CHUNK
    rounds (``step_offset``: round t's key is ``fold_in(key, t)`` in both) and
    a tail of single jitted updates with the same round keys, so one compiled
    scan serves every stream length. The trace comes back as NumPy arrays."""
    xs = np.asarray(xs)
    full = len(xs) - len(xs) % CHUNK
    infos = []
    for i in range(0, full, CHUNK):
        state, info = js.run_stream(learner, key, xs[i:i + CHUNK], state, trace="info", step_offset=i)
        infos.append(jax.tree_util.tree_map(np.asarray, info))
    upd = _jit(learner.update)
    for i in range(full, len(xs)):
        state, info = upd(jax.random.fold_in(key, i), state, xs[i])
        infos.append(jax.tree_util.tree_map(lambda a: np.asarray(a)[None], info))
    return state, jax.tree_util.tree_map(lambda *a: np.concatenate(a), *infos)


def init_state(learner, key, x_init, params=None):
    """``learner.init`` jitted, always given its params (one compiled program
    whether a test passes other params or not)."""
    return _jit(learner.init)(key, x_init, learner.params if params is None else params)


@functools.lru_cache(maxsize=None)
def _cubic():
    return datasets.make_cubic_stream(260, seed=7).astype(np.float32)


@functools.lru_cache(maxsize=None)
def _default():
    """The default learner (every capacity at its default). Cached learners
    are built with float32 params whatever the first caller's x64 mode (a
    float64 test that came first would otherwise leak float64 params into
    every later float32 test)."""
    with jax.enable_x64(False):
        return js.slpc()


PCA_KW = dict(max_segments=5, init="pca")


@functools.lru_cache(maxsize=None)
def _pca():
    """The paper's first-PC start with a small p (small-p, wrapper, checkpoint
    and initial-segment checks share it); float32 params, see `_default`."""
    with jax.enable_x64(False):
        return js.slpc(**PCA_KW)


@functools.lru_cache(maxsize=None)
def _trained():
    L, cubic = _default(), _cubic()
    s0 = init_state(L, jax.random.key(0), cubic[:20])
    s, info = run_chunked(L, jax.random.key(1), cubic[20:], s0)
    return s0, s, info


def _as_float64(params):
    return jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float64), params)


@pytest.fixture(scope="module")
def cubic():
    return _cubic()


@pytest.fixture(scope="module")
def learner():
    return _default()


@pytest.fixture(scope="module")
def run(learner):
    return lambda k, xs, s: run_chunked(learner, k, xs, s)


@pytest.fixture(scope="module")
def run_many(learner):
    return lambda k, xs, s: js.run_streams(learner, k, xs, s, trace="info")


@pytest.fixture(scope="module")
def init(learner):
    return lambda k, x, prm=None: init_state(learner, k, x, prm)


@pytest.fixture(scope="module")
def trained():
    return _trained()


def test_theoretical_constants_match_the_papers_formulas():
    for p, d, delta, R in [(50, 2, 0.1, 7.0), (10, 3, 0.5, 2.0), (5, 1, 1.0, 1.0)]:
        prm = pc.default_params(delta=delta, R=R, L=0.1 * p * d * R)
        c0, c1, c2, c3 = np_constants(p, d, delta, R)
        c = pc.theoretical_constants(p, d, prm.delta, prm.R)
        np.testing.assert_allclose([c.c0, c.c1, c.c2, c.c3], [c0, c1, c2, c3], rtol=1e-5)
        Lmax = 0.1 * p * d * R
        for t in (1, 1000):
            eta = math.sqrt((c1 * p + c2 * Lmax + c3) / (c0 * (math.e - 1) * t))
            np.testing.assert_allclose(pc.learning_rate(t, p, d, prm), eta, rtol=1e-5)


def test_pca_init_standardises_and_takes_the_first_principal_segment():
    rng = np.random.default_rng(0)
    t = rng.uniform(-3, 3, 20)
    x = (np.stack([100 + 2 * t, -50 + t], 1) + 0.01 * rng.normal(size=(20, 2))).astype(np.float32)
    L = _pca()
    s = init_state(L, jax.random.key(0), x, L.params._replace(delta=jnp.float32(0.05)))
    centre = x.mean(0)
    scale = np.sqrt(((x - centre) ** 2).sum(1).mean())
    np.testing.assert_allclose(s.centre, centre, rtol=1e-6)
    np.testing.assert_allclose(s.scale, scale, rtol=1e-5)
    v = np.asarray(s.vertices[:2], np.float64)
    assert int(s.n_vertices) == 2
    u = (v - centre) / scale
    np.testing.assert_allclose(u, np.round(u / 0.05) * 0.05, atol=1e-4)  # on the standardised lattice
    direction = (v[1] - v[0]) / np.linalg.norm(v[1] - v[0])
    assert abs(abs(direction @ np.array([2, 1]) / np.sqrt(5)) - 1) < 1e-3
    ends = sorted([x[np.argmin(t)], x[np.argmax(t)]], key=lambda e: e[0])
    np.testing.assert_allclose(sorted(list(v), key=lambda e: e[0]), ends, atol=0.05 * scale)
    assert int(s.n_stored) == 20 and int(s.n_seen) == 20


def test_cache_is_every_distance_to_every_segment(trained, cubic):
    """The per-row, per-segment distance cache vs a loop over segments (after
    a stream): segment k's row is hist_D[seg_slot[k]], seg_slot a permutation
    whose entries from K on are the free rows (inf)."""
    _, s, _ = trained
    k = int(s.n_vertices) - 1
    V = np.asarray(s.std_vertices[: k + 1], np.float64)
    n = int(s.n_stored)
    ref = np_segment_table(np.asarray(s.hist_x[:n], np.float64), V)
    perm = np.asarray(s.seg_slot)
    assert sorted(perm) == list(range(perm.size)) and not np.array_equal(perm, np.arange(perm.size))
    np.testing.assert_allclose(np.asarray(s.hist_D)[perm[:k], :n].T, ref, rtol=2e-4, atol=1e-6)
    np.testing.assert_array_equal(s.segment_distances, np.asarray(s.hist_D)[perm])
    assert np.all(np.isinf(np.asarray(s.hist_D)[perm[k:], :n]))


@pytest.mark.parametrize("d", [1, 3, 6])
def test_bookkeeping_in_any_dimension(d):
    rng = np.random.default_rng(d)
    t = rng.uniform(0, 3, 90)
    xs = np.stack([np.cos(t * (k + 1)) * (k + 1) for k in range(d)], 1) + 0.05 * rng.normal(size=(90, d))
    L = js.slpc(max_segments=8, history_size=40, init="pca")
    s = jax.jit(L.init)(jax.random.key(0), xs[:20].astype(np.float32))
    s, losses = js.run_stream(L, jax.random.key(1), xs[20:].astype(np.float32), s)
    k = int(s.n_vertices) - 1
    ref = np_segment_table(np.asarray(s.hist_x[:40], np.float64), np.asarray(s.std_vertices[: k + 1], np.float64))
    assert sorted(np.asarray(s.seg_slot)) == list(range(8))
    np.testing.assert_allclose(s.segment_distances[:k, :40].T, ref, rtol=2e-4, atol=1e-6)
    # stored points are stream points, and the loss is the distance before the update
    hist, n = user_history(s)
    assert n == 40 and all(np.min(np.abs(xs - h).sum(1)) < 1e-3 * (1 + np.abs(h).sum()) for h in hist)
    assert np.all(np.isfinite(np.asarray(losses))) and np.all(np.asarray(losses) >= 0)


def _np_row_weights(s):
    """What each stored row weighs in the objective, in NumPy: it stands for m/n of the points
    seen (m = n_seen, or max(τ, H) once the stream is longer than a finite memory τ), discounted
    by exp(−age/τ) (1 with an unlimited memory)."""
    n, H = int(s.n_stored), s.hist_x.shape[0] - 1
    tau = float(s.memory) if np.isnan(float(s.params.memory)) else float(s.params.memory)
    m = min(float(int(s.n_seen)), max(tau, float(H)))
    age = int(s.n_seen) - np.asarray(s.hist_t[:n], np.float64)
    return m / n * np.exp(-age / tau)


def _brute_force_delta(prop, s, x, cap=np.inf):
    """Weighted Δ(cumulative loss) of every candidate by a NumPy loop (data
    units), each point's loss min(squared distance, cap)."""
    hist, n = user_history(s)
    w = _np_row_weights(s)
    loss = lambda P, v: np.minimum(np_polyline_sqdist(P, v), cap)
    base = (w * loss(hist, prop.vertices[0, : int(prop.n_vertices[0])])).sum() + \
        loss(x[None], prop.vertices[0, : int(prop.n_vertices[0])])[0]
    out = []
    for c in range(prop.vertices.shape[0]):
        vc = np.asarray(prop.vertices[c, : int(prop.n_vertices[c])], np.float64)
        if len(vc) < 2:
            out.append(np.nan)
            continue
        out.append((w * loss(hist, vc)).sum() + loss(x[None], vc)[0] - base)
    return np.array(out)


def _cap(s, info):
    """The objective's largest loss of one point (data units): outlier_scale
    times max(d − 1, 1) noise variances σ̂² (σ̂² checked against a sort in
    test_sorted_residuals_and_noise_level_match_a_sort)."""
    floor = (float(s.params.delta) * float(s.scale)) ** 2  # the lattice resolution, data units
    return float(s.params.outlier_scale) * max(s.hist_x.shape[1] - 1, 1) * max(float(info.sigma2), floor)


def _with_outliers(xs, at=(2.0, 4.5, 6.5, 8.5)):
    """xs (a cubic stream) with one point after the initial ones near each
    abscissa in ``at`` moved 4 (data) units off the curve, alternately up and
    down: isolated points, 2.5-4 units from the cubic and > 4 from each other."""
    xs = xs.copy()
    idx = np.array([40 + int(np.argmin(np.abs(xs[40:, 0] - a))) for a in at])
    xs[idx, 1] += np.where(np.arange(len(at)) % 2 == 0, 4.0, -4.0).astype(xs.dtype)
    return xs, idx


@pytest.mark.parametrize("overflow,outliers", [(False, False), (True, False), (False, True)])
def test_candidate_losses_match_brute_force(learner, init, run, overflow, outliers):
    """Every candidate's Δloss vs a loop over the stored points, at the default
    capacities (dense: nothing is ever truncated). With ``overflow`` the
    history is a reservoir (n/H per stored point) and x_t counts with weight 1.
    With ``outliers`` some stored points lie beyond the loss cap, and the
    last rounds' x are outliers: each point's loss is min(Δ, cap)."""
    xs = datasets.make_cubic_stream(700 if overflow else 200, seed=11).astype(np.float32)
    if outliers:
        xs, _ = _with_outliers(xs, (1.0, 2.0, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5))
        xs[-8::2] += np.array([0.0, 4.0], np.float32)
    s = init(jax.random.key(2), xs[:20])
    s, _ = run(jax.random.key(3), xs[20:-8], s)
    assert (int(s.n_stored) == 512) == overflow and int(s.n_seen) == len(xs) - 8
    prop_fn = _jit(pc.propose)
    capped = 0
    for i, x in enumerate(xs[-8:]):
        _, info, prop = prop_fn(jax.random.key(10 + i), s, x)
        ref = _brute_force_delta(prop, s, x.astype(np.float64), _cap(s, info))
        feas = np.asarray(prop.feasible)
        scale = max(1.0, float(np.abs(ref[feas]).max()))
        np.testing.assert_allclose(np.asarray(prop.delta_loss)[feas], ref[feas], atol=2e-4 * scale * (1 + 4 * overflow))
        assert int(prop.winner) == int(np.argmin(np.where(feas, np.asarray(prop.objective), np.inf)))
        plain = _brute_force_delta(prop, s, x.astype(np.float64))
        capped += np.abs(plain - ref)[feas].max() > 0.05 * scale
        s, _ = _jit(learner.update)(jax.random.key(10 + i), s, x)
    # the cap changes candidates' Δloss (the capped reference is not vacuous)
    assert capped > 0 or not outliers


@pytest.mark.parametrize("capped", [False, True])
def test_end_reversals_and_deletions_match_brute_force(trained, capped):
    """Every prefix/suffix reversal (2-opt at an end) and every single-vertex
    deletion: its Δ(weighted loss) and length by a NumPy loop over the new
    line, each point's loss min(Δ, cap) (``capped``: the cap at the 80th
    percentile of the current distances, so that it binds), and the
    committed reversed line and distance cache against a recomputation."""
    _, s, _ = trained
    nv, n = int(s.n_vertices), int(s.n_stored)
    assert nv >= 4
    V = s.std_vertices
    H1 = s.hist_x.shape[0]
    w = jnp.where(jnp.arange(H1) < n, 1.5, 0.0)
    hD, perm = s.hist_D, s.seg_slot
    row_seg = jnp.argsort(perm).astype(jnp.int32)  # the segment in each row of hD
    P = np.asarray(s.hist_x[:n], np.float64)
    v = np.asarray(V[:nv], np.float64)
    cap = float(np.quantile(np_polyline_sqdist(P, v), 0.8)) if capped else np.inf
    sm = cache.smallest(cache.row_minima(hD, row_seg), jnp.float32(cap))
    length = js.geometry.polyline_length(V, s.n_vertices)
    # Every deletion and every reversal: the offsets and the subset (G = V)
    # are the identity, as `global_moves.compete` uses them on a short line.
    G = V.shape[0]
    jj, jj_ok = global_moves.rotating(jnp.float32(0.0), s.n_vertices, G)
    kk, kk_ok = global_moves.rotating(jnp.float32(0.0), s.n_vertices - 1, G)
    np.testing.assert_array_equal(np.asarray(jj)[:nv], np.arange(nv))
    np.testing.assert_array_equal(np.asarray(jj_ok), np.arange(G) < nv)
    revs = global_moves.score_reversals(s.hist_x, sm, w, V, s.n_vertices, length, kk, kk_ok)
    dels = global_moves.score_deletions(s.hist_x, sm, w, V, s.n_vertices, length, jj, jj_ok)
    # Rotating runs of 3 that wrap round (over the nv vertices for deletions,
    # the nv − 1 segments for reversals) score the same moves as the full set.
    def same_moves(sub, full, idx):
        for f in ("delta_loss", "new_len", "ok"):
            got, ref = np.asarray(getattr(sub, f)), np.asarray(getattr(full, f))[..., idx]
            np.testing.assert_allclose(np.where(ref == np.inf, 0, got), np.where(ref == np.inf, 0, ref), rtol=1e-6)

    jsub, jsub_ok = global_moves.rotating(jnp.float32((nv - 2 + 0.5) / nv), s.n_vertices, 3)
    np.testing.assert_array_equal(np.asarray(jsub), [nv - 2, nv - 1, 0])
    assert np.all(np.asarray(jsub_ok))
    same_moves(global_moves.score_deletions(s.hist_x, sm, w, V, s.n_vertices, length, jsub, jsub_ok), dels, [nv - 2, nv - 1, 0])
    ksub, ksub_ok = global_moves.rotating(jnp.float32((nv - 3 + 0.5) / (nv - 1)), s.n_vertices - 1, 3)
    np.testing.assert_array_equal(np.asarray(ksub), [nv - 3, nv - 2, 0])
    rsub = global_moves.score_reversals(s.hist_x, sm, w, V, s.n_vertices, length, ksub, ksub_ok)
    same_moves(rsub, revs, [nv - 3, nv - 2, 0])
    assert np.asarray(rsub.ok).sum() == 4  # prefix at nv − 3 and nv − 2, suffix at nv − 3 and 0
    loss = lambda line: 1.5 * np.minimum(np_polyline_sqdist(P, line), cap).sum()
    base = loss(v)
    for j in range(nv):
        line = np.delete(v, j, 0)
        assert bool(dels.ok[j])
        np.testing.assert_allclose(float(dels.delta_loss[j]), loss(line) - base, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(float(dels.new_len[j]), np.linalg.norm(np.diff(line, axis=0), axis=1).sum(),
                                   rtol=1e-5)
    assert not np.any(np.asarray(dels.ok[nv:]))  # repeats of the run are not moves
    seen = 0
    for side in (0, 1):
        for k in range(nv - 1):
            line = np.concatenate([v[k::-1], v[k + 1:]]) if side == 0 else np.concatenate([v[:k + 1], v[:k:-1]])
            valid = (1 <= k <= nv - 2) if side == 0 else (k <= nv - 3)
            assert bool(revs.ok[side, k]) == valid
            if not valid:
                continue
            seen += 1
            ref = loss(line) - base
            np.testing.assert_allclose(float(revs.delta_loss[side, k]), ref, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(float(revs.new_len[side, k]),
                                       np.linalg.norm(np.diff(line, axis=0), axis=1).sum(), rtol=1e-5)
            mv = global_moves.reversal_move(side, k, s.vertex_idx, s.n_vertices)
            new_perm, newD = cache.apply_move(mv, s.n_vertices, perm, hD, revs.new_seg[side, k][None])
            _check_line_and_cache(s, mv.vidx, new_perm, newD, line, P)
    assert seen == 2 * nv - 4


def _moves_setup(s, capped):
    """What the global moves' brute-force tests share: the trained state's line, history and
    cache, rows weighted 1.5, and the loss cap (the 0.8 quantile of the residuals, or none)."""
    nv, n = int(s.n_vertices), int(s.n_stored)
    V = s.std_vertices
    H1 = s.hist_x.shape[0]
    row_seg = jnp.argsort(s.seg_slot).astype(jnp.int32)
    P = np.asarray(s.hist_x[:n], np.float64)
    v = np.asarray(V[:nv], np.float64)
    cap = float(np.quantile(np_polyline_sqdist(P, v), 0.8)) if capped else 1e30
    sm = cache.smallest(cache.row_minima(s.hist_D, row_seg), jnp.float32(cap))
    return dict(nv=nv, n=n, V=V, w=jnp.where(jnp.arange(H1) < n, 1.5, 0.0), P=P, v=v, cap=cap, sm=sm,
                length=js.geometry.polyline_length(V, s.n_vertices),
                loss=lambda line: 1.5 * np.minimum(np_polyline_sqdist(P, line), cap).sum())


def _check_reordered(s, order, line, P):
    """The line and the cache after `cache.apply_reorder` (order (V,)) (`_check_line_and_cache`)."""
    new_perm, newD = cache.apply_reorder(order, s.n_vertices, s.seg_slot, s.hist_D, s.hist_x, s.std_vertices)
    _check_line_and_cache(s, s.vertex_idx[order], new_perm, newD, line, P)


def _check_line_and_cache(s, vidx, new_perm, newD, line, P):
    """A move's line (lattice vidx (V, d)) against ``line``, and its cache (new_perm, newD) against
    a recomputation of every stored point's distance to each of its segments."""
    nv, n = int(s.n_vertices), P.shape[0]
    got = np.asarray(vidx[:nv], np.float64) * float(s.params.delta)
    np.testing.assert_allclose(got, line, atol=1e-6)
    new_perm = np.asarray(new_perm)
    assert sorted(new_perm) == list(range(new_perm.size))
    seg_rows = np.asarray(newD)[new_perm]
    np.testing.assert_allclose(seg_rows[:nv - 1, :n].T, np_segment_table(P, line), rtol=2e-4, atol=1e-6)
    assert np.all(np.isinf(seg_rows[nv - 1:, :n]))


@pytest.mark.parametrize("capped", [False, True])
def test_swaps_match_brute_force(trained, capped):
    """Every swap (2-opt inside the line) of segments a < b − 1: its Δ(weighted loss) and length
    by a NumPy loop over the new line (v_0 … v_a, v_b … v_{a+1}, v_{b+1} … ), each point's loss
    min(Δ, cap), and the line and cache after its reordering (`cache.apply_reorder`) against a
    recomputation; `swap_pairs` draws only valid pairs and every one of them."""
    _, s, _ = trained
    m = _moves_setup(s, capped)
    nv, v = m["nv"], m["v"]
    assert nv >= 5
    pairs = [(a, b) for a in range(nv - 1) for b in range(a + 2, nv - 1)]
    a = jnp.asarray([p[0] for p in pairs], jnp.int32)
    b = jnp.asarray([p[1] for p in pairs], jnp.int32)
    sw = global_moves.score_swaps(s.hist_x, m["sm"], m["w"], m["V"], s.n_vertices, m["length"], a, b,
                                  jnp.ones(len(pairs), bool))
    base = m["loss"](v)
    for i, (ai, bi) in enumerate(pairs):
        line = np.concatenate([v[:ai + 1], v[bi:ai:-1], v[bi + 1:]])
        assert bool(sw.ok[i])
        np.testing.assert_allclose(float(sw.delta_loss[i]), m["loss"](line) - base, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(float(sw.new_len[i]), np.linalg.norm(np.diff(line, axis=0), axis=1).sum(),
                                   rtol=1e-5)
        _check_reordered(s, global_moves.swap_order(jnp.int32(ai), jnp.int32(bi), m["V"].shape[0]), line, m["P"])
    # the pairs drawn: valid, and every valid pair is drawn by some uniform
    drawn = set()
    for off in np.linspace(0, 1, 41)[:-1]:
        for u in np.linspace(0, 1, 41)[:-1]:
            pa, pb, ok = global_moves.swap_pairs(jnp.float32(off), jnp.full((nv,), u, jnp.float32), s.n_vertices, nv)
            for x, y, o in zip(np.asarray(pa), np.asarray(pb), np.asarray(ok)):
                if o:
                    assert x + 2 <= y <= nv - 2
                    drawn.add((int(x), int(y)))
    assert drawn == set(pairs)


@pytest.mark.parametrize("capped", [False, True])
def test_relocations_match_brute_force(trained, capped):
    """Every relocation (or-opt) of segments a < b < c in its three variants: its Δ(weighted
    loss) against a NumPy loop over the new line (each point's loss min(Δ, cap)), exact where no
    point's two nearest segments are both removed and never below the truth where some are; its
    length; the line and cache after its reordering against a recomputation;
    `relocation_triples` draws only valid triples and every one of them."""
    _, s, _ = trained
    m = _moves_setup(s, capped)
    nv, v, P = m["nv"], m["v"], m["P"]
    assert nv >= 6
    triples = [(a, b, c) for a in range(nv - 1) for b in range(a + 1, nv - 1) for c in range(b + 1, nv - 1)]
    a, b, c = (jnp.asarray([t[i] for t in triples], jnp.int32) for i in range(3))
    rel = global_moves.score_relocations(s.hist_x, m["sm"], jnp.float32(m["cap"]), m["w"], m["V"], s.n_vertices,
                                         m["length"], a, b, c, jnp.ones(len(triples), bool))
    base = m["loss"](v)
    two_nearest = np.argsort(np_segment_table(P, v), 1, kind="stable")[:, :2]
    n_exact = 0
    for i, (ai, bi, ci) in enumerate(triples):
        S, Q = v[ai + 1:bi + 1], v[bi + 1:ci + 1]
        lines = [np.concatenate([v[:ai + 1], Q, S, v[ci + 1:]]), np.concatenate([v[:ai + 1], Q, S[::-1], v[ci + 1:]]),
                 np.concatenate([v[:ai + 1], Q[::-1], S, v[ci + 1:]])]
        both_out = np.isin(two_nearest, [ai, bi, ci]).all(1).any()
        n_exact += not both_out
        for var, line in enumerate(lines):
            assert bool(rel.ok[var, i])
            ref = m["loss"](line) - base
            got = float(rel.delta_loss[var, i])
            if both_out:
                assert got >= ref - 1e-4 * max(1.0, abs(ref)), (ai, bi, ci, var)
            else:
                np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=str((ai, bi, ci, var)))
            np.testing.assert_allclose(float(rel.new_len[var, i]), np.linalg.norm(np.diff(line, axis=0), axis=1).sum(),
                                       rtol=1e-5)
            order = global_moves.relocation_order(jnp.int32(var), jnp.int32(ai), jnp.int32(bi), jnp.int32(ci),
                                                  m["V"].shape[0])
            _check_reordered(s, order, line, P)
    assert n_exact >= len(triples) // 3  # many triples are checked for equality
    grid = np.stack(np.meshgrid(*[np.linspace(0, 1, 21)[:-1]] * 3), -1).reshape(-1, 3).astype(np.float32)
    draw = lambda g: global_moves.relocation_triples(g[0], jnp.broadcast_to(g[1:, None], (2, nv)), s.n_vertices, nv)  # noqa: E731
    ta, tb, tc, ok = (np.asarray(o) for o in jax.vmap(draw)(jnp.asarray(grid)))
    got = np.stack([ta[ok], tb[ok], tc[ok]], 1)
    assert np.all((0 <= got[:, 0]) & (got[:, 0] < got[:, 1]) & (got[:, 1] < got[:, 2]) & (got[:, 2] <= nv - 2))
    assert set(map(tuple, got.tolist())) == set(triples)


def test_a_route_visited_in_the_wrong_order_is_swapped_into_order():
    """A line through the four legs of a route as leg 1, chord, leg 3 backwards, chord (the
    vertices p0 p1 p3 p2 p4), on the route's points: a swap puts the legs in order (a round's
    move kind is "swap" and no segment of the final line is a chord), and the cache holds every
    stored point's distances to the new segments after each round."""
    L = js.slpc(max_segments=10, history_size=256, epsilon=0.0, global_moves=None)
    route = np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 4.0], [8.0, 4.0], [8.0, 8.0]])
    xs = datasets.make_route_stream(260, vertices=route, noise=0.05, heavy_tailed=False, ordered=False,
                                    seed=1).astype(np.float32)
    s = L.init(jax.random.key(0), xs[:200])
    wrong = route[[0, 1, 3, 2, 4]]
    idx = np.round((wrong - np.asarray(s.centre)) / float(s.scale) / float(s.params.delta)).astype(np.int32)
    vidx = np.repeat(idx[-1:], s.vertex_idx.shape[0], 0)
    vidx[:len(idx)] = idx
    s = s._replace(vertex_idx=jnp.asarray(vidx), n_vertices=jnp.int32(len(idx)),
                   seg_slot=jnp.arange(s.seg_slot.shape[0], dtype=jnp.int32))
    s = s._replace(hist_D=cache.segment_table(s.hist_x, s.std_vertices, s.n_vertices))
    moves = []
    for t, x in enumerate(xs[200:]):
        s, info = _jit(L.update)(jax.random.key(t), s, x)
        moves.append(int(info.move))
        # the cache after every round, the swap's included: the point stored in the round (a new
        # row) has its distances to the swap's new segments, not those of the row's old content
        k, n = int(s.n_vertices) - 1, int(s.n_stored)
        ref = np_segment_table(np.asarray(s.hist_x[:n], np.float64), np.asarray(s.std_vertices[:k + 1], np.float64))
        np.testing.assert_allclose(s.segment_distances[:k, :n].T, ref, rtol=2e-4, atol=1e-6,
                                   err_msg=f"round {t}, moves {moves}")
    assert {pc.MOVE_SWAP, pc.MOVE_RELOCATE} & set(moves), moves
    v = np.asarray(s.vertices[: int(s.n_vertices)], np.float64)
    mids = 0.5 * (v[1:] + v[:-1])  # a chord's midpoint is far from the route
    assert np.sqrt(np_polyline_sqdist(mids, route)).max() < 0.3, v


def test_rotating_global_moves_delete_a_vertex_far_from_the_new_points():
    """global_moves=1, no exploration: a spur put on the right end of a
    curve is deleted while every new point arrives at the left end
    (so the local window never reaches it): the run of one deletion a round,
    starting at a uniform place, reaches every vertex."""
    rng = np.random.default_rng(3)
    def pts(n, hi):
        t = rng.uniform(0, hi, n)
        return np.stack([t, np.sin(0.8 * t) + 0.05 * rng.normal(size=n)], 1).astype(np.float32)

    L = js.slpc(max_segments=10, history_size=128, global_moves=1, epsilon=0.0)
    s = L.init(jax.random.key(0), pts(40, 10.0))
    s, _ = js.run_stream(L, jax.random.key(1), pts(160, 10.0), s)
    nv = int(s.n_vertices)
    assert nv >= 5
    v = np.asarray(s.vertices[:nv])
    k = int(np.argmax(v[:-1, 0] + v[1:, 0]))  # the right-most segment
    spur = 0.5 * (v[k] + v[k + 1]) + np.array([0.0, 5.0])
    spur_idx = np.round((spur - np.asarray(s.centre)) / float(s.scale) / float(s.params.delta)).astype(np.int32)
    vidx = np.asarray(s.vertex_idx)
    vidx = np.concatenate([vidx[:k + 1], spur_idx[None], vidx[k + 1:-1]])
    s = s._replace(vertex_idx=jnp.asarray(vidx), n_vertices=jnp.int32(nv + 1))
    s = s._replace(hist_D=cache.segment_table(s.hist_x, s.std_vertices, s.n_vertices),
                   seg_slot=jnp.arange(s.seg_slot.shape[0], dtype=jnp.int32))
    near_spur = lambda s: np.linalg.norm(np.asarray(s.vertices[:int(s.n_vertices)]) - spur, axis=1).min()
    assert near_spur(s) < 0.1
    s, info = js.run_stream(L, jax.random.key(2), pts(60, 1.5), s, trace="info")
    assert near_spur(s) > 3.0
    assert np.any(np.asarray(info.move) == pc.MOVE_DELETE)


def test_sorted_residuals_and_noise_level_match_a_sort(learner, init, run):
    """The incrementally sorted residual arrays equal a sort of the stored rows
    after the reservoir has replaced rows, and σ̂² equals the medians of the
    stored rows plus x_t weighted by their share of the line's length
    (`history.arc_weights`; read among the stored rows' values), computed in NumPy."""
    xs = datasets.make_cubic_stream(560, seed=9).astype(np.float32)
    s = init(jax.random.key(0), xs[:20])
    s, _ = run(jax.random.key(1), xs[20:-1], s)
    n = int(s.n_stored)
    assert n == 512
    for srt, col in ((s.sorted_e, s.hist_e), (s.sorted_r, s.hist_r)):
        np.testing.assert_array_equal(np.asarray(srt), np.sort(np.asarray(col[:n])))
    _, info = _jit(learner.update)(jax.random.key(2), s, xs[-1])
    u = (xs[-1] - np.asarray(s.centre)) / float(s.scale)
    line = np.asarray(s.std_vertices[: int(s.n_vertices)], np.float64)
    e_x = np_polyline_sqdist(u[None], line)[0]
    r_x = float(history.curve_free_residual(jnp.asarray(u), s.recent, s.n_seen, False))
    pts = np.concatenate([np.asarray(s.hist_x[:n], np.float64), u[None].astype(np.float64)])
    w = np.append(_np_row_weights(s), 1.0)
    med_e = np_arc_weighted_median(np.append(s.hist_e[:n], e_x), pts, w, line, candidates=s.hist_e[:n])
    med_r = np_arc_weighted_median(np.append(s.hist_r[:n], r_x), pts, w, line, candidates=s.hist_r[:n])
    ref = min(med_e, med_r / history.NN_INFLATION) * float(s.scale) ** 2 / chi2_lower_wh(1, history.NOISE_QUANTILE)
    np.testing.assert_allclose(float(info.sigma2), ref, rtol=1e-4)
    # the weighting matters here: the plain median differs
    plain = min(np.median(np.append(s.hist_e[:n], e_x)), np.median(np.append(s.hist_r[:n], r_x)) / 1.5)
    assert abs(plain * float(s.scale) ** 2 / chi2_lower_wh(1, history.NOISE_QUANTILE) / ref - 1) > 0.01


def test_weighted_median_matches_numpy():
    """`history.weighted_median` against a NumPy loop (16 knots evenly spaced in rank among the
    valid candidates, linear interpolation in the weight), with ties, zero weights, padding and
    all-zero weights (inf); and on a large sample it is the weighted median to within the
    knots' spacing."""
    rng = np.random.default_rng(0)
    for trial in range(30):
        m = int(rng.integers(1, 80))
        vals = np.round(rng.exponential(size=m), 1).astype(np.float32)  # ties
        wts = np.where(rng.random(m) < 0.3, 0.0, rng.random(m)).astype(np.float32)
        srt = np.concatenate([np.sort(vals), np.full(7, np.inf, np.float32)])
        got = float(history.weighted_median(jnp.asarray(srt), jnp.asarray(vals), jnp.asarray(wts), m))
        want = np_knot_median(vals, wts, srt)
        if wts.sum() == 0:
            assert got == np.inf
            continue
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=str(trial))
    # 512 values, weight 1 below their median and 3 above: against an exact sort-and-cumsum
    # weighted median (the knots are 34 sorted values apart; interpolation keeps it within 5 %).
    vals = rng.exponential(size=512).astype(np.float32)
    wts = np.where(vals > np.median(vals), 3.0, 1.0).astype(np.float32)
    got = float(history.weighted_median(jnp.asarray(np.sort(vals)), jnp.asarray(vals), jnp.asarray(wts)))
    order = np.argsort(vals)
    exact = vals[order][np.searchsorted(np.cumsum(wts[order]), 0.5 * wts.sum())]
    assert abs(got - exact) < 0.05 * exact, (got, exact)


def test_x_t_counts_with_weight_one_after_overflow(learner, init, run):
    """Moving the line to pass through x_t alone changes the objective by
    exactly x_t's own loss (weight 1), not by n/H times it."""
    xs = datasets.make_cubic_stream(600, seed=5).astype(np.float32)
    # the plain squared loss (no cap): the far x_t's loss is not capped
    s = init(jax.random.key(0), xs[:20], learner.params._replace(outlier_scale=jnp.float32(np.inf)))
    s, _ = run(jax.random.key(0), xs[20:], s)
    assert int(s.n_stored) == 512 and int(s.n_seen) == 600
    far = np.asarray(s.centre) + np.array([0.0, 20.0], np.float32)  # far off the line
    _, info, prop = _jit(pc.propose)(jax.random.key(1), s, far)
    ref = _brute_force_delta(prop, s, far.astype(np.float64))
    feas = np.asarray(prop.feasible)
    np.testing.assert_allclose(np.asarray(prop.delta_loss)[feas], ref[feas], rtol=1e-3, atol=1e-3)
    # with weight n/H on x_t the objective would differ by (n/H − 1)·Δ(f, x_t) ≫ the tolerance
    assert float(info.loss) > 1.0
    wrong = np.asarray(prop.delta_loss) + (600 / 512 - 1) * (
        np.array([np_polyline_sqdist(far[None], prop.vertices[c, : int(prop.n_vertices[c])])[0]
                  for c in range(len(feas))]) - float(info.loss))
    assert np.abs(wrong - ref)[feas].max() > 0.1


def test_prequential_loss_is_loss_before_update(learner, trained, cubic):
    _, s, _ = trained
    upd = _jit(learner.update)
    for i, x in enumerate(cubic[:5]):
        s2, info = upd(jax.random.key(i), s, x)
        np.testing.assert_allclose(info.loss, np_polyline_sqdist(x[None], s.vertices[: int(s.n_vertices)])[0],
                                   rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(learner.loss(s, x), info.loss, rtol=1e-4, atol=1e-8)
        s = s2


def test_exhaustive_ftpl_matches_numpy_reference():
    lattice = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    verts, nv = pc.enumerate_lines(lattice, 2)
    assert len(nv) == 4 * 3 + 4 * 3 * 3  # ordered, no consecutive repeats
    rng = np.random.default_rng(0)
    xs = rng.uniform(-0.2, 1.2, (30, 2))
    p, d = 2, 2
    prm = pc.default_params(delta=1.0, R=1.0, L=10.0, h_scale=0.05, eta_scale=1.0)
    ftpl = jax.jit(pc.exhaustive_ftpl, static_argnames=("max_segments", "constant_eta"))
    res = ftpl(jax.random.key(0), xs, verts, nv, prm, max_segments=p)
    c0, c1, c2, c3 = np_constants(p, d, 1.0, 1.0)
    z = np.asarray(res.z)
    losses = np.stack([np_polyline_sqdist(xs, verts[f, :nv[f]]) for f in range(len(nv))])
    lengths = np.array([np.linalg.norm(np.diff(verts[f, :nv[f]], axis=0), axis=1).sum() for f in range(len(nv))])
    h = c1 * (nv - 1) + c2 * lengths + c3
    np.testing.assert_allclose(res.penalties, h, rtol=1e-5)
    for t in range(30):
        eta = math.sqrt((c1 * p + c2 * 10.0 + c3) / (c0 * (math.e - 1) * max(t, 1)))
        obj = losses[:, :t].sum(1) + (0.05 * h - z) / eta
        assert int(res.choice[t]) == int(np.argmin(obj)), t
    res1 = ftpl(jax.random.key(0), xs, verts, nv, prm, max_segments=p, constant_eta=0.5)
    for t in (0, 10, 29):
        assert int(res1.choice[t]) == int(np.argmin(losses[:, :t].sum(1) + (0.05 * h - z) / 0.5))


def test_noise_price_stops_growth_on_a_straight_noisy_line(init, run):
    """A noisy straight line is described to the noise level by one segment:
    the curve must stay small (it is never at max_segments)."""
    rng = np.random.default_rng(3)
    t = rng.uniform(0, 10, 400)
    xs = (np.stack([t, 0.5 * t], 1) + 0.1 * rng.normal(size=(400, 2))).astype(np.float32)
    s = init(jax.random.key(0), xs[:20])
    s, info = run(jax.random.key(1), xs[20:], s)
    assert int(s.n_vertices) - 1 <= 6
    sig2 = float(info.sigma2[-1])
    # per-coordinate noise variance 0.1²
    assert 0.6 * 0.01 < sig2 < 1.6 * 0.01


def test_isolated_outliers_are_not_chased(learner, init, run, cubic):
    """Four points 4 units (2.6-3.5 from the cubic, ≈ 30 σ) off it, each alone: with the default
    loss cap (a spike to one point costs more than the cap lets it save) the curve stays on the
    cubic (every outlier stays far from it and the curve stays within a few σ of the clean
    points' curve); with the plain squared loss (outlier_scale=inf) and a cheap length price
    the curve runs out to some of them (the check has power)."""
    xs, idx = _with_outliers(cubic)
    clean = np.delete(cubic, idx, 0).astype(np.float64)
    dist = {}
    for kappa in (float(learner.params.outlier_scale), np.inf):
        prm = learner.params._replace(outlier_scale=jnp.float32(kappa))
        if not np.isfinite(kappa):
            prm = prm._replace(length_scale=jnp.float32(0.03))
        s = init(jax.random.key(0), xs[:20], prm)
        s, _ = run(jax.random.key(1), xs[20:], s)
        v = np.asarray(s.vertices[: int(s.n_vertices)], np.float64)
        dist[kappa] = np.sqrt(np_polyline_sqdist(xs[idx], v))
        if np.isfinite(kappa):
            # every vertex of the curve lies close to some clean point
            far = np.sqrt(((v[:, None] - clean[None]) ** 2).sum(-1)).min(1)
            assert far.max() < 0.5, far
    assert dist[float(learner.params.outlier_scale)].min() > 2.0, dist  # 2.6-3.5 from the cubic
    assert dist[np.inf].min() < 0.5, dist


@pytest.mark.parametrize("kind", ["noise-free", "repeated sites"])
def test_streams_without_noise_are_learned(learner, init, run, kind):
    """σ̂² = 0: points exactly on an L-shaped polygonal line, or six sites of
    a U-shaped route visited over and over. The loss cap is floored at the
    lattice resolution, so the line still follows the points — with the
    default cap and with none (outlier_scale=inf: no cap, not inf·0 = NaN).
    Without the floor the cap was 0, every candidate tied and the line froze
    at its first segment (mean loss 0.34 and 0.45)."""
    rng = np.random.default_rng(0)
    if kind == "noise-free":
        t = rng.uniform(0, 2, 260)
        xs = np.where(t[:, None] < 1, np.stack([t, 0 * t], 1), np.stack([np.ones_like(t), t - 1], 1))
    else:
        sites = np.array([[0, 0], [1, 0], [2, 0], [2, 1], [2, 2], [1, 2]], float)
        xs = sites[rng.integers(0, 6, 260)]
    xs = xs.astype(np.float32)
    for kappa in (float(learner.params.outlier_scale), np.inf):
        s = init(jax.random.key(0), xs[:20], learner.params._replace(outlier_scale=jnp.float32(kappa)))
        s, info = run(jax.random.key(1), xs[20:], s)
        assert np.isfinite(np.asarray(info.sigma2)).all() and np.isfinite(np.asarray(s.vertices)).all()
        v = np.asarray(s.vertices[: int(s.n_vertices)], np.float64)
        assert np.mean(np_polyline_sqdist(xs.astype(np.float64), v)) < 1e-3, (kappa, int(s.n_vertices))


def _transformed_runs(xs, transforms, dtype=np.float32):
    L = _default()
    prm = _as_float64(L.params) if dtype == np.float64 else L.params
    out = []
    for f in transforms:
        y = f(xs).astype(dtype)
        s = init_state(L, jax.random.key(0), y[:20], prm)
        s, info = run_chunked(L, jax.random.key(1), y[20:], s)
        out.append((s._replace(vertex_idx=np.asarray(s.vertices)), np.asarray(info.loss, np.float64)))
    return out  # vertex_idx replaced by the vertices in data units (computed in the caller's dtype mode)


def test_equivariance_exact_for_power_of_two_scales():
    xs = datasets.make_cubic_stream(160, seed=4)
    (s1, l1), (s2, l2), (s3, l3) = _transformed_runs(xs, [lambda x: x, lambda x: 8.0 * x, lambda x: x / 64.0])
    np.testing.assert_array_equal(s2.vertex_idx, 8.0 * s1.vertex_idx)
    np.testing.assert_array_equal(s3.vertex_idx, s1.vertex_idx / 64.0)
    np.testing.assert_array_equal(l2, 64.0 * l1)
    np.testing.assert_array_equal(l3, l1 / 4096.0)


def test_equivariance_under_shift_and_rotation():
    """In float64 (float32 loses the noise's low bits under a shift of 1000)."""
    xs = datasets.make_cubic_stream(160, seed=4)
    th = 0.7
    Q = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    with jax.enable_x64(True):
        (s1, l1), (s2, l2), (s3, l3) = _transformed_runs(
            xs, [lambda x: x, lambda x: x + np.array([1000.0, -300.0]), lambda x: 3.0 * x @ Q.T + 7.0], np.float64)
    # Shift: the standardised data agree to ~1e-14, the initial segments are
    # equal; a rare near-tie in a later round can still flip and send the run
    # along another, equally good path, so compare what the user sees.
    n = int(s1.n_vertices)
    assert abs(int(s2.n_vertices) - n) <= 6
    assert 0.5 < l2.sum() / l1.sum() < 2.0
    # rotation and scale: the lattice is axis-aligned, so decisions differ; the
    # learned curve must be as good (9× the loss) and as complex
    assert abs(int(s3.n_vertices) - n) <= 6
    assert 0.5 < (l3.sum() / 9.0) / l1.sum() < 2.0


def test_shift_keeps_the_initial_segment_exactly():
    xs = datasets.make_cubic_stream(40, seed=4)
    with jax.enable_x64(True):
        L = _pca()  # the paper's first-PC segment (init="pca")
        prm = _as_float64(L.params)
        a = init_state(L, jax.random.key(0), xs[:20], prm)
        b = init_state(L, jax.random.key(0), xs[:20] + np.array([1000.0, -300.0]), prm)
        assert a.centre.dtype == jnp.float64
        np.testing.assert_array_equal(a.vertex_idx, b.vertex_idx)
        np.testing.assert_allclose(np.asarray(b.vertices) - [1000.0, -300.0], a.vertices, atol=1e-9)


def test_small_p_and_the_length_bound():
    """The automatic L never makes the line infeasible (the line grows); a user
    L that the initial segment exceeds is a clear error."""
    xs = datasets.make_cubic_stream(300, seed=1).astype(np.float32)
    base = None
    for p in (1, 5):
        L = js.slpc(max_segments=p, init="pca") if p == 1 else _pca()
        assert L.config.max_segments == p
        s = init_state(L, jax.random.key(0), xs[:20])
        assert float(s.params.L) == 0.0  # automatic: resolved each round from the data (tracking.extent)
        s, info = run_chunked(L, jax.random.key(1), xs[20:], s)
        losses = info.loss
        assert 1 <= int(s.n_vertices) - 1 <= p
        if p == 5:
            # the line leaves its first segment (was 379 with p = 3 or 5; one segment: 187)
            assert float(np.sum(losses)) < 60
        base = losses
    assert base is not None
    with pytest.raises(ValueError, match="raise L"):  # (the eager init checks concrete values)
        js.slpc(**PCA_KW, L=0.01).init(jax.random.key(0), xs[:20])


def geometry_length(s):
    return js.geometry.polyline_length(s.std_vertices, s.n_vertices)


def test_same_key_same_result_and_keys_matter(learner, trained, run, cubic):
    s0, a, ia = trained
    b, ib = run(jax.random.key(1), cubic[20:], s0)
    c, ic = run(jax.random.key(2), cubic[20:], s0)
    chex.assert_trees_all_equal(a, b)
    assert not np.array_equal(np.asarray(ia.loss), np.asarray(ic.loss))


class TestUpdate(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_jit_equals_eager(self):
        """At the default capacities, from the initial line (its first rounds
        change it), on a stream the line has not seen."""
        xs = datasets.make_cubic_stream(40, seed=2).astype(np.float32)
        L = _default()
        s = _trained()[0]
        upd = self.variant(L.update)
        ref = _jit(L.update)
        for i, x in enumerate(xs[20:26]):
            s1, i1 = upd(jax.random.key(i), s, x)
            s2, i2 = ref(jax.random.key(i), s, x)
            chex.assert_trees_all_close(s1, s2, rtol=1e-5, atol=1e-6)
            chex.assert_trees_all_close(i1, i2, rtol=1e-5, atol=1e-6)
            s = s2


def test_update_traces_once_while_the_curve_grows(learner, trained, cubic):
    upd = jax.jit(chex.assert_max_traces(learner.update, n=1))
    s = trained[0]
    sizes = set()
    for i, x in enumerate(cubic[20:90]):
        s, info = upd(jax.random.key(i), s, x)
        sizes.add(int(info.n_segments))
    assert len(sizes) > 1  # the line changed size without a retrace


def test_run_streams_equals_loop_with_rare_paths_in_some_streams(learner, init, run, run_many):
    """A batch where some streams always explore (ε = 1) and others never
    (ε = 0) equals a Python loop over the streams (same decisions)."""
    xs = np.stack([datasets.make_cubic_stream(120, seed=s) for s in (1, 2, 3)]).astype(np.float32)
    keys = jax.random.split(jax.random.key(4), 3)
    eps = [0.0, 1.0, 0.05]
    # initial states one stream at a time, and by init_streams with a batch
    # of params (one ε per stream): the same states
    inits = [init(keys[i], xs[i, :20], learner.params._replace(epsilon=jnp.float32(eps[i]))) for i in range(3)]
    states = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *inits)
    batched_params = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *[s.params for s in inits])
    from_grid = js.init_streams(learner, keys, xs[:, :20], batched_params, params_batched=True)
    chex.assert_trees_all_close(from_grid, states, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(from_grid.vertex_idx, states.vertex_idx)
    fin, info = run_many(keys, xs[:, 20:], states)
    assert np.asarray(info.explore)[1].all() and not np.asarray(info.explore)[0].any()
    for i in range(3):
        s, inf1 = run(keys[i], xs[i, 20:], inits[i])
        # the same decisions; standardising x may differ in the last bit under vmap
        fi = jax.tree_util.tree_map(lambda a: a[i], fin)
        np.testing.assert_array_equal(fi.vertex_idx, s.vertex_idx)
        np.testing.assert_array_equal(np.asarray(info.move)[i], np.asarray(inf1.move))
        chex.assert_trees_all_close(fi, s, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(info.loss)[i], np.asarray(inf1.loss), rtol=1e-5, atol=1e-7)


def test_float64_mode(learner, cubic):
    """Default capacities (the programs of the float64 equivariance test)."""
    with jax.enable_x64(True):
        # 600 points: the 512-row history overflows, so reservoir replacements
        # (the cache's column written by its row gather) run in float64 too.
        x64 = datasets.make_cubic_stream(600, seed=7).astype(np.float64)
        s = init_state(learner, jax.random.key(0), x64[:20], _as_float64(learner.params))
        s, info = run_chunked(learner, jax.random.key(1), x64[20:], s)
        assert s.hist_x.dtype == jnp.float64 and info.loss.dtype == np.float64
        k, n = int(s.n_vertices) - 1, int(s.n_stored)
        assert k >= 2 and n == 512 and int(s.n_seen) == 600
        ref = np_segment_table(np.asarray(s.hist_x[:n]), np.asarray(s.std_vertices[: k + 1]))
        np.testing.assert_allclose(s.segment_distances[:k, :n].T, ref, rtol=1e-10, atol=1e-12)


def test_reservoir_gives_uniform_inclusion():
    """History of 8 rows over a 1-D stream of 40 distinct points, 1500 streams:
    every point is kept with probability 8/40 (chi-square), and the
    first 8 are not favoured."""
    T, H, B = 40, 8, 1500
    L = js.slpc(max_segments=2, history_size=H, t0=4, init="pca")
    xs = np.arange(T, dtype=np.float32)[:, None]
    keys = jax.random.split(jax.random.key(0), B)
    states = js.init_streams(L, keys, np.broadcast_to(xs[:4], (B, 4, 1)))
    fin, _ = js.run_streams(L, keys, np.broadcast_to(xs[4:], (B, T - 4, 1)), states)
    kept = np.rint(np.asarray(fin.hist_x[:, :H, 0]) * np.asarray(fin.scale)[:, None] + np.asarray(fin.centre)[:, :1])
    counts = np.bincount(kept.astype(int).ravel(), minlength=T)
    assert counts.sum() == B * H
    chi2 = ((counts - B * H / T) ** 2 / (B * H / T)).sum()
    assert chi2 < stats.chi2.ppf(0.999, T - 1)


def test_exploration_rate_and_exponential_perturbations(trained):
    """I_t ~ Bernoulli(ε) (binomial test) and the perturbations are Exp(1) (KS)."""
    _, s, _ = trained
    x = jnp.asarray(s.vertices[0])
    explore, z = [], []
    keys = jax.random.split(jax.random.key(7), 2000)
    for i in range(len(keys)):  # the shared compiled propose, round by round
        _, info, p = _jit(pc.propose)(keys[i], s, x)
        explore.append(info.explore)
        z.append(p.z)
    n_exp = int(np.asarray(explore).sum())
    assert stats.binomtest(n_exp, 2000, 0.05).pvalue > 1e-3
    z = np.asarray(z).ravel()
    assert stats.kstest(z, "expon").pvalue > 1e-3
    # power: a scaled exponential is rejected
    assert stats.kstest(1.2 * z, "expon").pvalue < 1e-6


def test_beats_the_nearest_past_point_baseline_on_the_cubic_stream(trained, cubic):
    _, s, info = trained
    losses = np.asarray(info.loss, np.float64)
    nn = np.array([((cubic[:t] - cubic[t]) ** 2).sum(1).min() for t in range(20, len(cubic))])
    assert losses.sum() < 0.8 * nn.sum()
    assert int(s.n_vertices) - 1 < 30


def test_bad_input_raises_clear_errors(learner, trained, cubic):
    with pytest.raises(ValueError, match="at least t0=20"):
        learner.init(jax.random.key(0), cubic[:10])
    bad = cubic[:20].copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        learner.init(jax.random.key(0), bad)
    with pytest.raises(ValueError, match="2-D"):
        learner.init(jax.random.key(0), cubic[0])
    with pytest.raises(ValueError, match="all equal"):
        learner.init(jax.random.key(0), np.ones((20, 2), np.float32))
    s = trained[0]
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        learner.update(jax.random.key(0), s, jnp.ones(3))
    with pytest.raises(ValueError, match="max_segments"):
        js.slpc(max_segments=0)
    with pytest.raises(ValueError, match="history_size"):
        js.slpc(history_size=10)
    with pytest.raises(TypeError, match="static capacity"):
        js.slpc(max_segments=5.0)
    with pytest.raises(ValueError, match="init must be"):
        js.slpc(init="kmeans")
    with pytest.raises(ValueError, match="penalty must be"):
        js.slpc(penalty="aic")
    with pytest.raises(ValueError, match="global_moves"):
        js.slpc(global_moves=0)
    with pytest.raises(TypeError, match="global_moves"):
        js.slpc(global_moves=2.5)
    bad = cubic[20:30].copy()
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="index 2"):
        js.run_stream(learner, jax.random.key(0), bad, s)
    assert learner.config == pc.Config() and hash(learner.config) == hash(pc.Config())
    assert js.config_record(learner.config) == dict(
        learner="slpc", max_segments=50, history_size=512, window=2, t0=20, explore_steps=3, init="fit",
        init_rounds=100, penalty="noise", global_moves=8, end_lead=8.0, drift_offset=True,
        state_layout=pc.STATE_LAYOUT)


def test_checkpoint_of_another_state_layout_is_refused(cubic, tmp_path):
    """A checkpoint saved before the distance cache became segment-major
    (config without ``state_layout``), or under another layout (3: before
    ``seg_slot``; 4: before the ring of recent points and forgetting), is refused, saying which; the
    current layout round-trips."""
    from jaxstream import checkpoint

    L = _pca()
    s = init_state(L, jax.random.key(0), cubic[:20])
    assert s.hist_D.shape == (5, 513)  # (V − 1, H + 1)
    rec = js.config_record(L.config)
    old = {k: v for k, v in rec.items() if k != "state_layout"}
    assert rec["state_layout"] == pc.STATE_LAYOUT == 5
    for i, cfg in enumerate([old] + [dict(rec, state_layout=v) for v in (1, 2, 3, 4)]):
        checkpoint.save(tmp_path / f"old{i}.ckpt", L._replace(config=cfg), s)
        with pytest.raises(checkpoint.CheckpointError, match="another learner configuration.*state_layout"):
            checkpoint.load(tmp_path / f"old{i}.ckpt", L)
    checkpoint.save(tmp_path / "new.ckpt", L, s)
    back, _ = checkpoint.load(tmp_path / "new.ckpt", L)
    chex.assert_trees_all_equal(back, s)


def test_wrapper_matches_functional_api_and_chunking(cubic):
    kw = PCA_KW  # _pca()'s configuration
    m1 = js.SLPC(seed=3, **kw)
    l1 = m1.partial_fit(cubic).last_losses_
    assert np.isnan(l1[:20]).all() and np.isfinite(l1[20:]).all()
    m2 = js.SLPC(seed=3, **kw)
    # buffered before t0, initialised with one point to learn, single points, the rest
    parts = [m2.partial_fit(cubic[:7]).last_losses_, m2.partial_fit(cubic[7:21]).last_losses_]
    parts += [[m2.learn_one(x).last_losses_[0] for x in cubic[21:24]], m2.partial_fit(cubic[24:]).last_losses_]
    l2 = np.concatenate(parts)
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    np.testing.assert_allclose(m1.vertices_, m2.vertices_)
    assert m1.n_seen_ == m2.n_seen_ == len(cubic)
    np.testing.assert_allclose(m1.cumulative_loss_, np.nansum(l1), rtol=1e-6)
    L = _pca()
    s, info = run_chunked(L, jax.random.key(3), cubic[20:], init_state(L, jax.random.key(3), cubic[:20]))
    np.testing.assert_allclose(l1[20:], info.loss, rtol=1e-6)
    proj = m1.project(cubic)  # (the shapes of score's projection: its ops compile once)
    np.testing.assert_allclose(proj["sqdist"], np_polyline_sqdist(cubic, m1.vertices_), rtol=1e-4, atol=1e-5)
    assert m1.predict(cubic).shape == (len(cubic), 2) and m1.score(cubic) > 0.99
    np.testing.assert_allclose(m1.transform(cubic)[:, 0], proj["arclength"])
    assert m1.n_segments_ == len(m1.vertices_) - 1
    with pytest.raises(ValueError, match="dimension"):
        m1.partial_fit(np.ones((3, 3)))
    with pytest.raises(RuntimeError, match="no summary yet"):
        js.SLPC().vertices_


def test_refine_with_optax_reduces_the_exact_loss():
    import optax
    rng = np.random.default_rng(0)
    truth = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    u = rng.uniform(0, 2, 300)
    pts = np.where(u[:, None] < 1, np.stack([u, u], 1), np.stack([u, 2 - u], 1)).astype(np.float32)
    start = np.array([[0.2, -0.3], [1.2, 0.6], [1.7, 0.3], [0, 0]], np.float32)  # padding row
    before = np_polyline_sqdist(pts, start[:3]).mean()
    res = jax.jit(lambda v: pc.refine(pts, v, 3, optimizer=optax.adam(2e-2), steps=300, length_weight=1e-3))(start)
    after = np_polyline_sqdist(pts, np.asarray(res.vertices[:3])).mean()
    assert after < 0.02 * before
    np.testing.assert_allclose(res.vertices[:3], truth, atol=0.05)
    np.testing.assert_array_equal(res.vertices[3], start[3])
    assert res.objective[-1] < res.objective[0] and np.all(np.isfinite(res.objective))




def test_init_is_a_few_compiled_programs_not_one_per_operation():
    """`init` runs as a few jitted programs: dispatched op by op, its first call compiled a few
    hundred programs (8 s and ~330 MiB on the 2-core CPU). A fresh configuration with init="pca"
    (no offline fit) compiles at most a handful; the same configuration again, none."""
    from _refs import backend_compiles
    xs = np.random.default_rng(0).normal(size=(30, 2)).astype(np.float32)
    L = js.slpc(max_segments=7, history_size=29, init="pca")  # a configuration no other test builds
    first = backend_compiles(lambda: L.init(jax.random.key(0), xs[:20]))
    again = backend_compiles(lambda: L.init(jax.random.key(1), xs[5:25]))
    assert 1 <= first <= 8, first
    assert again == 0, again
