"""Online landmark replacement and landmark MDS versus slow NumPy references."""
import math

import chex
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import enable_x64

import jaxstream
from jaxstream import datasets
from jaxstream import embedding as LM
from jaxstream import _batching, _wrapper
from jaxstream.embedding import replacement
from jaxstream.embedding.types import make_config
from jaxstream.embedding import baselines as BL


# ---------------------------------------------------------------------------
# Slow references
# ---------------------------------------------------------------------------

def ref_lmds(L, X, k):
    """Textbook landmark MDS (de Silva & Tenenbaum) in float64 NumPy."""
    L = np.asarray(L, np.float64)
    X = np.asarray(X, np.float64)
    n = len(L)
    Dn = ((L[:, None] - L[None]) ** 2).sum(-1)
    H = np.eye(n) - np.ones((n, n)) / n
    B = -0.5 * H @ Dn @ H
    lam, V = np.linalg.eigh(B)
    lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    coords = V * np.sqrt(lam)
    Lsharp = (V / np.sqrt(lam)).T
    mu = Dn.mean(axis=0)
    dx = ((X[:, None] - L[None]) ** 2).sum(-1)
    Y = np.array([-0.5 * Lsharp @ (d - mu) for d in dx])
    return Y, coords


def ref_stress(D, Y):
    num = den = 0.0
    n = len(D)
    for i in range(n):
        for j in range(i + 1, n):
            e = math.sqrt(sum((Y[i, c] - Y[j, c]) ** 2 for c in range(Y.shape[1])))
            num += (D[i, j] - e) ** 2
            den += D[i, j] ** 2
    return math.sqrt(num / den)


class RefOnline:
    """Loop-based online landmark replacement over item ids 0, 1, 2, ... (arrival order).

    Explicit graph, coverage and private-neighbour sets; ε grows edge by edge
    through the sorted distinct pair distances of the buffered points, as in
    the paper; the buffer evicts its oldest non-landmark item when full.
    """

    def __init__(self, D, n_L, buffer_size, eps0=0.0, min_support=0, density_shift=0.0):
        self.D, self.n_L, self.N, self.eps = D, n_L, buffer_size, eps0
        self.min_support, self.density_shift = min_support, density_shift
        self.buf, self.L = [], []

    def closed(self, v):
        return {w for w in self.buf if w == v or self.D[v, w] <= self.eps}

    def private(self, u):
        others = [w for w in self.L if w != u]
        return [v for v in self.closed(u) if not any(v in self.closed(w) for w in others)]

    def dominated(self):
        return all(any(v in self.closed(l) for l in self.L) for v in self.buf)

    def arrive(self, x):
        D = self.D
        covered = any(D[x, l] <= self.eps for l in self.L)
        evicted = -1
        if len(self.buf) == self.N:
            evicted = next(v for v in self.buf if v not in self.L)
            self.buf.remove(evicted)
        self.buf.append(x)
        if covered:
            return dict(case=1, added=-1, removed=-1, evicted=evicted)
        if len(self.L) < self.n_L:
            self.L.append(x)
            return dict(case=2, added=x, removed=-1, evicted=evicted)
        deg = {v: sum(1 for w in self.buf if w != v and D[v, w] <= self.eps) for v in self.buf}
        E = sum(deg.values()) // 2
        if deg[x] <= 2 * math.sqrt(E):
            new = x
        else:
            nbrs = [w for w in self.buf if w != x and D[x, w] <= self.eps]
            new = min(nbrs, key=lambda w: (deg[w], w))
            assert deg[new] <= math.sqrt(E)
        self.L.append(new)
        pair_d = sorted({D[v, w] for a, v in enumerate(self.buf) for w in self.buf[a + 1:] if D[v, w] > self.eps})
        for e in [self.eps] + pair_d:
            self.eps = e
            redundant = [u for u in self.L if not self.private(u)]
            if redundant:
                rm = min(redundant)  # the earliest arrival
                support = {u: sum(1 for w in self.buf if w != u and D[u, w] <= e) for u in self.L}
                typical = float(np.median(list(support.values())))
                weak = [u for u in self.L if support[u] < self.min_support and support[u] < 0.25 * typical]
                if weak:  # min_support: the least supported landmark goes, ties the earliest
                    rm = min(weak, key=lambda u: (support[u], u))
                if self.density_shift > 0 and rm != new:
                    # density_shift: the kept new landmark moves to the densest buffered point within r of it
                    r = self.density_shift * e
                    near = [v for v in self.buf if D[new, v] <= r]
                    count = {v: sum(1 for w in self.buf if D[v, w] <= r) for v in near}
                    best = min(near, key=lambda v: (-count[v], v))
                    if best not in self.L:
                        self.L[self.L.index(new)] = best
                        new = best
                self.L.remove(rm)
                return dict(case=3, added=new, removed=rm, evicted=evicted)
        raise AssertionError("no landmark became redundant")


_RUNNERS = {}


def runner(lrn, trace="loss"):
    """A jitted run_stream per learner configuration (learners with equal
    configurations share `update`), so that tests do not recompile."""
    key = (lrn.update, trace)
    if key not in _RUNNERS:
        _RUNNERS[key] = jax.jit(lambda k, xs, s, m=None: jaxstream.run_stream(lrn, k, xs, s, mask=m, trace=trace,
                                                                              nonfinite="skip"))
    return _RUNNERS[key]


def runner_many(lrn):
    key = (lrn.update, "many")
    if key not in _RUNNERS:
        _RUNNERS[key] = jax.jit(lambda k, xs, s: jaxstream.run_streams(lrn, k, xs, s))
    return _RUNNERS[key]


# One float32 configuration shared by several tests (with 41-point streams) so
# that they share compiled code.
def lrn5():
    return LM.landmark_mds(5, n_components=2, buffer_size=20)


def stream41(seed):
    return clustered_stream(seed, 41).astype(np.float32)


def euclid(X):
    X = np.asarray(X, np.float64)
    return np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))


def state_landmarks(state):
    return sorted(np.asarray(state.arrival)[np.asarray(state.is_landmark)].tolist())


def clustered_stream(seed, n, d=2):
    """Points that drift through clusters, so that all three cases occur."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-3, 3, (6, d))
    lab = np.sort(rng.integers(0, 6, n)) if seed % 2 else rng.integers(0, 6, n)
    return centres[lab] + 0.6 * rng.standard_normal((n, d))


# ---------------------------------------------------------------------------
# Landmark MDS
# ---------------------------------------------------------------------------

def test_lmds_exact_for_cloud_in_r3():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3)) * np.array([3.0, 2.0, 1.0])
    idx = np.arange(0, 200, 10)
    with enable_x64():
        Y, coords = LM.lmds_embed(X[idx], X, 3)
        D = euclid(X)
        assert float(LM.normalized_stress(D, Y)) < 1e-10
        assert float(LM.landmark_stress(D, Y, idx)) < 1e-10
        # landmarks map onto their own MDS coordinates
        np.testing.assert_allclose(np.asarray(Y)[idx], np.asarray(coords), atol=1e-10)
    Y32, _ = LM.lmds_embed(X[idx].astype(np.float32), X.astype(np.float32), 3)
    assert float(LM.normalized_stress(D, Y32)) < 1e-5


def test_lmds_vs_numpy_reference():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 5))
    idx = np.arange(12)
    Yr, Cr = ref_lmds(X[idx], X, 2)
    with enable_x64():
        Y, C = LM.lmds_embed(X[idx], X, 2)
        Y, C = np.asarray(Y), np.asarray(C)
    signs = np.sign((Y * Yr).sum(0))  # eigenvectors are defined up to sign
    np.testing.assert_allclose(Y * signs, Yr, atol=1e-9)
    np.testing.assert_allclose(C * signs, Cr, atol=1e-9)
    np.testing.assert_allclose(Y[idx], C, atol=1e-9)


def test_weighted_lmds_equals_lmds_of_repeated_landmarks():
    """Integer weights w: the weighted fit equals the plain landmark MDS of a landmark set in which landmark
    i is repeated w_i times (an exact, independent construction), compared through pairwise distances of
    embedded points (eigenvectors are defined up to sign); all-one weights give the unweighted fit (to
    rounding), weight 0 equals a mask, and unequal weights move the embedding (power)."""
    rng = np.random.default_rng(7)
    L = rng.standard_normal((6, 3)) * np.array([3.0, 1.0, 0.5])
    X = rng.standard_normal((25, 3)) * 2
    w = np.array([1, 4, 2, 7, 1, 3])
    with enable_x64():
        sqL = euclid(L) ** 2
        sqX = euclid(np.concatenate([X, L]))[:25, 25:] ** 2
        mw = LM.lmds_fit(sqL, 2, weights=w)
        Yw = np.asarray(LM.lmds_transform(mw, sqX))
        R = np.repeat(np.arange(6), w)
        mr = LM.lmds_fit(sqL[np.ix_(R, R)], 2)
        Yr = np.asarray(LM.lmds_transform(mr, sqX[:, R]))
        np.testing.assert_allclose(_pairwise(Yw), _pairwise(Yr), atol=1e-9)
        np.testing.assert_allclose(_pairwise(mw.coords), _pairwise(np.asarray(mr.coords)[np.searchsorted(R, np.arange(6))]),
                                   atol=1e-9)
        np.testing.assert_allclose(np.asarray(mw.eigvals) * len(R) / 6, np.asarray(mr.eigvals), rtol=1e-9)
        # landmarks map to their own coordinates
        np.testing.assert_allclose(np.asarray(LM.lmds_transform(mw, sqL)), np.asarray(mw.coords), atol=1e-9)
        m1, m0 = LM.lmds_fit(sqL, 2, weights=np.ones(6)), LM.lmds_fit(sqL, 2)
        chex.assert_trees_all_close(m1, m0, atol=1e-12, rtol=1e-12)
        mask = np.array([True, True, False, True, True, True])
        chex.assert_trees_all_close(LM.lmds_fit(sqL, 2, weights=np.where(mask, w, 0)),
                                    LM.lmds_fit(sqL, 2, mask=mask, weights=w), atol=1e-12)
        assert np.abs(_pairwise(Yw) - _pairwise(np.asarray(LM.lmds_transform(m0, sqX)))).max() > 0.1
    for bad in (np.ones(5), np.ones((6, 1))):
        with pytest.raises(ValueError, match="shape"):
            LM.lmds_fit(euclid(L) ** 2, 2, weights=bad)
    with enable_x64():  # the documented policy: a negative or NaN weight drops the landmark, like weight 0
        for v in (-1.0, np.nan):
            chex.assert_trees_all_close(LM.lmds_fit(sqL, 2, weights=np.where(mask, w, v)),
                                        LM.lmds_fit(sqL, 2, weights=np.where(mask, w, 0)), atol=1e-12)


def test_landmark_weights_counts_nearest_landmarks_vs_numpy():
    X = stream41(26)
    lrn = lrn5()
    s, _ = runner(lrn)(jax.random.key(0), X[1:], lrn.init(jax.random.key(0), X[:1]))
    weights = jax.jit(LM.landmark_weights)  # jitted: op by op, these small functions cost seconds
    wembed = jax.jit(lambda st: LM.embedding(st, n_components=2, weighted=True))
    w = np.asarray(weights(s))
    slots, mask = np.asarray(s.landmark_slots), np.asarray(s.landmark_slots) >= 0
    valid = np.asarray(s.valid)
    P = np.asarray(s.points, np.float64)
    d = np.sqrt(((P[valid][:, None] - P[slots[mask]][None]) ** 2).sum(-1))
    want = np.bincount(np.argmin(d, 1), minlength=mask.sum())
    np.testing.assert_array_equal(w[mask], want)
    assert w.sum() == valid.sum() and len(set(want.tolist())) > 1
    e = wembed(s)
    chex.assert_trees_all_close(e.coords, LM.lmds_fit(euclid(P[slots[mask]]) ** 2, 2, weights=want).coords,
                                atol=1e-4)
    # coincident landmarks (as density_shift can make): each copy counts itself, uncached and cached
    a, b = slots[0], int(np.flatnonzero(valid & ~np.asarray(s.is_landmark))[0])
    pts = s.points.at[b].set(s.points[a])
    d = s._replace(points=pts, is_landmark=s.is_landmark.at[slots[1]].set(False).at[b].set(True),
                   landmark_slots=s.landmark_slots.at[1].set(b))
    Pd = np.asarray(pts, np.float64)
    Dd = np.where(valid[:, None] & valid[None], euclid(Pd), np.inf)
    ls = np.asarray(d.landmark_slots)
    own = np.argmin(Dd[ls], axis=0)  # first position on ties...
    own[ls] = np.arange(len(ls))     # ...but every landmark owns its own slot
    want_d = np.bincount(own[valid], minlength=len(ls))
    assert want_d[0] >= 1 and want_d[1] >= 1  # the second copy is not left with weight 0
    for dd in (d, d._replace(dist=jnp.asarray(np.where(np.isfinite(Dd), Dd, 0.0), jnp.float32))):
        np.testing.assert_array_equal(np.asarray(weights(dd)), want_d)
        e = wembed(dd)
        assert bool(e.mask.all())
        np.testing.assert_allclose(np.asarray(e.coords[0]), np.asarray(e.coords[1]), atol=1e-4)  # coincide


def _ref_weights(P, valid, ls):
    """NumPy nearest-landmark counts (ties: first position; a landmark owns its own slot)."""
    D = np.where(valid[:, None] & valid[None], euclid(P), np.inf)
    own = np.argmin(D[ls], axis=0)
    own[ls] = np.arange(len(ls))
    return np.bincount(own[valid], minlength=len(ls))


def test_weighted_learner_predict_info_y_and_align_vs_repeated_landmarks():
    """landmark_mds(weighted=True): the tracked (aligned) embedding, refreshed at each change of the
    landmark set, is an isometry of the plain landmark MDS (NumPy) of the landmarks repeated w_i times, w
    the NumPy nearest-landmark counts of that moment; Info.y of every arrival equals predict; an untracked
    weighted learner's predict equals the repeated-landmark reference (up to sign); power: the weighted
    and plain embeddings differ."""
    X = clustered_stream(27, 41, d=3)  # in 3-D: weighting changes a 2-D MDS
    with enable_x64():
        lrn = LM.landmark_mds(5, n_components=2, buffer_size=20, align=True, weighted=True)
        assert lrn.config.weighted is True
        step, predict = jax.jit(lrn.update), jax.jit(lrn.predict)
        s = lrn.init(jax.random.key(0), X[:1])
        n_checked = 0
        for t in range(1, 41):
            s, info = step(jax.random.key(t), s, jnp.asarray(X[t]))
            np.testing.assert_allclose(np.asarray(info.y), np.asarray(predict(s, X[t])), atol=1e-9)
            if int(info.n_landmarks) == 5 and (bool(info.replaced) or int(info.case) == 2):
                P, valid = np.asarray(s.points), np.asarray(s.valid)
                ls = np.asarray(s.landmark_slots)
                w = _ref_weights(P, valid, ls)
                _, C = ref_lmds(np.repeat(P[ls], w, axis=0), P[:1], 2)
                first = np.cumsum(w) - w  # the first copy of each landmark
                emb = s.embedding
                np.testing.assert_array_equal(np.asarray(emb.slots), ls)
                np.testing.assert_allclose(_pairwise(emb.coords), _pairwise(C[first]), atol=1e-9)
                n_checked += 1
        assert n_checked >= 3
        plain = LM.landmark_mds(5, n_components=2, buffer_size=20, weighted=True)
        Y = np.asarray(jax.jit(plain.predict)(s, X))
        P, valid, ls = np.asarray(s.points), np.asarray(s.valid), np.asarray(s.landmark_slots)
        w = _ref_weights(P, valid, ls)
        Yr, _ = ref_lmds(np.repeat(P[ls], w, axis=0), X, 2)
        np.testing.assert_allclose(Y * np.sign((Y * Yr).sum(0)), Yr, atol=1e-8)
        Yp, _ = ref_lmds(P[ls], X, 2)
        assert len(set(w.tolist())) > 1 and np.abs(_pairwise(Yp) - _pairwise(Yr)).max() > 0.1
        e = LM.embedding(s, n_components=2, align=True, weighted=True)  # the tracked one
        chex.assert_trees_all_close(e, s.embedding)
    m = jaxstream.LandmarkMDS(5, n_components=2, buffer_size=20, weighted=True)
    assert m.learner.config.weighted is True and jaxstream.config_record(m.learner.config)["weighted"] is True


def test_stress_vs_loop_reference():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((25, 4))
    Y = rng.standard_normal((25, 2))
    D = euclid(X)
    with enable_x64():
        assert abs(float(LM.normalized_stress(D, Y)) - ref_stress(D, Y)) < 1e-12
        idx = np.array([0, 3, 7, 11, 20])
        assert abs(float(LM.landmark_stress(D, Y, idx)) - ref_stress(D[np.ix_(idx, idx)], Y[idx])) < 1e-12


def test_lmds_masked_equals_unmasked():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((10, 3))
    sq = euclid(X) ** 2
    with enable_x64():
        full = LM.lmds_fit(sq[:6, :6], 2)
        masked = LM.lmds_fit(sq, 2, mask=np.arange(10) < 6)
        Yf = LM.lmds_transform(full, sq[:, :6])
        Ym = LM.lmds_transform(masked, sq)
    s = np.sign((np.asarray(Yf) * np.asarray(Ym)).sum(0))
    np.testing.assert_allclose(np.asarray(Ym) * s, np.asarray(Yf), atol=1e-9)
    assert int(masked.n_positive) == 3


def test_too_few_positive_eigenvalues():
    # 4 collinear landmarks span one dimension: k = 2 must fail clearly, not give NaN
    L = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.5, 0.0]])
    with pytest.raises(ValueError, match="positive"):
        LM.lmds_embed(L, L, 2)
    m = LM.lmds_fit(euclid(L) ** 2, 2)  # traced path: a flag and zero coordinates
    assert int(m.n_positive) == 1
    Y = LM.lmds_transform(m, euclid(L) ** 2)
    assert np.all(np.isfinite(np.asarray(Y))) and np.allclose(np.asarray(Y)[:, 1], 0.0)
    with pytest.raises(ValueError, match="landmarks"):
        LM.lmds_embed(L[:2], L, 2)


# ---------------------------------------------------------------------------
# The online learner versus the loop reference
# ---------------------------------------------------------------------------

def _run_compare(X, n_L, N, learner, items, eps0=0.0, exact=True):
    """Step the JAX learner and the reference together; compare after every arrival.

    With precomputed distances both sides see the same numbers and ε must be
    equal bit for bit; with the Euclidean metric the distances themselves may
    differ in the last bit (summation order), so ε is compared to 1e-12.
    """
    D = euclid(X)
    ref = RefOnline(D, n_L, N, eps0)
    state = learner.init(jax.random.key(0), items[:1])
    ref.arrive(0)
    step = jax.jit(learner.update)
    eps_prev = float(state.eps)
    cases = set()
    for t in range(1, len(X)):
        state, info = step(jax.random.key(t), state, jnp.asarray(items[t]))
        r = ref.arrive(t)
        cases.add(r["case"])
        assert int(info.case) == r["case"], t
        assert int(info.added) == r["added"], t
        assert int(info.removed) == r["removed"], t
        assert int(info.evicted) == r["evicted"], t
        assert state_landmarks(state) == sorted(ref.L), t
        if exact:
            assert float(state.eps) == ref.eps, t
        else:
            assert float(state.eps) == pytest.approx(ref.eps, rel=1e-12, abs=1e-300), t
        # invariants: bounded, dominating, ε non-decreasing, buffer bounded
        assert len(ref.L) <= n_L and int(info.n_landmarks) == len(ref.L)
        assert float(state.eps) >= eps_prev
        eps_prev = float(state.eps)
        assert ref.dominated()
        buf = sorted(np.asarray(state.arrival)[np.asarray(state.valid)].tolist())
        assert buf == sorted(ref.buf) and len(buf) <= N
    return state, cases


# (n_L, N) = (4, 60), (2, 50), (4, 30): the compiled runs of the replays below; (3, 8): a buffer of n_L + 5
@pytest.mark.parametrize("seed,n_L,N", [(0, 4, 60), (1, 2, 50), (2, 4, 30), (3, 3, 8)])
def test_online_vs_reference_precomputed(seed, n_L, N):
    """After every arrival: the event, the landmark set, ε (bit for bit: both sides see the same numbers),
    the buffer, and the invariants (bounded, dominating, ε non-decreasing) against the loop reference."""
    X = clustered_stream(seed, 60)
    D = euclid(X)
    final, info, refs, snaps = _replay_precomputed(D, n_L, N, states=True)
    ref = RefOnline(D, n_L, N)
    ref.arrive(0)
    eps_prev, cases = 0.0, set()
    for t in range(1, len(X)):
        r = ref.arrive(t)
        assert r == refs[t - 1]
        cases.add(r["case"])
        assert int(info.evicted[t - 1]) == r["evicted"], t
        arrival, valid, is_lm, eps = (np.asarray(a) for a in (
            (final.arrival, final.valid, final.is_landmark, final.eps) if t == len(X) - 1 else
            jax.tree_util.tree_map(lambda a: a[t], snaps)))
        assert sorted(arrival[is_lm].tolist()) == sorted(ref.L), t
        assert float(eps) == ref.eps and float(eps) >= eps_prev, t
        eps_prev = float(eps)
        assert len(ref.L) <= n_L and int(info.n_landmarks[t - 1]) == len(ref.L) and ref.dominated()
        assert sorted(arrival[valid].tolist()) == sorted(ref.buf) and valid.sum() <= N
    assert cases == {1, 2, 3}


@pytest.mark.parametrize("seed,n_L,N", [(4, 5, 200), (5, 4, 10)])
def test_online_vs_reference_euclidean(seed, n_L, N):
    X = clustered_stream(seed, 60, d=3)
    with enable_x64():
        lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=N)
        _, cases = _run_compare(X, n_L, N, lrn, X, exact=False)
    assert 3 in cases


def test_online_vs_reference_callable_metric_cached():
    X = clustered_stream(6, 60)
    manhattan = lambda a, b: jnp.sum(jnp.abs(a - b))
    Dm = np.abs(X[:, None] - X[None]).sum(-1)
    with enable_x64():
        lrn = LM.landmark_mds(5, buffer_size=20, metric=manhattan)  # caches distances by default
        ref = RefOnline(Dm, 5, 20)
        state = lrn.init(jax.random.key(0), X[:1])
        ref.arrive(0)
        state, info = runner(lrn, "info")(jax.random.key(1), X[1:], state)
        for t in range(1, len(X)):
            ref.arrive(t)
        assert state_landmarks(state) == sorted(ref.L)
        assert float(state.eps) == ref.eps
        assert state.dist.shape == (20, 20)
        lrn2 = LM.landmark_mds(5, buffer_size=20, metric=manhattan, cache_distances=False)
        s2, _ = runner(lrn2)(jax.random.key(1), X[1:], lrn2.init(jax.random.key(0), X[:1]))
        assert state_landmarks(s2) == sorted(ref.L)


def test_degree_rule_neighbour_branch():
    """A star whose hub has deg > 2 sqrt(|E|): a low-degree neighbour becomes the landmark instead."""
    m = 9
    n = 2 + m + 1  # landmarks A, B; leaves; hub
    rng = np.random.default_rng(0)
    D = rng.uniform(5.0, 10.0, (n, n))
    hub = n - 1
    for leaf in range(2, 2 + m):
        D[0, leaf] = rng.uniform(0.2, 0.9)  # A covers every leaf
        D[leaf, hub] = rng.uniform(0.2, 0.9)
    D = np.triu(D, 1)
    D = D + D.T
    # event by event against the loop reference (shares the compiled run of the next test's star)
    state, info, refs = _replay_precomputed(D, 2, 50, eps0=1.0)
    r = refs[-1]
    # |E| = 2m, deg(hub) = m = 9 > 2 sqrt(18): the oldest leaf (degree 2) is added, not the hub
    assert int(info.case[-1]) == 3 and int(info.added[-1]) == 2 == r["added"] and bool(info.full_degrees[-1])
    # under vmap the O(N^2) branch runs for the one stream that needs it; results equal single runs
    with enable_x64():
        lrn = LM.landmark_mds(2, n_components=1, buffer_size=50, metric="precomputed", distances=D, eps0=1.0)
        grid = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (2,) + a.shape), lrn.params)
        grid = grid._replace(eps0=jnp.array([1.0, 0.1]))
        keys = jax.random.split(jax.random.key(0), 2)
        items = LM.index_stream(n)
        states = jaxstream.init_streams(lrn, keys, items[:1], grid, params_batched=True, x_init_batched=False)
        fin, infos = jax.jit(lambda k, xs, s: jaxstream.run_streams(lrn, k, xs, s, trace="info"))(
            keys, np.broadcast_to(items[1:], (2, n - 1, 1)), states)
        assert bool(infos.full_degrees[0, -1]) and not bool(infos.full_degrees[1].any())
        assert state_landmarks(jax.tree_util.tree_map(lambda a: a[0], fin)) == state_landmarks(state)
        ref1 = RefOnline(D, 2, 50, eps0=0.1)
        for t in range(n):
            ref1.arrive(t)
        assert state_landmarks(jax.tree_util.tree_map(lambda a: a[1], fin)) == sorted(ref1.L)
        assert float(fin.eps[1]) == ref1.eps


def test_grow_eps_vs_bruteforce():
    """The fixed-point ε growth equals a brute-force scan over candidate thresholds."""
    rng = np.random.default_rng(7)
    grow = jax.jit(replacement.grow_eps)
    for trial in range(20):
        n = 30
        X = rng.standard_normal((n, 2))
        D = euclid(X)
        L = rng.choice(n, 5, replace=False)
        eps = float(np.quantile(D[D > 0], rng.uniform(0.0, 0.2)))
        # brute force: per landmark, the smallest candidate >= eps at which it is redundant
        best = []
        for u in L:
            others = [w for w in L if w != u]
            cands = sorted({eps} | {d for d in D[L].ravel() if d > eps})
            for e in cands:
                ok = all(min(D[w, v] for w in others) <= e for v in range(n) if D[u, v] <= e)
                if ok:
                    best.append(e)
                    break
        with enable_x64():
            arrival = jnp.asarray(L, jnp.int32)
            eps_new, rm, eps_u = grow(jnp.asarray(D[L]), jnp.ones(5, bool), arrival,
                                              jnp.ones(n, bool), eps)
        np.testing.assert_array_equal(np.asarray(eps_u), np.array(best))
        m = min(best)
        assert float(eps_new) == m
        assert int(L[int(rm)]) == min(int(u) for u, b in zip(L, best) if b == m)


# ---------------------------------------------------------------------------
# Buffer policy, capacity, determinism, tracing, vmap, float64
# ---------------------------------------------------------------------------

def test_buffer_full_evicts_oldest_non_landmark():
    X = stream41(8)
    lrn = lrn5()
    state, info = runner(lrn, "info")(jax.random.key(1), X[1:], lrn.init(jax.random.key(0), X[:1]))
    # replay the buffer and the landmark set from the infos
    buf, L, evictions = [0], {0}, 0
    for t in range(40):
        e = int(info.evicted[t])
        if e >= 0:
            assert len(buf) == 20 and e == min(v for v in buf if v not in L)  # oldest non-landmark
            buf.remove(e)
            evictions += 1
        else:
            assert len(buf) < 20
        buf.append(t + 1)
        if int(info.added[t]) >= 0:
            L.add(int(info.added[t]))
        if int(info.removed[t]) >= 0:
            L.remove(int(info.removed[t]))
        assert len(L) == int(info.n_landmarks[t]) <= 5
    assert evictions == 21
    assert sorted(buf) == sorted(np.asarray(state.arrival)[np.asarray(state.valid)].tolist())
    assert sorted(L) == state_landmarks(state)


def lrn6a():
    """A float32 aligned configuration shared by the same-key and wrapper tests (50-point streams in 3-D)."""
    return LM.landmark_mds(6, n_components=2, buffer_size=25, align=True)


def test_same_key_same_result_and_one_trace():
    X = clustered_stream(9, 50, d=3).astype(np.float32)
    lrn = lrn6a()
    s0 = lrn.init(jax.random.key(0), X[:1])
    run = runner(lrn, "info")
    a = run(jax.random.key(3), X[1:], s0)
    b = run(jax.random.key(3), X[1:], s0)
    c = run(jax.random.key(4), X[1:] * 1.0, s0)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # the algorithm is deterministic: the key does not change the result
    np.testing.assert_array_equal(np.asarray(a[0].is_landmark), np.asarray(c[0].is_landmark))


def test_update_traces_once_while_the_landmark_set_changes():
    """`update` itself, jitted and stepped through all three cases, is traced once."""
    X = stream41(20)
    lrn = lrn5()
    chex.clear_trace_counter()
    step = jax.jit(chex.assert_max_traces(lrn.update, n=1))
    s = lrn.init(jax.random.key(0), X[:1])
    cases = set()
    for t in range(1, 41):
        s, info = step(jax.random.key(t), s, jnp.asarray(X[t]))
        cases.add(int(info.case))
    assert cases == {1, 2, 3}
    # the robust options are plain array params: switching them on keeps the one compiled configuration
    s = s._replace(params=LM.default_params(min_support=4, density_shift=0.5))
    for t in range(1, 41):
        s, info = step(jax.random.key(t), s, jnp.asarray(X[t]))
    with pytest.raises(TypeError):  # no field defaults to None (a None leaf would be a second pytree structure)
        LM.Params(jnp.zeros(()), jnp.zeros((0, 0)), jnp.zeros((), jnp.int32))
    # power check: a second trace (a new dtype) is caught
    with pytest.raises(AssertionError):
        step(jax.random.key(0), s, jnp.asarray(X[1], jnp.int32))


def test_vmap_equals_loop():
    B = 3
    Xs = np.stack([stream41(10 + b) for b in range(B)])
    lrn = lrn5()
    keys = jax.random.split(jax.random.key(0), B)
    states = jaxstream.init_streams(lrn, keys, Xs[:, :1])
    fin, losses = runner_many(lrn)(keys, Xs[:, 1:], states)
    for b in range(B):
        s = lrn.init(keys[b], Xs[b, :1])
        s, l = runner(lrn)(keys[b], Xs[b, 1:], s)
        np.testing.assert_array_equal(np.asarray(fin.is_landmark[b]), np.asarray(s.is_landmark))
        np.testing.assert_array_equal(np.asarray(fin.eps[b]), np.asarray(s.eps))
        np.testing.assert_allclose(np.asarray(losses[b]), np.asarray(l), rtol=1e-6)


def test_params_vmap_over_eps0():
    X = stream41(11)
    lrn = lrn5()
    grid = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (3,) + a.shape), lrn.params)
    grid = grid._replace(eps0=jnp.array([0.0, 0.5, 2.0]))
    keys = jax.random.split(jax.random.key(0), 3)
    states = jaxstream.init_streams(lrn, keys, X[:1], grid, params_batched=True, x_init_batched=False)
    fin, _ = runner_many(lrn)(keys, np.broadcast_to(X[1:], (3,) + X[1:].shape), states)
    eps = np.asarray(fin.eps)
    assert np.all(eps >= np.array([0.0, 0.5, 2.0]))
    for b in range(3):  # each grid point equals a single run with that eps0
        s = lrn.init(keys[b], X[:1], lrn.params._replace(eps0=jnp.asarray(grid.eps0[b])))
        s, _ = runner(lrn)(keys[b], X[1:], s)
        assert float(s.eps) == eps[b] and state_landmarks(s) == sorted(
            np.asarray(fin.arrival[b])[np.asarray(fin.is_landmark[b])].tolist())


def test_float64():
    X = clustered_stream(12, 30, d=3)
    with enable_x64():
        lrn = LM.landmark_mds(10, n_components=2, buffer_size=60, align=True)  # as in the alignment test
        step = jax.jit(lrn.update)
        s = lrn.init(jax.random.key(0), X[:1])
        assert s.points.dtype == jnp.float64 and s.eps.dtype == jnp.float64
        for t in range(1, len(X)):
            s, info = step(jax.random.key(t), s, jnp.asarray(X[t]))
        assert info.loss.dtype == jnp.float64 and info.eps.dtype == jnp.float64
        assert s.embedding.coords.dtype == jnp.float64 and int(s.embedding.n_positive) >= 2


def test_loss_is_squared_distance_to_nearest_landmark():
    X = stream41(13)
    lrn = lrn5()
    s, info = runner(lrn, "info")(jax.random.key(0), X[1:], lrn.init(jax.random.key(0), X[:1]))
    np.testing.assert_allclose(float(info.loss[0]), ((X[1] - X[0]) ** 2).sum(), rtol=1e-5)
    pts, ids, _ = LM.landmarks(s)
    x = np.array([0.3, -0.2], np.float32)
    expect = ((pts - x) ** 2).sum(1).min()
    np.testing.assert_allclose(float(jax.jit(lrn.loss)(s, x)), expect, rtol=1e-5)
    g = jax.jit(jax.grad(lrn.loss, argnums=1))(s, x)
    assert np.all(np.isfinite(np.asarray(g))) and np.abs(np.asarray(g)).sum() > 0


# ---------------------------------------------------------------------------
# predict, alignment
# ---------------------------------------------------------------------------

def test_predict_matches_lmds_of_landmarks():
    X = clustered_stream(14, 80, d=3)
    with enable_x64():
        # the state comes from the aligned float64 configuration's compiled update (test_float64); predict of
        # an unaligned learner computes the embedding afresh from any state of the same shapes
        aligned = LM.landmark_mds(10, n_components=2, buffer_size=60, align=True)
        step = jax.jit(aligned.update)
        lrn = LM.landmark_mds(10, n_components=2, buffer_size=60)
        s = aligned.init(jax.random.key(0), X[:1])
        for t in range(1, len(X)):
            s, _ = step(jax.random.key(t), s, jnp.asarray(X[t]))
        assert int(s.n_seen) == 80 and int(s.is_landmark.sum()) == 10
        pts, _, _ = LM.landmarks(s)
        Yr, _ = ref_lmds(pts, X, 2)
        predict = jax.jit(lrn.predict)
        Y = np.asarray(predict(s, X))
        np.testing.assert_allclose(np.asarray(predict(s, X[5])), Y[5], atol=1e-12)
        emb = jax.jit(lambda st: LM.embedding(st, n_components=2))(s)  # landmarks map to their MDS coordinates
        msk = np.asarray(emb.mask)
        np.testing.assert_allclose(Y[np.asarray(emb.ids)[msk]], np.asarray(emb.coords)[msk], atol=1e-9)
    sg = np.sign((Y * Yr).sum(0))
    np.testing.assert_allclose(Y * sg, Yr, atol=1e-8)


def test_alignment_prevents_flips():
    """With align=True consecutive embeddings agree on shared landmarks up to a small motion."""
    X = clustered_stream(15, 70, d=3)
    with enable_x64():
        lrn = LM.landmark_mds(10, n_components=2, buffer_size=60, align=True)
        step = jax.jit(lrn.update)
        fresh_fn = jax.jit(lambda s: LM.embedding(s, n_components=2))  # computed afresh (unaligned)
        s = lrn.init(jax.random.key(0), X[:1])
        for t in range(1, 12):  # as init(X[:12]) does, through the one compiled update
            s, _ = step(jax.random.key(t), s, jnp.asarray(X[t]))
        prev = s.embedding
        jumps, raw_jumps = [], []
        for t in range(12, len(X)):
            s, info = step(jax.random.key(t), s, jnp.asarray(X[t]))
            emb = s.embedding
            if bool(info.replaced):
                ids_p, ids_n = np.asarray(prev.ids), np.asarray(emb.ids)
                shared = [i for i in ids_n if i >= 0 and i in ids_p]
                cp = np.asarray(prev.coords)[[list(ids_p).index(i) for i in shared]]
                cn = np.asarray(emb.coords)[[list(ids_n).index(i) for i in shared]]
                fresh = fresh_fn(s)
                cf = np.asarray(fresh.coords)[[list(np.asarray(fresh.ids)).index(i) for i in shared]]
                jumps.append(np.abs(cn - cp).max())
                raw_jumps.append(np.abs(cf - cp).max())
                # aligned embedding is an isometry of the fresh one
                np.testing.assert_allclose(euclid(cn), euclid(cf), atol=1e-9)
            prev = emb
        # predict uses the tracked embedding: landmarks map to their aligned coordinates
        emb = s.embedding
        msk = np.asarray(emb.mask)
        pts = np.asarray(s.points)[np.asarray(emb.slots)[msk]]
        np.testing.assert_allclose(np.asarray(lrn.predict(s, pts)), np.asarray(emb.coords)[msk], atol=1e-8)
    assert len(jumps) > 5
    assert np.median(jumps) < 0.5 * np.median(raw_jumps) or max(raw_jumps) < 1e-6
    assert max(jumps) < 2.0


# ---------------------------------------------------------------------------
# Baselines, data, wrapper
# ---------------------------------------------------------------------------

def test_baselines():
    n, m = 50, 6
    assert list(BL.initial_landmarks(n, m)) == list(range(m))
    r = np.asarray(BL.random_landmarks(jax.random.key(0), n, m))
    assert len(set(r.tolist())) == m and r.max() < n
    # reservoir sampling is uniform: inclusion probability m / n for every index
    keys = jax.random.split(jax.random.key(1), 4000)
    res = np.asarray(jax.vmap(lambda k: BL.reservoir_landmarks(k, 20, 5))(keys))
    assert all(len(set(row)) == 5 for row in res[:50])
    freq = np.bincount(res.ravel(), minlength=20) / 4000.0
    assert np.abs(freq - 0.25).max() < 0.035  # sd ≈ 0.0068
    # farthest-point vs a loop
    X = clustered_stream(16, 40)
    D = euclid(X)
    chosen = [0]
    for _ in range(m - 1):
        chosen.append(int(np.argmax(D[chosen].min(0))))
    np.testing.assert_array_equal(np.asarray(BL.farthest_point_landmarks(m, X)), chosen)
    np.testing.assert_array_equal(np.asarray(BL.farthest_point_landmarks(m, distances=D)), chosen)
    with enable_x64():
        Y = BL.embed_with_landmarks(chosen, 2, X)
        Yr, _ = ref_lmds(X[chosen], X, 2)
    sg = np.sign((np.asarray(Y) * Yr).sum(0))
    np.testing.assert_allclose(np.asarray(Y) * sg, Yr, atol=1e-8)
    with pytest.raises(ValueError):
        BL.random_landmarks(jax.random.key(0), 3, 5)


def test_random_stress_is_each_random_set_embedded():
    """random_stress: draw k is random_landmarks(split(key, n)[k]), embedded by a NumPy landmark
    MDS and scored by a NumPy normalised stress; a set whose MDS lacks k positive eigenvalues is NaN."""
    X = np.random.default_rng(17).normal(size=(60, 3)) * np.array([3.0, 1.0, 0.5])  # 3-D: σ > 0 at k = 2
    D = euclid(X)
    key = jax.random.key(3)
    with enable_x64():
        got = np.asarray(BL.random_stress(key, D, 6, n_draws=5))
        for k, sub in enumerate(jax.random.split(key, 5)):
            idx = np.asarray(BL.random_landmarks(sub, 60, 6))
            Y, _ = ref_lmds(X[idx], X, 2)
            np.testing.assert_allclose(got[k], ref_stress(D, Y), rtol=1e-7)
    assert got.min() > 0.05
    line = np.stack([np.linspace(0, 1, 30), np.zeros(30)], 1)
    assert np.isnan(np.asarray(BL.random_stress(key, euclid(line), 5, n_draws=3))).all()
    with pytest.raises(ValueError, match="n_landmarks=61 exceeds n_points=60"):
        BL.random_stress(key, D, 61)


def test_make_s_curve():
    X, t = datasets.make_s_curve(500, noise=0.0, random_state=1)
    assert X.shape == (500, 3) and t.shape == (500,)
    np.testing.assert_allclose(X[:, 0], np.sin(t))
    np.testing.assert_allclose(X[:, 2], np.sign(t) * (np.cos(t) - 1))
    assert np.all((X[:, 1] >= 0) & (X[:, 1] < 2)) and np.abs(t).max() <= 1.5 * np.pi
    # scikit-learn's draw order: t from the first n uniforms, then the heights
    rs = np.random.RandomState(1)
    u = rs.uniform(size=500)
    np.testing.assert_allclose(t, 3 * np.pi * (u - 0.5))
    np.testing.assert_allclose(X[:, 1], 2 * rs.uniform(size=500))
    Xs, ts = datasets.make_s_curve(500, random_state=1, sort_by_t=True)
    assert np.all(np.diff(ts) >= 0)
    np.testing.assert_array_equal(np.sort(t), ts)
    Xn, _ = datasets.make_s_curve(500, noise=0.1, random_state=1)
    assert 0.05 < np.std(Xn - X) < 0.15


def test_wrapper(monkeypatch):
    monkeypatch.setattr(_wrapper, "CHUNK", 8)  # the chunked-path test's compiled sizes
    X = clustered_stream(17, 50, d=3).astype(np.float32)
    assert jaxstream.embedding is LM and jaxstream.embedding.landmark_mds is jaxstream.landmark_mds
    m = jaxstream.LandmarkMDS(6, n_components=2, buffer_size=25, align=True)  # lrn6a's configuration
    with pytest.raises(RuntimeError, match="no summary yet"):
        m.transform(X)
    assert not hasattr(m, "state_") and not hasattr(m, "n_seen_")
    assert m.learn_one(X[0]) is m
    assert m.last_info_.case.shape == (1,) and int(m.last_info_.case[0]) == 2 and np.isnan(m.last_losses_[0])
    assert m.partial_fit(X[1:40]) is m
    infos = m.last_info_
    assert infos.case.shape == (39,) and m.last_losses_.shape == (39,)
    np.testing.assert_array_equal(m.last_losses_, np.asarray(infos.loss, np.float64))
    m.partial_fit(X[40:])
    assert m.n_seen_ == 50 and len(m.landmarks_) == 6 and m.n_features_in_ == 3
    Y = m.transform(X)
    assert Y.shape == (50, 2)
    np.testing.assert_array_equal(m.predict(X), Y)  # predict is transform
    np.testing.assert_allclose(m.transform_one(X[7]), Y[7], atol=1e-6)
    np.testing.assert_allclose(m.transform(m.landmarks_), m.landmark_coords_, atol=1e-4)
    # the wrapper and the functional learner agree
    lrn = lrn6a()
    s, info = runner(lrn, "info")(jax.random.key(0), X[1:], lrn.init(jax.random.key(0), X[:1]))
    assert sorted(m.landmark_indices_.tolist()) == state_landmarks(s)
    np.testing.assert_allclose(Y, np.asarray(lrn.predict(s, X)), atol=1e-4)
    assert m.eps_ == float(s.eps)
    np.testing.assert_allclose(m.cumulative_loss_, np.asarray(info.loss, np.float64).sum(), rtol=1e-6)
    with pytest.raises(ValueError, match="dimension"):
        m.learn_one(np.zeros(2))
    # precomputed items are validated as indices
    mp = jaxstream.LandmarkMDS(6, metric="precomputed", distances=euclid(X), buffer_size=30)
    with pytest.raises(ValueError, match="indices"):
        mp.learn_one([60.0])
    with pytest.raises(ValueError, match="indices"):
        mp.learn_one([1.5])
    assert m.fit(X[:30]) is m  # fit forgets, and its first point's Info is kept like partial_fit's
    assert m.last_info_.case.shape == (30,) and m.last_losses_.shape == (30,) and int(m.last_info_.case[0]) == 2


def test_wrapper_sklearn_conventions_and_score(monkeypatch):
    """The constructor lists every argument of landmark_mds (plus seed and reembed_every) and only stores
    them (a bad value is refused when the model first learns); get_params / set_params / sklearn's clone;
    score is 1 − the normalised stress of X's embedding against X's distances (NumPy loop reference),
    also for precomputed distances."""
    import inspect
    from sklearn.base import clone
    monkeypatch.setattr(_wrapper, "CHUNK", 8)
    X = clustered_stream(17, 50, d=3).astype(np.float32)
    args = set(inspect.signature(LM.landmark_mds).parameters) | {"seed", "reembed_every"}
    m = jaxstream.LandmarkMDS(6, n_components=2, buffer_size=25, align=True, reembed_every=0)
    assert set(m.get_params()) == args and m.get_params()["reembed_every"] == 0
    with pytest.raises(ValueError, match="reembed_every"):
        m.fit(X)
    assert m.set_params(reembed_every=None) is m
    assert m.fit(X) is m and m.n_seen_ == 50
    c = clone(m)
    assert c.get_params() == m.get_params() and not hasattr(c, "state_")
    c.fit(X)
    chex.assert_trees_all_equal(c.state_, m.state_)
    m.set_params(buffer_size=30)
    assert not hasattr(m, "state_")  # the learned state is discarded
    Y = c.transform(X)
    np.testing.assert_allclose(c.score(X), 1.0 - ref_stress(euclid(X), Y), atol=1e-5)
    assert 0.5 < c.score(X) < 1.0
    mp = jaxstream.LandmarkMDS(6, metric="precomputed", distances=euclid(X), buffer_size=30)
    items = LM.index_stream(len(X)).astype(np.float32)
    mp.fit(items)
    np.testing.assert_allclose(mp.score(items), 1.0 - ref_stress(euclid(X), mp.transform(items)), atol=1e-5)


def test_wrapper_unaligned_fit_and_transform():
    """An unaligned model (the wrapper's fresh-embedding path): landmarks map
    onto their own coordinates, and transform equals the functional
    learner's predict after the same stream."""
    X = clustered_stream(19, 40, d=3).astype(np.float32)
    m = jaxstream.LandmarkMDS(6, n_components=2, buffer_size=25)
    m.partial_fit(X)
    assert m.n_seen_ == 40 and len(m.landmarks_) == 6
    np.testing.assert_allclose(m.transform(m.landmarks_), m.landmark_coords_, atol=1e-4)
    lrn = LM.landmark_mds(6, n_components=2, buffer_size=25)
    s, _ = jaxstream.run_stream(lrn, jax.random.key(0), X[1:], lrn.init(jax.random.key(0), X[:1]))
    assert sorted(m.landmark_indices_.tolist()) == state_landmarks(s)
    np.testing.assert_allclose(m.transform(X), np.asarray(lrn.predict(s, X)), atol=1e-4)


def test_bad_input():
    lrn = LM.landmark_mds(5, n_components=2, buffer_size=20)
    with pytest.raises(ValueError, match="at least 1 rows"):
        lrn.init(jax.random.key(0), np.zeros((0, 2)))
    with pytest.raises(ValueError, match="NaN"):
        lrn.init(jax.random.key(0), np.array([[0.0, np.nan]]))
    s = lrn.init(jax.random.key(0), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="shape"):
        lrn.update(jax.random.key(0), s, jnp.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        jaxstream.run_stream(lrn, jax.random.key(0), np.array([[0.0, 1.0], [np.inf, 0.0]]), s)
    with pytest.raises(ValueError, match="buffer_size"):
        LM.landmark_mds(5, buffer_size=5)
    with pytest.raises(ValueError, match="max_landmarks"):
        LM.landmark_mds(0)
    with pytest.raises(TypeError):
        LM.landmark_mds(5.0)
    with pytest.raises(ValueError, match="n_components"):
        LM.landmark_mds(3, n_components=3)
    with pytest.raises(ValueError, match="distances"):
        LM.landmark_mds(3, metric="precomputed")
    with pytest.raises(ValueError, match="symmetric"):
        LM.landmark_mds(3, metric="precomputed", distances=np.array([[0.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="metric"):
        LM.landmark_mds(3, metric="cosine")
    # NaN rows are skipped under nonfinite="skip": same result as dropping them
    X = stream41(18)[1:]
    Xn = X.copy()
    Xn[7] = np.nan
    run = runner(lrn)
    a, _ = run(jax.random.key(0), Xn, s, np.ones(40, bool))
    b, _ = run(jax.random.key(0), X, s, np.arange(40) != 7)
    assert state_landmarks(a) != [] and int(a.n_seen) == int(b.n_seen)
    np.testing.assert_array_equal(np.asarray(a.is_landmark), np.asarray(b.is_landmark))


# ---------------------------------------------------------------------------
# Mutants, ties, non-Euclidean metrics, degree sums, options
# ---------------------------------------------------------------------------

_PAD = 64  # precomputed replays: D padded to 64 items and streams to 63 masked arrivals (one compiled run per n_L, N)


def _trace_snapshots(state, x, info):
    """run_stream trace: the info and the buffer as it was before the arrival (so the state after each
    arrival is the next row's)."""
    return info, (state.arrival, state.valid, state.is_landmark, state.eps)


def _replay_precomputed(D, n_L, N, eps0=0.0, min_support=0, density_shift=0.0, states=False):
    """Step the learner over items 0..n-1 with precomputed D next to the reference; return the final state,
    the infos and the reference's events (and, with ``states``, the per-arrival buffer snapshots of
    `_trace_snapshots`).

    D is padded with items that never arrive (far from everything) and the stream with masked arrivals,
    so that replays of any n <= 64 items share one compiled run per (n_L, N)."""
    n = len(D)
    Dp = np.full((_PAD, _PAD), 1e6)
    np.fill_diagonal(Dp, 0.0)
    Dp[:n, :n] = D
    with enable_x64():
        lrn = LM.landmark_mds(n_L, n_components=1, buffer_size=N, metric="precomputed", distances=Dp, eps0=eps0,
                              min_support=min_support, density_shift=density_shift)
        items = LM.index_stream(_PAD)
        ref = RefOnline(D, n_L, N, eps0, min_support, density_shift)
        state = lrn.init(jax.random.key(0), items[:1])
        ref.arrive(0)
        state, (info, snaps) = runner(lrn, _trace_snapshots)(jax.random.key(1), items[1:], state,
                                                              np.arange(1, _PAD) < n)
        info = jax.tree_util.tree_map(lambda a: a[:n - 1], info)
        refs = [ref.arrive(t) for t in range(1, n)]
        for t, r in enumerate(refs):
            assert int(info.case[t]) == r["case"], t
            assert int(info.added[t]) == r["added"], t
            assert int(info.removed[t]) == r["removed"], t
        assert state_landmarks(state) == sorted(ref.L) and float(state.eps) == ref.eps
    return (state, info, refs, snaps) if states else (state, info, refs)


def test_degree_rule_picks_the_lowest_degree_neighbour_not_the_earliest():
    """A star whose leaves differ in degree: the earliest leaf has degree 3, later ones 2.

    Choosing the earliest neighbour regardless of degree (a mutant that the
    uniform-degree star cannot tell apart) adds leaf 2; the rule adds leaf 4.
    """
    m = 9
    n = 2 + m + 1
    rng = np.random.default_rng(0)
    D = rng.uniform(5.0, 10.0, (n, n))
    hub = n - 1
    for leaf in range(2, 2 + m):
        D[0, leaf] = rng.uniform(0.2, 0.9)
        D[leaf, hub] = rng.uniform(0.2, 0.9)
    D[2, 3] = 0.5  # leaves 2 and 3 are adjacent: degree 3 each
    D = np.triu(D, 1)
    D = D + D.T
    _, info, refs = _replay_precomputed(D, 2, 50, eps0=1.0)
    # |E| = 19, deg(hub) = 9 > 2 sqrt(19): a neighbour of degree <= sqrt(19) is added, the earliest of degree 2
    assert refs[-1]["case"] == 3 and int(info.added[-1]) == 4 and bool(info.full_degrees[-1])


def test_ties_and_duplicates_use_closed_neighbourhoods():
    """Integer distances (many ties at ε) and duplicates: coverage and edges are d <= ε, not d < ε."""
    rng = np.random.default_rng(5)
    P = rng.integers(0, 4, (45, 2)).astype(float)  # a 4 x 4 grid: duplicates and tied distances
    D = np.abs(P[:, None] - P[None]).sum(-1)  # Manhattan: integers
    _, info, refs = _replay_precomputed(D, 4, 60)
    cases = [r["case"] for r in refs]
    assert {1, 2, 3} <= set(cases)
    # power: a duplicate of a landmark arriving at ε = 0 is covered only under closed coverage
    _, info0, _ = _replay_precomputed(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]), 2, 50)
    assert [int(c) for c in info0.case] == [2, 1]
    # and a point at exactly ε from a landmark is covered
    eps_hits = sum(1 for t, r in enumerate(refs) if r["case"] == 1 and float(info.loss[t]) == float(info.eps[t - 1]) ** 2
                   and t > 0)
    assert eps_hits > 0


def test_min_support_drops_isolated_landmarks_vs_reference():
    X = clustered_stream(21, 60)
    out = [25, 40, 52]
    X[out] += 12.0 * np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])  # isolated outliers
    D = euclid(X)
    s2, _, _ = _replay_precomputed(D, 4, 60, min_support=2)
    s0, _, _ = _replay_precomputed(D, 4, 60, min_support=0)
    # the paper's rule keeps outliers as landmarks (nothing else can cover them); m = 2 drops them
    assert set(state_landmarks(s0)) & set(out)
    assert not set(state_landmarks(s2)) & set(out)


def test_density_shift_vs_reference():
    """density_shift (with and without min_support, a full and an evicting buffer) against the loop
    reference, event by event; the shift must fire (power: the landmark added is not the arrival itself)."""
    X = clustered_stream(25, 60)
    X[[30, 55]] += 3.0  # points at the edge of a cluster
    D = euclid(X)
    fired = 0
    for ms, N in ((0, 60), (2, 60), (0, 30)):  # n_L = 4, N = 60: the min_support test's compiled configuration
        _, info, refs = _replay_precomputed(D, 4, N, min_support=ms, density_shift=0.5)
        fired += sum(1 for t, r in enumerate(refs) if r["case"] == 3 and r["added"] not in (-1, t + 1)
                     and r["removed"] != r["added"])
    assert fired >= 3
    with pytest.raises(ValueError, match="density_shift"):
        LM.landmark_mds(5, density_shift=1.5)


@pytest.mark.parametrize("cache", [False, True])
def test_densest_counts_only_candidates_vs_numpy(cache):
    """`_densest` (candidates within r of `new`, counted in chunks) against a brute-force NumPy count over
    the buffer, for radii whose candidate sets span one and two chunks; a partly filled buffer gives empty
    slots."""
    N, n_fill = 64, 60
    rng = np.random.default_rng(0)
    # a clump among the late arrivals: the densest candidate often lies past the first chunk
    P = np.concatenate([rng.uniform(0, 6, (40, 2)), rng.uniform(1, 5, 2) + 0.3 * rng.standard_normal((20, 2))])
    with enable_x64():
        lrn = LM.landmark_mds(4, n_components=1, buffer_size=N, cache_distances=cache)
        # the buffer filled directly (no init scan to compile): 60 points in arrival order, 4 spread landmarks
        s = lrn.init(jax.random.key(0), P[:1])
        Pp = np.zeros((N, 2))
        Pp[:n_fill] = P
        fill = np.arange(N) < n_fill
        ls = np.array([0, 17, 45, 58], np.int32)
        s = s._replace(points=jnp.asarray(Pp), valid=jnp.asarray(fill), arrival=jnp.asarray(np.where(fill, np.arange(N), -1),
                       jnp.int32), is_landmark=jnp.asarray(np.isin(np.arange(N), ls)), landmark_slots=jnp.asarray(ls),
                       dist=jnp.asarray(np.where(fill[:, None] & fill[None], euclid(Pp), 0.0)) if cache else s.dist)
        cfg = make_config(4, N, 1, cache_distances=cache)
        assert cfg.cache is cache
        f = jax.jit(lambda new, r, row, st: replacement.densest((new, r, row), st, cfg))
        valid = np.asarray(s.valid)
        D = np.where(valid[:, None] & valid[None, :], euclid(np.asarray(s.points)), np.inf)
        np.fill_diagonal(D, 0.0)
        lm = np.asarray(s.is_landmark)
        arr = np.asarray(s.arrival)
        late, moved = 0, 0
        for new in range(0, n_fill, 3):
            for r in (1.0, 2.0, 3.0):
                near = np.flatnonzero(D[new] <= r)  # by slot, the order in which the chunks take them
                count = (D[near] <= r).sum(1)
                i = min(range(len(near)), key=lambda i: (-count[i], arr[near[i]]))
                want = new if lm[near[i]] else near[i]
                got = int(f(jnp.int32(new), jnp.float64(r), jnp.asarray(D[new]), s))
                assert got == want, (new, r)
                late += i >= replacement.DENSE_CHUNK
                moved += want != new
    assert late >= 5 and moved > 10  # power: the densest candidate is often past the first chunk


def test_degree_rule_sums_do_not_overflow():
    f = jax.jit(replacement.x_passes_degree_rule)
    cases = [(39999, 39999 * 40000 // 2), (39999, 39999 * 40000), (46000, 1_000_000_000), (3, 4), (3, 5), (0, 0),
             (40000, 800_000_000), (40000, 799_999_999)]
    for dx, ssum in cases:
        assert bool(f(jnp.int32(dx), jnp.asarray(ssum, jnp.uint32))) == (dx * dx <= 2 * ssum), (dx, ssum)
    # int32 arithmetic gets the first case wrong (2 * sum overflows): the test has power
    i32 = jax.jit(lambda d, s: d * d <= 2 * s)(jnp.int32(39999), jnp.int32(39999 * 40000))
    assert not bool(i32)


def test_non_euclidean_metric_with_negative_eigenvalues():
    """Shortest-path distances on a cycle are not Euclidean: B has negative eigenvalues; LMDS keeps the
    positive ones and equals a NumPy reference."""
    n = 12
    i = np.arange(n)
    D = np.minimum(np.abs(i[:, None] - i[None]), n - np.abs(i[:, None] - i[None])).astype(float)
    D[0, 6] = D[6, 0] = 5.0  # break the symmetry a little (still a metric? not needed for LMDS)
    H = np.eye(n) - 1.0 / n
    B = -0.5 * H @ (D ** 2) @ H
    lam, V = np.linalg.eigh(B)
    assert lam.min() < -1e-6  # the power of the test: negative eigenvalues exist
    with enable_x64():
        model = LM.lmds_fit(D ** 2, 2)
        Y = np.asarray(LM.lmds_transform(model, D ** 2))
        assert int(model.n_positive) == int((lam > 1e-9 * abs(lam).max()).sum())
    top = np.argsort(lam)[::-1][:2]
    Yr = V[:, top] * np.sqrt(lam[top])
    sg = np.sign((Y * Yr).sum(0))
    np.testing.assert_allclose(Y * sg, Yr, atol=1e-9)
    # the learner with this metric: finite coordinates, the same n_positive as a direct fit of its landmarks
    with enable_x64():
        lrn = LM.landmark_mds(8, n_components=2, buffer_size=20, metric="precomputed", distances=D, align=True)
        s = lrn.init(jax.random.key(0), LM.index_stream(n))
        assert np.all(np.isfinite(np.asarray(s.embedding.coords)))
        idx = np.asarray(s.arrival)[np.asarray(s.embedding.slots)[np.asarray(s.embedding.mask)]]
        assert int(s.embedding.n_positive) == int(LM.lmds_fit(D[np.ix_(idx, idx)] ** 2, 2).n_positive)


def _batched_and_one(lrn, Xs):
    """run_streams of all of Xs (first row as x_init) and a jitted single-stream runner, with the keys."""
    keys = jax.random.split(jax.random.key(0), Xs.shape[0])
    states = jaxstream.init_streams(lrn, keys, Xs[:, :1])
    fin, infos = jax.jit(lambda k, x, s: jaxstream.run_streams(lrn, k, x, s, trace="info"))(
        keys, Xs[:, 1:], states)
    one = jax.jit(lambda k, x, s: jaxstream.run_stream(lrn, k, x, s, trace="info"))
    return keys, fin, infos, one


def _straight_line_ops(hlo: str):
    """Result types of the instructions a compiled program runs unconditionally.

    Walks the optimised HLO text from ENTRY through fusions and calls, but not
    into while loops (their bodies run only while the loop does).
    """
    import re
    comps, name, entry = {}, None, None
    for line in hlo.split("\n"):
        m = re.match(r"^(ENTRY )?%([\w.\-]+) ", line)
        if m and line.rstrip().endswith("{"):
            name = m.group(2)
            comps[name] = []
            entry = name if m.group(1) else entry
        elif line.startswith("}"):
            name = None
        elif name is not None:
            comps[name].append(line)
    seen, todo, out = set(), [entry], []
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        for line in comps[c]:
            if " while(" in line:
                continue
            todo += re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", line)
            if " = " in line:
                out.append(line.strip())
    assert entry is not None and len(out) > 20  # the parse found the program
    return out


def test_rare_branches_stay_inside_their_loops_under_vmap():
    """Under vmap the case-3 work ((n_L + 1) x N) and the exact degree count (N x N) run only at steps
    where some stream needs them: XLA must not hoist them out of their at-most-once loops (it did when
    only loop-invariant values went through the optimization barrier, making run_streams with B = 1
    about 30x slower than run_stream)."""
    B, n_L, N = 3, 7, 29
    X = np.asarray(datasets.make_s_curve(60, random_state=0)[0], np.float32)
    # uncached with align (the uncached case-3 path and the eigh refresh), and cached: two compiles cover the three
    for kw in (dict(align=True), dict(cache_distances=True)):
        lrn = LM.landmark_mds(n_L, n_components=2, buffer_size=N, **kw)
        s0 = lrn.init(None, X[:1])  # the compiled program depends on shapes only (no init scan to compile)
        S = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), s0)
        hlo = jax.jit(jax.vmap(lambda s, x: lrn.update(None, s, x))).lower(
            S, np.stack([X[41]] * B)).compile().as_text()
        ops = _straight_line_ops(hlo)
        # in-place writes of the (N, N) cache, its non-donated input copy and plumbing are not work
        plumbing = ("parameter(", "copy(", "scatter", "get-tuple-element(", "tuple(", "bitcast(")
        work = [o for o in ops if not any(p in o for p in plumbing)]
        big = [o[:120] for o in work if f"[{B},{N},{N}]" in o or f"[{B},{n_L + 1},{N}]" in o]
        assert not big, (kw, big[:4])
        assert any(f"[{B},{N}]" in o for o in work)  # the common O(N) path is there


def test_large_batch_and_align_under_vmap_equal_single_streams():
    """B = 48 streams (the compacted rare branches run in several chunks of 3 streams, some partly filled)
    give what each stream gives alone, aligned embeddings and arrival coordinates included; the first three
    are clustered streams whose landmarks are swapped several times (the alignment chain is exercised)."""
    B, T = 48, 41
    rng = np.random.default_rng(5)
    Xs = rng.standard_normal((B, T, 2)) * rng.uniform(0.5, 2.0, (B, 1, 1))
    Xs[:3] = np.stack([clustered_stream(30 + b, T) for b in range(3)])
    with enable_x64():  # float64: batched and single eigh agree to rounding, so the aligned chains do too
        lrn = LM.landmark_mds(5, n_components=2, buffer_size=20, align=True)
        keys, fin, infos, one = _batched_and_one(lrn, Xs)
        n3 = (np.asarray(infos.case) == 3).sum(0)
        c = _batching.compact_chunk(B)
        assert c > 1 and n3.max() > c and (n3 % c).any()  # several chunks, and partly filled ones, occur
        for b in range(B):
            s, info = one(keys[b], Xs[b, 1:], lrn.init(keys[b], Xs[b, :1]))
            np.testing.assert_array_equal(np.asarray(infos.case[b]), np.asarray(info.case))
            np.testing.assert_array_equal(np.asarray(fin.is_landmark[b]), np.asarray(s.is_landmark))
            np.testing.assert_array_equal(np.asarray(fin.eps[b]), np.asarray(s.eps))
            np.testing.assert_allclose(np.asarray(infos.y[b]), np.asarray(info.y), rtol=1e-8, atol=1e-8)
            chex.assert_trees_all_close(jax.tree_util.tree_map(lambda a: a[b], fin.embedding), s.embedding,
                                        atol=1e-9, rtol=1e-9)
            if b < 3:
                assert int(np.asarray(info.replaced).sum()) >= 3


def test_info_y_is_the_arrival_embedding():
    X = stream41(22)
    # unaligned here; the aligned Info.y is checked against predict in the wrapper's chunked-path test
    lrn = LM.landmark_mds(5, n_components=2, buffer_size=20, embed_arrivals=True)
    s = lrn.init(jax.random.key(0), X[:1])
    step = jax.jit(lrn.update)
    predict = jax.jit(lrn.predict)
    for t in range(1, 41):
        s, info = step(jax.random.key(t), s, jnp.asarray(X[t]))
        chex.assert_trees_all_close(info.y, predict(s, X[t]), atol=1e-5)
    assert LM.landmark_mds(5, buffer_size=20).init(jax.random.key(0), X[:3]).embedding.mask.sum() == 0


def test_wrapper_chunked_path_equals_functional_run(monkeypatch):
    monkeypatch.setattr(_wrapper, "CHUNK", 8)
    X = clustered_stream(23, 50, d=3).astype(np.float32)
    m = jaxstream.LandmarkMDS(6, n_components=2, buffer_size=25, align=True)
    a = m.partial_fit(X[:3]).last_info_            # first point + 2 steps (a padded, masked run)
    b = m.partial_fit(X[3:]).last_info_            # 5 whole chunks of 8 + 7 steps
    infos = jax.tree_util.tree_map(lambda u, v: np.concatenate([u, v]), a, b)
    assert infos.case.shape == (50,)
    lrn = lrn6a()
    s, info = runner(lrn, "info")(jax.random.key(0), X[1:], lrn.init(jax.random.key(0), X[:1]))
    np.testing.assert_array_equal(infos.case[1:], np.asarray(info.case))
    np.testing.assert_array_equal(infos.added[1:], np.asarray(info.added))
    np.testing.assert_array_equal(np.asarray(m.state_.is_landmark), np.asarray(s.is_landmark))
    chex.assert_trees_all_close(m.state_.embedding, s.embedding, atol=1e-5)
    np.testing.assert_allclose(infos.y[1:], np.asarray(info.y), atol=1e-5)
    # Info.y of the last arrival is its aligned embedding under the final landmarks
    np.testing.assert_allclose(infos.y[-1], np.asarray(lrn.predict(s, X[-1])), atol=1e-5)


def _pairwise(Y):
    Y = np.asarray(Y, np.float64)
    return np.sqrt(((Y[:, None] - Y[None]) ** 2).sum(-1))


def test_wrapper_reembed_every_holds_the_last_reembedding_vs_numpy_reference(monkeypatch):
    """reembed_every=K: points up to the last arrival t with t % K == 0 hold their landmark MDS under the
    landmarks of that moment (NumPy float64 reference, compared through pairwise distances: the aligned
    embedding is a rotation and shift of it); later points hold their at-arrival coordinates. Bounded buffer
    (points are evicted but still re-embedded), partial_fit in pieces that cut chunks and segments at odd
    places. Same configuration as the chunked-path test above (shared compiled programs)."""
    monkeypatch.setattr(_wrapper, "CHUNK", 8)
    X = clustered_stream(24, 53, d=3).astype(np.float32)
    n, K = len(X), 10
    m = jaxstream.LandmarkMDS(6, n_components=2, buffer_size=25, align=True, reembed_every=K)
    for a, b in ((0, 7), (7, 40), (40, n)):
        m.partial_fit(X[a:b])
    held = m.held_
    assert held.shape == (n, 2)
    c = ((n - 1) // K) * K  # the last re-embedding
    assert c == 50
    ref = jaxstream.LandmarkMDS(6, n_components=2, buffer_size=25, align=True)
    y_arr = ref.partial_fit(X[:c + 1]).last_info_.y
    Y, _ = ref_lmds(ref.landmarks_, X[:c + 1], 2)
    np.testing.assert_allclose(_pairwise(held[:c + 1]), _pairwise(Y), atol=2e-3 * _pairwise(Y).max())
    np.testing.assert_allclose(held[c + 1:], ref.partial_fit(X[c + 1:]).last_info_.y, atol=1e-5)
    # power: re-embedding changed the held block (the at-arrival coordinates are far from it)
    assert np.abs(_pairwise(y_arr) - _pairwise(Y)).max() > 0.1 * _pairwise(Y).max()
    # fit forgets the kept points: the same stream again holds the same coordinates
    np.testing.assert_array_equal(m.fit(X).held_, held)
    bad = jaxstream.LandmarkMDS(6, reembed_every=0)  # only stored; refused when learning
    with pytest.raises(ValueError, match="reembed_every"):
        bad.partial_fit(X)
    with pytest.raises(ValueError, match="held_ needs"):
        ref.held_


def test_default_buffer_is_documented_window():
    """The default buffer holds max(1024, 10 n_L) points (no longer a silent 100-point window at n_L = 10);
    what happens when it is full (the oldest non-landmark is evicted) is tested above on a small buffer."""
    assert LM.default_buffer_size(10) == 1024 and LM.default_buffer_size(200) == 2000
    assert LM.landmark_mds(10, n_components=1).config.buffer_size == 1024
    assert jaxstream.LandmarkMDS(10).learner.config.buffer_size == 1024
    assert LM.landmark_mds(10, buffer_size=50).config.buffer_size == 50
    assert "window" in LM.landmark_mds.__doc__ and "default_buffer_size" in LM.landmark_mds.__doc__


def test_config_records_static_arguments():
    """The learner's config is a hashable `Config`; its record (what checkpoints store) keeps the keys and
    values of the dict the learner recorded before Config existed."""
    man = lambda a, b: jnp.sum(jnp.abs(a - b))
    cfg = LM.landmark_mds(7, n_components=3, buffer_size=30, metric=man, align=True).config
    assert isinstance(cfg, LM.Config) and cfg.name == "landmark_mds" and hash(cfg) == hash(cfg._replace())
    assert cfg.track and cfg.cache and cfg.dist.callable_metric
    c = jaxstream.config_record(cfg)
    assert c == dict(learner="landmark_mds", max_landmarks=7, n_components=3, buffer_size=30, metric=c["metric"],
                     align=True, cache_distances=True, embed_arrivals=False, weighted=False)
    assert c["metric"].endswith("<lambda>") and "test_landmarks" in c["metric"]
    pre = LM.landmark_mds(7, metric="precomputed", distances=np.zeros((3, 3)), cache_distances=True).config
    assert jaxstream.config_record(pre)["metric"] == "precomputed" and pre.cache is False
    assert jaxstream.config_record(LM.landmark_mds(7).config)["metric"] == "euclidean"
    assert jaxstream.config_record(LM.landmark_mds(7, embed_arrivals=True).config)["embed_arrivals"] is True
    for v in c.values():
        assert isinstance(v, (int, float, str, bool, type(None), tuple))


def test_second_factory_call_with_equal_arguments_compiles_nothing(monkeypatch):
    """Equal arguments give the same learner (equivalent spellings the same configuration and kernel);
    run_stream with it traces the round nothing more. A distance matrix (an array) builds a new learner
    around the same cached kernel, which compiles nothing either. Power: another configuration is traced
    (and caught by the counter)."""
    from jaxstream.embedding import learner as LMl
    traced = []
    step = LMl.step

    def counting(state, x, config):
        traced.append(config)
        return step(state, x, config)

    monkeypatch.setattr(LMl, "step", chex.assert_max_traces(counting, n=2))
    chex.clear_trace_counter()
    X = stream41(30)
    kw = dict(n_components=1, buffer_size=23)  # a configuration no other test compiles
    a = LM.landmark_mds(4, **kw)
    assert LM.landmark_mds(4, **kw) is a
    assert LM.landmark_mds(4, metric="euclidean", cache_distances=False, eps0=0.0, **kw) is a
    s0 = a.init(jax.random.key(0), X[:1])
    ref, _ = jaxstream.run_stream(a, jax.random.key(0), X[1:], s0)
    assert len(traced) == 1
    b = LM.landmark_mds(4, **kw)
    s, _ = jaxstream.run_stream(b, jax.random.key(0), X[1:], b.init(jax.random.key(0), X[:1]))
    assert len(traced) == 1
    chex.assert_trees_all_equal(s, ref)
    D = euclid(X)
    p1 = LM.landmark_mds(4, metric="precomputed", distances=D, **kw)
    p2 = LM.landmark_mds(4, metric="precomputed", distances=D, **kw)
    assert p1 is not p2 and p1.update is p2.update and p1.config == p2.config
    items = LM.index_stream(len(X))
    for p in (p1, p2):
        jaxstream.run_stream(p, jax.random.key(0), items[1:], p.init(jax.random.key(0), items[:1]))
    assert len(traced) == 2
    with pytest.raises(AssertionError):  # power: a third configuration is a third trace
        c = LM.landmark_mds(4, n_components=1, buffer_size=24)
        jaxstream.run_stream(c, jax.random.key(0), X[1:], c.init(jax.random.key(0), X[:1]))


class JitVsEager(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_update_jit_and_eager_agree(self):
        X = stream41(24)
        lrn = lrn5()
        s = lrn.init(jax.random.key(0), X[:8])
        x = jnp.asarray([30.0, 0.0], jnp.float32)  # far away: case 3
        out = self.variant(lrn.update)(jax.random.key(0), s, x)  # without_jit: op by op outside the loops
        ref = jax.jit(lrn.update)(jax.random.key(0), s, x)
        assert int(out[1].case) == 3
        chex.assert_trees_all_close(out, ref, rtol=1e-6)
