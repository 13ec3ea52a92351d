"""slpc versus independent NumPy references, exact cases and invariants."""
import math

import numpy as np
import jax
import jax.numpy as jnp
import pytest


import jaxstream as js
from jaxstream import datasets
from jaxstream import principal_curves as pc


def np_polyline_sqdist(points, verts):
    """Squared distance from each point to a polyline: an explicit loop over
    segments, each clamped projection written out (NumPy, float64)."""
    points = np.asarray(points, np.float64)
    verts = np.asarray(verts, np.float64)
    best = np.full(len(points), np.inf)
    for a, b in zip(verts[:-1], verts[1:]):
        ab = b - a
        den = ab @ ab
        t = np.zeros(len(points)) if den == 0 else np.clip((points - a) @ ab / den, 0.0, 1.0)
        best = np.minimum(best, (((a + t[:, None] * ab) - points) ** 2).sum(1))
    return best


def np_constants(p, d, delta, R):
    vd = math.pi ** (d / 2) / math.gamma(d / 2 + 1)
    c1 = math.log(8 * p * math.e * vd) + 3 * d ** 1.5 - d
    c2 = math.log(2) / (math.sqrt(d) * delta) + d / delta
    c3 = d * math.log(math.sqrt(d) * (2 * R + delta) / delta)
    c0 = d * (2 * R + delta) ** 2
    return c0, c1, c2, c3


@pytest.fixture(scope="module")
def cubic():
    return datasets.make_cubic_stream(260, seed=7).astype(np.float32)


@pytest.fixture(scope="module")
def learner():
    return js.slpc()


@pytest.fixture(scope="module")
def run(learner):
    return jax.jit(lambda k, xs, s: js.run_stream(learner, k, xs, s, trace="info"))


@pytest.fixture(scope="module")
def run_many(learner):
    return jax.jit(lambda k, xs, s: js.run_streams(learner, k, xs, s, trace="info"))


@pytest.fixture(scope="module")
def upd(learner):
    return jax.jit(learner.update)


def test_penalty_and_learning_rate_formulas():
    for p, d, delta, R in [(50, 2, 0.1, 7.0), (10, 3, 0.5, 2.0), (5, 1, 1.0, 1.0)]:
        prm = pc.default_params(delta=delta, R=R, L=0.1 * p * d * R, h_scale=1.0, eta_scale=1.0)
        c0, c1, c2, c3 = np_constants(p, d, delta, R)
        c = pc.theoretical_constants(p, d, prm.delta, prm.R)
        np.testing.assert_allclose([c.c0, c.c1, c.c2, c.c3], [c0, c1, c2, c3], rtol=1e-5)
        np.testing.assert_allclose(pc.penalty(3.0, 2.5, p, d, prm), c1 * 3 + c2 * 2.5 + c3, rtol=1e-5)
        Lmax = 0.1 * p * d * R
        for t in (1, 10, 1000):
            eta = math.sqrt((c1 * p + c2 * Lmax + c3) / (c0 * (math.e - 1) * t))
            np.testing.assert_allclose(pc.learning_rate(t, p, d, prm), eta, rtol=1e-5)


def test_init_is_first_principal_component_segment():
    rng = np.random.default_rng(0)
    t = rng.uniform(-3, 3, 40)
    x = np.stack([1 + 2 * t, -1 + t], 1) + 0.01 * rng.normal(size=(40, 2))
    L = js.slpc(delta=0.25)
    s = L.init(jax.random.key(0), x)
    v = np.asarray(s.vertices[:2])
    assert int(s.n_vertices) == 2
    np.testing.assert_allclose(v, np.round(v / 0.25) * 0.25, atol=1e-6)  # on the lattice
    direction = (v[1] - v[0]) / np.linalg.norm(v[1] - v[0])
    assert abs(abs(direction @ np.array([2, 1]) / np.sqrt(5)) - 1) < 1e-3
    ends = sorted([x[np.argmin(t)], x[np.argmax(t)]], key=lambda e: e[0])
    got = sorted(list(v), key=lambda e: e[0])
    np.testing.assert_allclose(got, ends, atol=0.25)
    np.testing.assert_allclose(s.hist_d[:40], np_polyline_sqdist(x, v), rtol=1e-4, atol=1e-5)
    assert int(s.n_stored) == 40 and int(s.n_seen) == 40


def test_candidate_losses_match_brute_force(cubic):
    cfg = pc.Config(max_segments=50, history_size=120, max_affected=240, window=3)
    L = js.slpc(history_size=120, max_affected=240, window=3, epsilon=0.3)
    s = L.init(jax.random.key(0), cubic[:20])
    s, _ = js.run_stream(L, jax.random.key(1), cubic[20:150], s)
    prop = jax.jit(lambda k, s, x: pc.propose(k, s, x, cfg))
    n_checked = 0
    for i in range(150, 175):
        new, info, P = prop(jax.random.key(i), s, jnp.asarray(cubic[i]))
        n = int(new.n_stored)
        hist = np.asarray(new.hist_x[:n], np.float64)  # x_t is already stored (or sampled out)
        w = int(new.n_seen) / n
        v0 = np.asarray(s.vertices[: int(s.n_vertices)], np.float64)
        base = np_polyline_sqdist(hist, v0).sum()
        assert bool(P.feasible[0]) and int(P.n_vertices[0]) == int(s.n_vertices)
        np.testing.assert_allclose(P.vertices[0][: int(s.n_vertices)], v0, atol=1e-6)
        for c in np.flatnonzero(np.asarray(P.feasible)):
            vc = np.asarray(P.vertices[c][: int(P.n_vertices[c])], np.float64)
            bf = w * (np_polyline_sqdist(hist, vc).sum() - base)
            np.testing.assert_allclose(float(P.delta_loss[c]), bf, rtol=1e-4, atol=2e-4 * w)
            n_checked += 1
        # the winner minimises the objective among feasible candidates and becomes the state
        obj = np.where(np.asarray(P.feasible), np.asarray(P.objective), np.inf)
        assert int(P.winner) == int(np.argmin(obj))
        np.testing.assert_allclose(new.vertices[: int(new.n_vertices)],
                                   P.vertices[int(P.winner)][: int(new.n_vertices)])
        assert int(new.n_vertices) - 1 == int(info.n_segments)
        s = new
    assert n_checked > 200  # the candidate set is rich: moves, insertions, deletions


def test_history_bookkeeping_exact_after_a_stream(learner, run, cubic):
    s0 = learner.init(jax.random.key(0), cubic[:20])
    s, info = run(jax.random.key(1), cubic[20:], s0)
    n = int(s.n_stored)
    verts = np.asarray(s.vertices[: int(s.n_vertices)])
    np.testing.assert_allclose(s.hist_d[:n], np_polyline_sqdist(np.asarray(s.hist_x[:n]), verts), rtol=1e-4, atol=1e-5)
    # the stored segment and parameter realise the stored distance (ties between segments allowed)
    seg, tt = np.asarray(s.hist_seg[:n]), np.asarray(s.hist_t[:n])
    q = verts[seg] + tt[:, None] * (verts[seg + 1] - verts[seg])
    np.testing.assert_allclose(((np.asarray(s.hist_x[:n]) - q) ** 2).sum(1), s.hist_d[:n], rtol=1e-3, atol=1e-5)
    # vertices stay on the lattice, counts within capacity
    delta = float(s.params.delta)
    np.testing.assert_allclose(verts / delta, np.round(verts / delta), atol=1e-3)
    assert 1 <= int(s.n_vertices) - 1 <= 50


def test_prequential_loss_is_loss_before_update(learner, upd, cubic):
    s = learner.init(jax.random.key(0), cubic[:20])
    for i in range(20, 40):
        x = jnp.asarray(cubic[i])
        expected = float(learner.loss(s, x))
        np.testing.assert_allclose(expected, np_polyline_sqdist(cubic[i:i + 1], np.asarray(s.vertices[: int(s.n_vertices)]))[0], rtol=1e-4, atol=1e-6)
        s, info = upd(jax.random.key(i), s, x)
        np.testing.assert_allclose(float(info.loss), expected, rtol=1e-5)


def test_exhaustive_ftpl_matches_numpy_reference():
    lattice = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    verts, nv = pc.enumerate_lines(lattice, 2)
    assert len(nv) == 4 * 3 + 4 * 3 * 3  # ordered, no consecutive repeats
    rng = np.random.default_rng(0)
    xs = rng.uniform(-0.2, 1.2, (30, 2))
    p, d = 2, 2
    prm = pc.default_params(delta=1.0, R=1.0, L=10.0, h_scale=0.05, eta_scale=1.0)
    res = pc.exhaustive_ftpl(jax.random.key(0), xs, verts, nv, prm, max_segments=p)
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
        np.testing.assert_allclose(res.losses[t], losses[np.argmin(obj), t], rtol=1e-5, atol=1e-7)
    # Algorithm 1: constant eta
    res1 = pc.exhaustive_ftpl(jax.random.key(0), xs, verts, nv, prm, max_segments=p, constant_eta=0.5)
    for t in (0, 10, 29):
        obj = losses[:, :t].sum(1) + (0.05 * h - z) / 0.5
        assert int(res1.choice[t]) == int(np.argmin(obj))


def test_local_search_reaches_the_exhaustive_leader_on_a_tiny_lattice():
    """On a 3x3 lattice with p = 2, the local search finds the global leader."""
    rng = np.random.default_rng(1)
    n = 160
    u = rng.uniform(0, 2, n)
    arm = rng.integers(0, 2, n)
    pts = np.where(arm[:, None] == 0, np.stack([u, np.zeros(n)], 1), np.stack([np.full(n, 2.0), u], 1))
    pts = (pts + 0.03 * rng.normal(size=pts.shape)).astype(np.float32)
    kw = dict(delta=1.0, R=2.0, L=20.0, h_scale=1e-3, eta_scale=1.0, z_scale=0.0, epsilon=0.0)
    L = js.slpc(max_segments=2, history_size=256, **kw)
    s = L.init(jax.random.key(0), pts[:20])
    s, _ = js.run_stream(L, jax.random.key(1), pts[20:], s)
    grid = np.array([[i, j] for i in range(3) for j in range(3)], float)
    verts, nv = pc.enumerate_lines(grid, 2)
    prm = s.params
    h = np.asarray(pc.penalty((nv - 1).astype(np.float32), js.geometry.polyline_length(jnp.asarray(verts, jnp.float32), nv), 2, 2, prm))
    eta = float(pc.learning_rate(n, 2, 2, prm))
    obj_all = np.stack([np_polyline_sqdist(pts, verts[f, :nv[f]]).sum() for f in range(len(nv))]) + 1e-3 * h / eta
    v_local = np.asarray(s.vertices[: int(s.n_vertices)])
    h_local = float(pc.penalty(float(int(s.n_vertices) - 1), js.geometry.polyline_length(s.vertices, s.n_vertices), 2, 2, prm))
    obj_local = np_polyline_sqdist(pts, v_local).sum() + 1e-3 * h_local / eta
    np.testing.assert_allclose(obj_local, obj_all.min(), rtol=1e-4)
    best = verts[np.argmin(obj_all), : nv[np.argmin(obj_all)]]
    assert {tuple(r) for r in best} == {(0.0, 0.0), (2.0, 0.0), (2.0, 2.0)}
    assert {tuple(np.round(r, 4)) for r in v_local} == {tuple(r) for r in best}


def test_same_key_same_result_and_keys_matter(learner, run, cubic):
    s0 = learner.init(jax.random.key(0), cubic[:20])
    a, ia = run(jax.random.key(5), cubic[20:], s0)
    b, ib = run(jax.random.key(5), cubic[20:], s0)
    c, ic = run(jax.random.key(6), cubic[20:], s0)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(np.asarray(ia.loss), np.asarray(ic.loss))


def test_jit_equals_eager(learner, upd, cubic):
    s = learner.init(jax.random.key(0), cubic[:20])
    se = sj = s
    for i in range(20, 22):
        k = jax.random.key(i)
        se, ie = learner.update(k, se, jnp.asarray(cubic[i]))
        sj, ij = upd(k, sj, jnp.asarray(cubic[i]))
        np.testing.assert_allclose(se.vertices, sj.vertices, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(se.hist_d, sj.hist_d, rtol=1e-4, atol=1e-6)
        assert int(ie.move) == int(ij.move)


def test_update_traces_once_while_the_curve_grows(cubic):
    base = js.slpc()
    count = [0]

    def counting_update(key, state, x):
        count[0] += 1
        return base.update(key, state, x)

    L = base._replace(update=counting_update)
    run = jax.jit(lambda k, xs, s: js.run_stream(L, k, xs, s, trace="info"))
    s0 = L.init(jax.random.key(0), cubic[:20])
    s, info = run(jax.random.key(1), cubic[20:], s0)
    assert int(s.n_vertices) > 3  # the summary grew
    run(jax.random.key(2), cubic[::-1][20:], s)  # new data, same shapes
    assert count[0] == 1


def test_run_streams_equals_python_loop(learner, run, run_many):
    B = 3
    keys = jax.random.split(jax.random.key(0), B)
    xs = np.stack([datasets.make_cubic_stream(260, seed=s) for s in range(B)]).astype(np.float32)
    states = js.init_streams(learner, keys, xs[:, :20])
    fin, info = run_many(keys, xs[:, 20:], states)
    for b in range(B):
        s, i = run(keys[b], xs[b, 20:], learner.init(keys[b], xs[b, :20]))
        np.testing.assert_allclose(info.loss[b], i.loss, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(info.move[b], i.move)
        np.testing.assert_array_equal(fin.vertex_idx[b], s.vertex_idx)


def test_params_grid_through_init_streams(learner, run_many, cubic):
    """A grid of penalties vmapped as params: a stronger penalty gives fewer segments."""
    B = 3
    keys = jnp.stack([jax.random.key(0)] * B)
    params = jax.tree_util.tree_map(lambda v: jnp.stack([v] * B), learner.params)
    params = params._replace(h_scale=jnp.array([1e-4, 1e-2, 1.0]))
    states = js.init_streams(learner, keys, cubic[:20], params, params_batched=True, x_init_batched=False)
    xs = np.stack([cubic[20:]] * B)
    fin, _ = run_many(keys, xs, states)
    nseg = np.asarray(fin.n_vertices) - 1
    assert nseg[0] >= nseg[1] >= nseg[2] and nseg[0] > nseg[2]


def test_float64_mode(cubic):
    with jax.enable_x64(True):
        L = js.slpc()
        s = L.init(jax.random.key(0), cubic[:20].astype(np.float64))
        assert s.vertices.dtype == jnp.float64 and s.params.delta.dtype == jnp.float64
        s, losses = js.run_stream(L, jax.random.key(1), cubic[20:80].astype(np.float64), s)
        assert losses.dtype == jnp.float64
        n = int(s.n_stored)
        np.testing.assert_allclose(s.hist_d[:n], np_polyline_sqdist(np.asarray(s.hist_x[:n]),
                                   np.asarray(s.vertices[: int(s.n_vertices)])), rtol=1e-10, atol=1e-12)


def test_history_overflow_is_a_reservoir_with_exact_bookkeeping(cubic):
    L = js.slpc(history_size=40)
    s = L.init(jax.random.key(0), cubic[:20])
    s, info = js.run_stream(L, jax.random.key(1), cubic[20:], s)
    assert int(s.n_stored) == 40 and int(s.n_seen) == len(cubic)
    hist = np.asarray(s.hist_x)
    assert all(np.any(np.all(np.isclose(cubic, h), axis=1)) for h in hist)  # stored rows come from the stream
    assert len({tuple(h) for h in hist}) == 40
    np.testing.assert_allclose(s.hist_d, np_polyline_sqdist(hist, np.asarray(s.vertices[: int(s.n_vertices)])),
                               rtol=1e-4, atol=1e-5)


def test_reservoir_slot_gives_uniform_inclusion():
    n_items, cap, runs = 50, 10, 4000

    def one(key):
        def step(carry, t):
            buf, n_stored = carry
            slot, store = pc.reservoir_slot(jax.random.fold_in(key, t), n_stored, t + 1, cap)
            buf = buf.at[slot].set(jnp.where(store, t, buf[slot]))
            return (buf, jnp.minimum(n_stored + 1, cap)), None
        (buf, _), _ = jax.lax.scan(step, (jnp.full((cap,), -1), 0), jnp.arange(n_items))
        return buf

    bufs = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), runs)))
    assert (bufs >= 0).all() and all(len(set(b)) == cap for b in bufs[:50])
    freq = np.bincount(bufs.ravel(), minlength=n_items) / runs
    sd = math.sqrt(0.2 * 0.8 / runs)
    assert np.all(np.abs(freq - cap / n_items) < 5 * sd), freq


def test_truncation_is_reported_and_bookkeeping_stays_exact(cubic):
    L = js.slpc(max_affected=8)
    s = L.init(jax.random.key(0), cubic[:20])
    s, info = js.run_stream(L, jax.random.key(1), cubic[20:150], s, trace="info")
    n = int(s.n_stored)
    np.testing.assert_allclose(s.hist_d[:n], np_polyline_sqdist(np.asarray(s.hist_x[:n]),
                               np.asarray(s.vertices[: int(s.n_vertices)])), rtol=1e-4, atol=1e-5)
    trunc, naff = np.asarray(info.truncated), np.asarray(info.n_affected)
    assert trunc.any()
    assert np.all(trunc[naff > 8]) and not np.any(trunc[naff <= 4])  # 4 slots in + 4 out


def test_quality_on_the_cubic_stream(learner, run, cubic):
    s0 = learner.init(jax.random.key(0), cubic[:20])
    s, info = run(jax.random.key(1), cubic[20:], s0)
    res = np_polyline_sqdist(cubic, np.asarray(s.vertices[: int(s.n_vertices)])).sum()
    r2 = 1 - res / ((cubic - cubic.mean(0)) ** 2).sum()
    assert r2 > 0.999
    assert float(info.loss[-100:].mean()) < 0.05  # truth: 0.094² ≈ 0.009 per point


def test_bad_input_raises_clear_errors(learner, cubic):
    with pytest.raises(ValueError, match="at least t0=20"):
        learner.init(jax.random.key(0), cubic[:10])
    with pytest.raises(ValueError, match="NaN or inf"):
        bad = cubic[:20].copy(); bad[3, 0] = np.nan
        learner.init(jax.random.key(0), bad)
    with pytest.raises(ValueError, match="2-D"):
        learner.init(jax.random.key(0), cubic[0])
    s = learner.init(jax.random.key(0), cubic[:20])
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        learner.update(jax.random.key(0), s, jnp.ones(3))
    with pytest.raises(ValueError, match="max_segments"):
        js.slpc(max_segments=0)
    with pytest.raises(ValueError, match="history_size"):
        js.slpc(history_size=10)  # cannot hold t0 = 20 initial points
    with pytest.raises(TypeError, match="static capacity"):
        js.slpc(max_segments=5.0)
    with pytest.raises(ValueError, match="index 2"):
        bad = cubic[20:30].copy(); bad[2, 1] = np.inf
        js.run_stream(learner, jax.random.key(0), bad, s)


def test_wrapper_matches_functional_api_and_chunking(cubic):
    m1 = js.SLPC(seed=3)
    l1 = m1.partial_fit(cubic)
    assert np.isnan(l1[:20]).all() and np.isfinite(l1[20:]).all()
    m2 = js.SLPC(seed=3)
    l2 = np.concatenate([m2.partial_fit(cubic[:7]), m2.partial_fit(cubic[7:100]),
                         [m2.learn_one(x) for x in cubic[100:103]], m2.partial_fit(cubic[103:])])
    np.testing.assert_allclose(l1, l2, rtol=1e-6)
    np.testing.assert_allclose(m1.vertices, m2.vertices)
    L = js.slpc()
    s, l3 = js.run_stream(L, jax.random.key(3), cubic[20:], L.init(jax.random.key(3), cubic[:20]))
    np.testing.assert_allclose(l1[20:], l3, rtol=1e-6)
    proj = m1.project(cubic[:5])
    np.testing.assert_allclose(proj["sqdist"], np_polyline_sqdist(cubic[:5], m1.vertices), rtol=1e-4, atol=1e-6)
    assert m1.predict(cubic[:5]).shape == (5, 2) and m1.score(cubic) > 0.99
    assert m1.n_segments == len(m1.vertices) - 1
    with pytest.raises(ValueError, match="dimension"):
        m1.partial_fit(np.ones((3, 3)))
    with pytest.raises(RuntimeError, match="not initialised"):
        js.SLPC().vertices


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
    np.testing.assert_array_equal(res.vertices[3], start[3])  # inactive vertices untouched
    assert res.objective[-1] < res.objective[0] and np.all(np.isfinite(res.objective))
