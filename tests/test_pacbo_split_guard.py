"""PACBO's split guard (`quasi_posterior.noise_split_limit`, `guarded_noise_variance`, `pacbo(split_guard=)`)."""
import itertools
import math

import chex
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.test_util import check_grads

import jaxstream
from jaxstream.clustering import quasi_posterior as Q


def _exact_two_means(x):
    """W_2 of the best split of x (n, d) into two non-empty groups, by enumerating every split."""
    n = len(x)
    best = np.inf
    for bits in itertools.product((False, True), repeat=n - 1):
        lab = np.array((False,) + bits)
        if lab.all() or not lab.any():
            continue
        a, b = x[~lab], x[lab]
        best = min(best, np.sum((a - a.mean(0)) ** 2) + np.sum((b - b.mean(0)) ** 2))
    return best


@pytest.mark.parametrize("d", [2, 3])
def test_the_limit_is_the_95_percent_quantile_of_a_noise_split(d):
    """For 6 points of one Gaussian, σ̂²_1/σ̂²_2 (best split found by enumeration) exceeds the limit in
    5 % of draws: 3,000 draws, binomial sd 0.4 %, tolerance 1.5 % (the table is an independent
    simulation with a heuristic split, 2,000 draws a cell)."""
    rng = np.random.default_rng(12345 + d)
    n, draws = 6, 3000
    lim = float(Q.noise_split_limit(float(n), d))
    over = 0
    for _ in range(draws):
        x = rng.standard_normal((n, d))
        r = (np.sum((x - x.mean(0)) ** 2) / (n - 1)) / (_exact_two_means(x) / (n - 2))
        over += r > lim
    assert over / draws == pytest.approx(0.05, abs=0.015)


def test_the_limit_interpolates_the_table_and_clamps():
    sizes = Q.NOISE_SPLIT_SIZES
    for d, row in Q.NOISE_SPLIT_RATIO.items():
        got = np.asarray(Q.noise_split_limit(jnp.asarray(sizes, jnp.float32), d))
        np.testing.assert_allclose(got, row, rtol=1e-5)
        assert np.all(np.diff(got) <= 0)  # a larger group: a noise split changes σ̂² less
    # between sizes, geometric interpolation; outside, the ends
    mid = float(Q.noise_split_limit(math.sqrt(8 * 10), 2))
    assert mid == pytest.approx(math.sqrt(Q.NOISE_SPLIT_RATIO[2][4] * Q.NOISE_SPLIT_RATIO[2][5]), rel=1e-5)
    assert float(Q.noise_split_limit(1.0, 2)) == pytest.approx(Q.NOISE_SPLIT_RATIO[2][0], rel=1e-5)
    assert float(Q.noise_split_limit(1e5, 2)) == pytest.approx(Q.NOISE_SPLIT_RATIO[2][-1], rel=1e-5)
    # between dimensions (static d), between the two rows; beyond the last row, the last row
    lo, hi = float(Q.noise_split_limit(20.0, 3)), float(Q.noise_split_limit(20.0, 5))
    assert lo > float(Q.noise_split_limit(20.0, 4)) > hi
    assert float(Q.noise_split_limit(20.0, 1000)) == pytest.approx(float(Q.noise_split_limit(20.0, 100)))


def test_guarded_noise_variance_exact_cases_and_gradients():
    """Below the limit: max(σ̂²_{k̂+1}, σ̂²_k̂); above it (a real extra group) or NaN: σ̂²_{k̂+1}; check_grads
    on both sides of the switch."""
    n, d = 20.0, 2
    lim = float(Q.noise_split_limit(n, d))
    f = lambda v, vk: float(Q.guarded_noise_variance(v, vk, n, d))
    assert f(1.0, 0.5 * lim) == pytest.approx(0.5 * lim)
    assert f(1.0, 0.5) == 1.0                 # the k̂ row narrower: σ̂²_{k̂+1} stands
    assert f(1.0, 2.0 * lim) == 1.0           # beyond a noise split: a real group, σ̂²_{k̂+1}
    assert f(1.0, math.nan) == 1.0
    with jax.enable_x64(True):
        for vk in (0.5 * lim, 2.0 * lim):
            args = (jnp.float64(1.0), jnp.float64(vk))
            check_grads(lambda v, w: Q.guarded_noise_variance(v, w, n, d), args, order=2, modes=("fwd", "rev"))
        g = jax.grad(lambda v, w: Q.guarded_noise_variance(v, w, n, d), argnums=(0, 1))(
            jnp.float64(1.0), jnp.float64(math.nan))
        assert [float(x) for x in g] == [1.0, 0.0]


def _one_group_k(split_guard, seeds=range(12), T=20):
    """k̂_t of one Gaussian group of T points (the ramp's first block), default learner."""
    L = jaxstream.pacbo(50, 256, 300, split_guard=split_guard)
    xs = np.stack([np.random.default_rng(s).standard_normal((T, 2)) + 10.0 for s in seeds]).astype(np.float32)
    keys = jax.random.split(jax.random.key(7), len(xs))
    trace = lambda state, x, info: info.n_clusters
    runs = jax.jit(lambda k, x, s: jaxstream.run_streams(L, k, x, s, trace=trace))
    _, ks = runs(keys, jnp.asarray(xs), jaxstream.init_streams(L, keys, xs[:, :0]))
    return np.asarray(ks)


def test_a_young_group_is_split_less_over_its_first_points():
    """One group of 20 points (the ramp's first block), 24 streams, rounds 10-20: the chain splits it
    in both, but less with the guard (measured: mean k̂ 3.19 against 4.34, paired difference
    1.16 ± 0.40 s.e., fewer centres on 17 of 24 streams); the same key gives the same bits."""
    guarded, plain = _one_group_k(True, range(24)), _one_group_k(False, range(24))
    diff = plain[:, 9:].mean(1) - guarded[:, 9:].mean(1)
    assert diff.mean() > 0.5 and np.mean(diff > 0) > 0.6
    chex.assert_trees_all_equal(guarded[:4], _one_group_k(True, range(4)))


def test_split_guard_option_preset_and_checks():
    assert jaxstream.pacbo().config.split_guard is True
    assert jaxstream.pacbo(preset="paper").config.split_guard is False
    assert jaxstream.pacbo(preset="paper", split_guard=True).config.split_guard is True
    with pytest.raises(TypeError, match="split_guard must be a bool"):
        jaxstream.pacbo(split_guard="yes")
    from jaxstream import PACBO
    assert PACBO(split_guard=False).learner.config.split_guard is False


def test_the_round_target_uses_the_guard_only_in_the_price_and_the_cap():
    """On one group's first points the k̂ + 1 row splits noise: with the guard the price's σ is the k̂ row's
    (wider), λ's schedule and σ (the proposals, λ_2, the provisional marks) are the unguarded round's;
    without it the two σ are equal."""
    from jaxstream.clustering import pacbo as P
    xs = np.random.default_rng(3).standard_normal((12, 2)).astype(np.float32)
    out = {}
    for guard in (True, False):
        L = jaxstream.pacbo(8, 32, 50, split_guard=guard)
        s = L.init(jax.random.PRNGKey(0), xs)
        f = jax.jit(lambda st: P.round_target(st, L.config)[3:])
        out[guard] = P.RoundTarget(None, None, None, *f(s))
    g, u = out[True], out[False]
    assert float(u.price_noise_sd) == float(u.noise_sd)
    assert float(g.noise_sd) == float(u.noise_sd)
    assert float(g.price_noise_sd) > float(g.noise_sd)
    assert float(g.price) >= float(u.price) and float(g.lam) < float(u.lam)


def test_a_checkpoint_from_before_the_guard_reads_as_split_guard_false(tmp_path):
    """Checkpoints written before ``split_guard`` existed hold the unguarded learner's state: they load
    into ``split_guard=False`` and are refused by the default learner."""
    from jaxstream import checkpoint
    from jaxstream.checkpoint import CheckpointError
    old_l = jaxstream.pacbo(4, 32, 10, split_guard=False)
    xs = np.random.default_rng(0).standard_normal((10, 2)).astype(np.float32)
    s = old_l.init(jax.random.key(0), xs)
    before = {k: v for k, v in jaxstream.config_record(old_l.config).items() if k != "split_guard"}
    checkpoint.save(tmp_path / "old.ckpt", old_l._replace(config=before), s)
    back, _ = checkpoint.load(tmp_path / "old.ckpt", old_l)
    chex.assert_trees_all_equal(back, s)
    with pytest.raises(CheckpointError, match="split_guard: saved False vs learner True"):
        checkpoint.load(tmp_path / "old.ckpt", jaxstream.pacbo(4, 32, 10))
