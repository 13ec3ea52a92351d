"""`jaxstream._batching.rare`: a rarely taken branch, for one stream and under vmap, against a select."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

from jaxstream import _batching


def _fn(sm, bg):
    return sm[0] * bg["w"] + jnp.sum(bg["v"]), sm[1] + 1


def _inputs(rng, B, frac):
    pred = rng.uniform(size=B) < frac
    a = rng.standard_normal((B, 4)).astype(np.float32)
    k = rng.integers(0, 9, B).astype(np.int32)
    w = rng.standard_normal(4).astype(np.float32)  # unbatched
    v = rng.standard_normal((B, 5)).astype(np.float32)
    return pred, a, k, w, v


def _want(pred, a, k, w, v):
    return np.where(pred[:, None], a * w + v.sum(1, keepdims=True), 0.0), np.where(pred, k + 1, -1)


_DEFAULT = (np.zeros(4, np.float32), np.int32(-1))  # unbatched default


def _check(got, want):
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(got[1]), want[1])


def test_rare_under_vmap_runs_the_branch_for_the_streams_that_take_it():
    """The batching rule (compacted chunks of the streams whose predicate holds) against a select, for
    batches below and above one chunk, with batched and unbatched inputs and nested pytrees."""
    rng = np.random.default_rng(3)
    for B in (16, 100):  # chunks of 1 and of 6 streams (the last chunk clamped to the batch's end)
        assert _batching.compact_chunk(B) == (1 if B == 16 else 6)
        for frac in (0.0, 0.2, 0.5, 0.9, 1.0):
            pred, a, k, w, v = _inputs(rng, B, frac)
            got = jax.jit(jax.vmap(lambda p, a, k, v: _batching.rare(p, _fn, _DEFAULT, (a, k), {"w": w, "v": v})))(
                pred, a, k, v)
            _check(got, _want(pred, a, k, w, v))


def test_rare_one_stream_and_the_uncompacted_paths(monkeypatch):
    """One stream (a loop that runs at most once), an unbatched predicate under vmap, a batch smaller than
    16 (one chunk would be the whole batch) and per-stream inputs above COMPACT_MAX_BYTES (no gather) all
    give the select's result."""
    rng = np.random.default_rng(4)
    pred, a, k, w, v = _inputs(rng, 8, 0.5)
    one = jax.jit(lambda p, a, k, v: _batching.rare(p, _fn, _DEFAULT, (a, k), {"w": w, "v": v}))
    for b in range(8):
        got = one(pred[b], a[b], k[b], v[b])
        want = _want(pred[b:b + 1], a[b:b + 1], k[b:b + 1], w, v[b:b + 1])
        _check((got[0][None], got[1][None]), want)
    for p in (False, True):  # the same predicate for every stream
        got = jax.jit(jax.vmap(lambda a, k, v: _batching.rare(jnp.asarray(p), _fn, _DEFAULT, (a, k),
                                                              {"w": w, "v": v})))(a, k, v)
        _check(got, _want(np.full(8, p), a, k, w, v))
    vm = lambda p, a, k, v: _batching.rare(p, _fn, _DEFAULT, (a, k), {"w": w, "v": v})
    _check(jax.jit(jax.vmap(vm))(pred, a, k, v), _want(pred, a, k, w, v))  # B = 8 < 16: a select
    monkeypatch.setattr(_batching, "COMPACT_MAX_BYTES", 0)
    pred, a, k, w, v = _inputs(rng, 32, 0.3)
    _check(jax.jit(jax.vmap(vm))(pred, a, k, v), _want(pred, a, k, w, v))


def test_rare_loop_does_not_run_the_branch_when_false():
    """rare_loop(False, ...) returns the default without running fn (a NaN-producing branch stays out)."""
    fn = lambda sm, bg: sm / bg  # would be inf/NaN
    out = jax.jit(lambda p: _batching.rare_loop(p, fn, jnp.float32(7.0), jnp.float32(0.0), jnp.float32(0.0)))
    assert float(out(False)) == 7.0
    assert np.isnan(float(out(True)))


@pytest.mark.parametrize("B,c", [(1, 1), (15, 1), (16, 1), (32, 2), (100, 6), (1024, 64)])
def test_compact_chunk(B, c):
    assert _batching.compact_chunk(B) == c
