"""The static (reverse-differentiable) form of loops with data-dependent trip counts."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream as js
from jaxstream._batching import rare
from jaxstream._loops import fori_upto, reverse_ready, static_trip_counts, static_trip_counts_enabled


def _power_sum(x, n):
    # Σ_{i < n} x^(i+1), n dynamic, at most 5 terms.
    return fori_upto(n, 5, lambda i, acc: acc + x ** (i + 1), jnp.zeros_like(x))


@pytest.mark.parametrize("n", [0, 1, 3, 5])
def test_fori_upto_static_form_same_values_and_reverse_differentiable(n):
    x = jnp.asarray(1.3)
    dynamic = jax.jit(_power_sum)(x, n)
    with static_trip_counts():
        static = jax.jit(_power_sum)(x, n)
        g = jax.jit(jax.grad(_power_sum))(x, n)
    chex.assert_trees_all_close(static, dynamic)
    np.testing.assert_allclose(float(static), sum(1.3 ** (i + 1) for i in range(n)), rtol=1e-6)
    np.testing.assert_allclose(float(g), sum((i + 1) * 1.3 ** i for i in range(n)), rtol=1e-5)


def test_reverse_ready_differentiates_a_jitted_caller_through_the_static_form():
    """grad(jit(f)) traces f before anything differentiates it: `reverse_ready` takes the JVP of the
    static form there (the dynamic one raises), and calls the fast function alone on concrete input."""
    calls = []

    def fast(x, n):
        calls.append("fast")
        return jax.jit(_power_sum)(x, n)

    def static(x, n):
        assert static_trip_counts_enabled()
        return _power_sum(x, n)

    f = reverse_ready(fast, static)
    x = jnp.asarray(1.3)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(jax.jit(lambda x: fast(x, 3)))(x)
    for n in (0, 3, 5):
        g = jax.grad(jax.jit(lambda x: f(x, n)))(x)
        np.testing.assert_allclose(float(g), sum((i + 1) * 1.3 ** i for i in range(n)), rtol=1e-5)
        _, t = jax.jvp(lambda x: f(x, n), (x,), (jnp.ones_like(x),))
        np.testing.assert_allclose(float(t), float(g), rtol=1e-6)
    calls.clear()
    np.testing.assert_allclose(float(f(x, 3)), 1.3 + 1.3 ** 2 + 1.3 ** 3, rtol=1e-6)
    assert calls == ["fast"]
    assert not static_trip_counts_enabled()


def test_dynamic_form_is_not_reverse_differentiable_and_flag_does_not_leak():
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.jit(jax.grad(_power_sum))(jnp.asarray(1.3), 3)
    assert not static_trip_counts_enabled()
    with static_trip_counts():
        assert static_trip_counts_enabled()
        with static_trip_counts():
            pass
        assert static_trip_counts_enabled()
    assert not static_trip_counts_enabled()


def _branch(pred, x):
    return rare(pred, lambda sm, bg: jnp.sin(sm * bg), jnp.zeros_like(x), x, 2.0 * x)


def test_rare_static_form_same_values_one_stream_and_batched():
    xs = jnp.linspace(0.1, 1.0, 8)
    pred = jnp.arange(8) % 3 == 0
    one = [jax.jit(_branch)(p, x) for p, x in zip(pred, xs)]
    batched = jax.jit(jax.vmap(_branch))(pred, xs)
    with static_trip_counts():
        one_s = [jax.jit(_branch)(p, x) for p, x in zip(pred, xs)]
        batched_s = jax.jit(jax.vmap(_branch))(pred, xs)
        g = jax.grad(lambda xs: jnp.sum(jax.vmap(_branch)(pred, xs)))(xs)
    chex.assert_trees_all_close(one_s, one)
    chex.assert_trees_all_close(batched_s, batched)
    chex.assert_trees_all_close(batched, jnp.stack(one))
    expected = np.where(np.asarray(pred), 4 * np.asarray(xs) * np.cos(2 * np.asarray(xs) ** 2), 0.0)
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-5)


def test_static_form_gives_the_same_pacbo_stream():
    # Same values whether the learner's loops are traced in their dynamic or static form.
    learner = js.pacbo(max_clusters=9, n_steps=30)
    xs = np.asarray(js.datasets.make_cubic_stream(40, seed=3), np.float32)
    key = jax.random.key(1)
    run = lambda: js.differentiable.stream_loss(learner, key, jnp.asarray(xs), reverse_mode=False)
    dynamic = jax.jit(run)()
    with static_trip_counts():
        static = jax.jit(run)()
    chex.assert_trees_all_close(static, dynamic)


def test_static_forms_pass_check_grads():
    from jax.test_util import check_grads
    with jax.enable_x64(True), static_trip_counts():
        x = jnp.asarray(1.3)
        check_grads(lambda x: _power_sum(x, 3), (x,), order=2, modes=["fwd", "rev"])
        xs = jnp.linspace(0.1, 1.0, 6)
        pred = jnp.arange(6) % 2 == 0
        check_grads(lambda xs: jax.vmap(_branch)(pred, xs), (xs,), order=2, modes=["fwd", "rev"])


def test_grow_eps_static_form_passes_check_grads_with_masks_and_empty_slots():
    # ε and each landmark's ε are interval ends (pair distances): piecewise linear in the
    # distances. Empty buffer slots and non-landmark rows are masked to +inf inside.
    from jax.test_util import check_grads
    from jaxstream.embedding.replacement import grow_eps
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(12, 2))
        D0 = jnp.asarray(np.linalg.norm(X[:5, None] - X[None], axis=-1))   # 5 landmark rows, 12 slots
        lm_valid = jnp.array([True, True, True, False, True])
        valid = jnp.arange(12) < 10                                        # two empty slots
        arrival = jnp.arange(5, dtype=jnp.int32)

        def eps_rows(D):
            DL = jnp.where(valid[None, :], D, jnp.inf)
            e, _, rows = grow_eps(DL, lm_valid, arrival, valid, jnp.asarray(0.05))
            return jnp.concatenate([e[None], jnp.where(lm_valid, rows, 0.0)])

        dynamic = eps_rows(D0)
        with static_trip_counts():
            chex.assert_trees_all_close(eps_rows(D0), dynamic)
            assert float(dynamic[0]) > 0.05                                # ε grew to a pair distance
            check_grads(eps_rows, (D0,), order=1, modes=["fwd", "rev"], eps=1e-6)
            assert float(jnp.abs(jax.grad(lambda D: eps_rows(D)[0])(D0)).sum()) > 0   # not a zero gradient
