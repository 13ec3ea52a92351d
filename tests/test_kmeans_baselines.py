"""Tests of the k-means baselines (jaxstream/baselines/kmeans.py) against NumPy references."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

import jaxstream
from jaxstream.clustering import baselines as KB


def np_macqueen(xs, k, power=1.0):
    """Sequential k-means: the first k points seed the centres, then the
    nearest centre moves by count^-power of the way to each point."""
    centers = np.zeros((k, xs.shape[1]))
    counts = np.zeros(k, int)
    losses = []
    for x in xs:
        seeded = counts > 0
        if seeded.any():
            d2 = [np.sum((x - centers[j]) ** 2) if seeded[j] else np.inf for j in range(k)]
            losses.append(min(d2))
            near = int(np.argmin(d2))
        else:
            losses.append(float(np.sum(x ** 2)))
        j = near if seeded.all() else int(np.flatnonzero(~seeded)[0])
        counts[j] += 1
        centers[j] += counts[j] ** (-power) * (x - centers[j])
    return centers, counts, np.array(losses)


@pytest.mark.parametrize("power", [1.0, 0.7])
def test_online_kmeans_matches_numpy(power):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((40, 3)) * 2
    with jax.enable_x64(True):
        learner = KB.online_kmeans(4, step_exponent=power)
        state = learner.init(jax.random.PRNGKey(0), xs[:2])  # fewer points than centres
        state, losses = jaxstream.run_stream(learner, jax.random.PRNGKey(1), xs[2:], state)
        centers, counts, ref_losses = np_macqueen(xs, 4, power)
        np.testing.assert_allclose(np.asarray(state.centers), centers, rtol=1e-12)
        np.testing.assert_array_equal(np.asarray(state.counts), counts)
        np.testing.assert_allclose(np.asarray(losses), ref_losses[2:], rtol=1e-12)
        labels = np.asarray(learner.predict(state, xs))
        d2 = ((xs[:, None] - centers[None]) ** 2).sum(-1)
        np.testing.assert_array_equal(labels, d2.argmin(1))
        np.testing.assert_allclose(np.asarray(learner.loss(state, xs)), d2.min(1), rtol=1e-12)


def test_online_kmeans_vmap_and_bad_input():
    learner = KB.online_kmeans(3)
    xs = np.random.default_rng(1).standard_normal((2, 10, 2)).astype(np.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    states = jaxstream.init_streams(learner, keys, xs[:, :0])
    vs, vl = jaxstream.run_streams(learner, keys, xs, states)
    for i in range(2):
        s, l = jaxstream.run_stream(learner, keys[i], xs[i], learner.init(keys[i], xs[i, :0]))
        np.testing.assert_allclose(np.asarray(vs.centers[i]), np.asarray(s.centers), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(vl[i]), np.asarray(l), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="n_clusters"):
        KB.online_kmeans(0)
    with pytest.raises(ValueError, match="shape"):
        learner.update(jax.random.PRNGKey(0), states._replace(centers=states.centers[0], counts=states.counts[0]),
                       jnp.zeros(3))


def test_kmeans_plus_plus_and_within_ss():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 2))
    mask = np.arange(30) < 12
    with jax.enable_x64(True):
        c = np.asarray(jax.jit(KB.kmeans_plus_plus, static_argnums=4)(
            jax.random.PRNGKey(0), jnp.asarray(X), jnp.asarray(mask), 5, 8))
        assert np.all(c[5:] == 0)
        valid = X[:12]
        for row in c[:5]:  # every seed is a valid point, all distinct
            assert np.min(np.abs(valid - row).sum(1)) == 0
        assert len({tuple(r) for r in c[:5]}) == 5
        cm = np.arange(8) < 5
        w = float(KB.within_ss(jnp.asarray(X), jnp.asarray(c), jnp.asarray(mask), jnp.asarray(cm)))
        ref = sum(min(np.sum((x - c[j]) ** 2) for j in range(5)) for x in valid)
        assert w == pytest.approx(ref, rel=1e-12)
        # k = 1: the best within-cluster sum of squares is around the mean.
        fit = jax.jit(lambda key, x, m: KB.fit_kmeans(key, x, 1, 3, point_mask=m))
        _, w1 = fit(jax.random.PRNGKey(1), jnp.asarray(X), jnp.asarray(mask))
        assert float(w1) == pytest.approx(float(np.sum((valid - valid.mean(0)) ** 2)), rel=1e-10)


def np_gap_select(gap, s, k_valid):
    for k in range(1, k_valid):
        if gap[k - 1] >= gap[k] - s[k]:
            return k
    return k_valid


def test_gap_select_matches_numpy():
    rng = np.random.default_rng(3)
    f = jax.jit(KB.gap_select)
    for _ in range(50):
        K = 6
        gap = np.cumsum(rng.normal(0.2, 0.3, K))
        s = rng.uniform(0, 0.3, K)
        kv = int(rng.integers(1, K + 1))
        assert int(f(jnp.asarray(gap), jnp.asarray(s), kv)) == np_gap_select(gap, s, kv)


def test_gap_statistic_chooses_k():
    rng = np.random.default_rng(4)
    blobs = np.array([[-8.0, 0.0], [8.0, 0.0], [0.0, 9.0]])
    X = (blobs[rng.integers(0, 3, 60)] + rng.standard_normal((60, 2))).astype(np.float32)
    gap = jax.jit(lambda key, x, m: KB.gap_statistic(key, x, 6, n_refs=10, mask=m))
    r = gap(jax.random.PRNGKey(0), X, np.ones(60, bool))
    assert int(r.k) == 3
    assert float(r.log_w[0]) == pytest.approx(np.log(np.sum((X - X.mean(0)) ** 2)), rel=1e-5)
    # Padded rows are ignored: the masked call sees the 60 points only.
    Xp = np.concatenate([X, np.full((4, 2), 50.0, np.float32)])[:60]
    Xp[40:] = 50.0
    rm = gap(jax.random.PRNGKey(0), Xp, np.arange(60) < 40)
    assert float(rm.log_w[0]) == pytest.approx(np.log(np.sum((X[:40] - X[:40].mean(0)) ** 2)), rel=1e-5)
    assert int(rm.k) == 3
    # One Gaussian group: k = 1.
    one = rng.standard_normal((60, 2)).astype(np.float32)
    assert int(gap(jax.random.PRNGKey(1), one, np.ones(60, bool)).k) == 1
    # Fewer valid points than k_max: k is capped at the number of points.
    r2 = gap(jax.random.PRNGKey(0), X, np.arange(60) < 2)
    assert 1 <= int(r2.k) <= 2


def test_kmeans_plus_plus_samples_by_squared_distance():
    """The second seed is drawn ∝ D(x)², D the distance to the first seed: over many keys its
    histogram matches those probabilities (χ², conditioned on the first seed). Power check: the
    same test rejects uniform seeding (second seed uniform among the other points)."""
    from scipy import stats
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [0.0, -4.0], [2.0, 2.0]])
    n, reps = len(X), 6000
    seeds = jax.jit(jax.vmap(lambda k: KB.kmeans_plus_plus(k, jnp.asarray(X, jnp.float32),
                                                           jnp.ones(n, bool), 2, 2)))(
        jax.random.split(jax.random.PRNGKey(0), reps))
    seeds = np.asarray(seeds)
    first = np.array([np.argmin(np.abs(X - s[0]).sum(1)) for s in seeds])
    second = np.array([np.argmin(np.abs(X - s[1]).sum(1)) for s in seeds])
    assert stats.chisquare(np.bincount(first, minlength=n)).pvalue > 1e-3  # first seed uniform
    obs, exp_d2, exp_unif = np.zeros(n), np.zeros(n), np.zeros(n)
    for i in range(n):
        sel = first == i
        d2 = np.sum((X - X[i]) ** 2, axis=1)
        obs += np.bincount(second[sel], minlength=n)
        exp_d2 += sel.sum() * d2 / d2.sum()
        exp_unif += sel.sum() * (np.arange(n) != i) / (n - 1)
    assert stats.chisquare(obs, exp_d2).pvalue > 1e-3, (obs, exp_d2)
    assert stats.chisquare(obs, exp_unif).pvalue < 1e-6
