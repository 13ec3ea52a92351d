"""Stream drivers: prequential scan, masks, vmapping, chunking, validation."""
from typing import NamedTuple

import chex
import numpy as np
import jax
import jax.numpy as jnp
import pytest

import jaxstream as js


class MeanState(NamedTuple):
    mean: jax.Array
    n: jax.Array
    params: jax.Array


class MeanInfo(NamedTuple):
    loss: jax.Array
    noise: jax.Array


def mean_learner():
    """Running mean with a key-dependent nudge (so keys matter)."""
    def init(key, x0, params=None):
        return MeanState(x0.mean(0), jnp.asarray(x0.shape[0], x0.dtype), jnp.asarray(1.0) if params is None else params)

    def update(key, s, x):
        loss = jnp.sum((x - s.mean) ** 2) * s.params
        noise = 1e-3 * jax.random.normal(key)
        n = s.n + 1
        return MeanState(s.mean + (x - s.mean) / n + noise, n, s.params), MeanInfo(loss, noise)

    return js.StreamLearner(init, update, lambda s, x: s.mean, lambda s, x: jnp.sum((x - s.mean) ** 2),
                            jnp.asarray(1.0))


def np_reference(key, xs, x0, params=1.0, offset=0):
    mean, n, losses = x0.mean(0), x0.shape[0], []
    for t, x in enumerate(xs):
        losses.append(params * ((x - mean) ** 2).sum())
        noise = float(1e-3 * jax.random.normal(jax.random.fold_in(key, offset + t)))
        n += 1
        mean = mean + (x - mean) / n + noise
    return mean, np.array(losses)


@pytest.fixture
def data():
    return np.random.default_rng(0).normal(size=(60, 3)).astype(np.float32)


def test_run_stream_is_prequential_and_matches_loop(data):
    L = mean_learner()
    key = jax.random.key(3)
    st, tr = js.run_stream(L, key, data[5:], L.init(key, data[:5]))
    ref_mean, ref_losses = np_reference(key, data[5:], data[:5])
    np.testing.assert_allclose(tr, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(st.mean, ref_mean, rtol=1e-5, atol=1e-6)


def test_trace_options(data):
    L = mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, data[:5])
    _, info = js.run_stream(L, key, data[5:], s0, trace="info")
    assert isinstance(info, MeanInfo) and info.loss.shape == (55,)
    _, none = js.run_stream(L, key, data[5:], s0, trace=None)
    assert none == ()
    _, custom = js.run_stream(L, key, data[5:], s0, trace=lambda s, x, i: s.mean)
    assert custom.shape == (55, 3)
    np.testing.assert_allclose(custom[0], s0.mean)  # state *before* the update
    with pytest.raises(ValueError, match="trace"):
        js.run_stream(L, key, data[5:], s0, trace="everything")


def test_mask_skips_rows_and_ragged_equals_truncated(data):
    L = mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, data[:5])
    mask = np.arange(55) < 30
    st_m, tr_m = js.run_stream(L, key, data[5:], s0, mask=mask)
    st_t, tr_t = js.run_stream(L, key, data[5:35], s0)
    np.testing.assert_allclose(st_m.mean, st_t.mean)
    np.testing.assert_allclose(tr_m[:30], tr_t)
    assert np.all(np.asarray(tr_m[30:]) == 0)
    with pytest.raises(ValueError, match="mask"):
        js.run_stream(L, key, data[5:], s0, mask=mask[:10])


def test_nonfinite_policy(data):
    L = mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, data[:5])
    bad = data[5:].copy()
    bad[7, 1] = np.nan
    bad[9, 0] = np.inf
    with pytest.raises(ValueError, match="index 7"):
        js.run_stream(L, key, bad, s0)
    st, tr = js.run_stream(L, key, bad, s0, nonfinite="skip")
    mask = np.isfinite(bad).all(1)
    st2, tr2 = js.run_stream(L, key, np.where(mask[:, None], bad, 0), s0, mask=mask)
    np.testing.assert_allclose(st.mean, st2.mean)
    assert np.all(np.isfinite(tr)) and tr[7] == 0 and tr[9] == 0
    # under jit the scan cannot raise: it skips
    st3, tr3 = jax.jit(lambda xs: js.run_stream(L, key, xs, s0))(bad)
    np.testing.assert_allclose(st3.mean, st.mean)


def test_bad_shapes_and_empty_stream(data):
    L = mean_learner()
    key = jax.random.key(0)
    s0 = L.init(key, data[:5])
    with pytest.raises(ValueError, match="2-D"):
        js.run_stream(L, key, data[0], s0)
    st, tr = js.run_stream(L, key, data[:0], s0)
    np.testing.assert_allclose(st.mean, s0.mean)
    assert tr.shape == (0,)
    with pytest.raises(ValueError, match=r"\(B, T, d\)"):
        js.run_streams(L, jax.random.split(key, 2), data, s0)


def test_run_streams_equals_loop_and_vmaps_params(data):
    L = mean_learner()
    B = 4
    keys = jax.random.split(jax.random.key(1), B)
    xs = np.stack([np.roll(data, i, axis=0) for i in range(B)])
    params = jnp.arange(1.0, B + 1)
    states = js.init_streams(L, keys, xs[:, :5], params, params_batched=True)
    fin, tr = js.run_streams(L, keys, xs[:, 5:], states)
    for b in range(B):
        s, t = js.run_stream(L, keys[b], xs[b, 5:], L.init(keys[b], xs[b, :5], params[b]))
        np.testing.assert_allclose(fin.mean[b], s.mean, rtol=1e-6)
        np.testing.assert_allclose(tr[b], t, rtol=1e-6)
    # ragged streams through the mask
    mask = np.arange(55)[None] < np.array([10, 20, 30, 55])[:, None]
    fin_m, _ = js.run_streams(L, keys, xs[:, 5:], states, mask=mask)
    s, _ = js.run_stream(L, keys[0], xs[0, 5:15], L.init(keys[0], xs[0, :5], params[0]))
    np.testing.assert_allclose(fin_m.mean[0], s.mean, rtol=1e-6)


def test_chunked_equals_one_call_for_arrays_and_generators(data):
    L = mean_learner()
    key = jax.random.key(2)
    s0 = L.init(key, data[:5])
    st, tr = js.run_stream(L, key, data[5:], s0)
    st_c, res = js.run_stream_chunked(L, key, data[5:], s0, chunk_size=8, keep_losses=True)
    np.testing.assert_allclose(st_c.mean, st.mean, rtol=1e-6)
    np.testing.assert_allclose(res.losses, tr, rtol=1e-6)
    assert res.n_points == 55
    np.testing.assert_allclose(res.cumulative_loss, np.asarray(tr, np.float64).sum(), rtol=1e-5)
    gen = (data[5 + i:5 + i + 3] for i in range(0, 55, 3))
    st_g, res_g = js.run_stream_chunked(L, key, gen, s0, chunk_size=16)
    np.testing.assert_allclose(st_g.mean, st.mean, rtol=1e-6)
    assert res_g.losses is None and res_g.n_points == 55


class BigState(NamedTuple):
    table: jax.Array   # (R, R): a large leaf of which one row changes per round
    n: jax.Array


def big_learner(R=64):
    """Writes x's mean into row n % R of a large table (like a distance cache)."""
    def init(key, x0, params=None):
        return BigState(jnp.zeros((R, R), x0.dtype), jnp.asarray(0, jnp.int32))

    def update(key, s, x):
        row = jnp.full((R,), jnp.mean(x)) + jax.random.uniform(key, (R,), x.dtype)
        return BigState(s.table.at[s.n % R].set(row), s.n + 1), MeanInfo(jnp.sum(x), jnp.mean(row))

    return js.StreamLearner(init, update, lambda s, x: s.table[0], lambda s, x: jnp.sum(x), None)


def _eqns(jaxpr):
    """Every equation of a jaxpr, sub-jaxprs (scan, cond, pjit bodies) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (tuple, list)) else (v,)):
                sub = getattr(sub, "jaxpr", sub)
                if hasattr(sub, "eqns"):
                    yield from _eqns(sub)


def _selects_of_shape(fn, shape):
    jaxpr = jax.make_jaxpr(fn)().jaxpr
    prims = [e.primitive.name for e in _eqns(jaxpr)]
    assert "scan" in prims  # the walk does reach the scan body
    return [e for e in _eqns(jaxpr) if e.primitive.name == "select_n"
            and any(tuple(o.aval.shape[-2:]) == shape for o in e.outvars)]


def test_masked_step_never_selects_the_whole_state(data):
    """Issue 9 item 1: a round costs what `update` changes, not a pass over every leaf."""
    R = 64
    L = big_learner(R)
    key = jax.random.key(0)
    s0 = L.init(key, data[:5])
    mask = np.arange(55) % 4 != 1
    # concrete, finite, unmasked: no validity handling at all
    assert not _selects_of_shape(lambda: js.run_stream(L, key, data[5:], s0), (R, R))
    # a mask (or traced rows) on one stream: a cond, whose skip branch touches nothing
    assert not _selects_of_shape(lambda: js.run_stream(L, key, data[5:], s0, mask=mask), (R, R))
    jaxpr = jax.make_jaxpr(lambda xs: js.run_stream(L, key, xs, s0))(data[5:]).jaxpr
    assert "cond" in [e.primitive.name for e in _eqns(jaxpr)]
    assert not [e for e in _eqns(jaxpr) if e.primitive.name == "select_n"
                and any(tuple(o.aval.shape) == (R, R) for o in e.outvars)]
    # many streams, unmasked: exactly the selects of a bare vmapped scan of
    # `update` (vmap of the row write makes its own); with a mask, vmap turns
    # the cond into a select of every rewritten leaf: the documented cost
    keys = jax.random.split(key, 3)
    xs = np.stack([data[5:]] * 3)
    states = js.init_streams(L, keys, np.stack([data[:5]] * 3))

    def bare(k, x, s):
        def step(s, inp):
            s, info = L.update(jax.random.fold_in(k, inp[1]), s, inp[0])
            return s, info.loss
        return jax.lax.scan(step, s, (x, jnp.arange(x.shape[0])))

    n_bare = len(_selects_of_shape(lambda: jax.vmap(bare)(keys, jnp.asarray(xs), states), (R, R)))
    assert len(_selects_of_shape(lambda: js.run_streams(L, keys, xs, states), (R, R))) == n_bare
    n_masked = len(_selects_of_shape(lambda: js.run_streams(L, keys, xs, states, mask=np.stack([mask] * 3)),
                                     (R, R)))
    assert n_masked > n_bare


def test_validity_paths_agree_bit_for_bit(data):
    L = big_learner(8)
    key = jax.random.key(4)
    s0 = L.init(key, data[:5])
    fast = js.run_stream(L, key, data[5:], s0, trace="info")
    cond_all = js.run_stream(L, key, data[5:], s0, mask=jnp.ones(55, bool), trace="info")  # traced mask
    jitted = jax.jit(lambda xs: js.run_stream(L, key, xs, s0, trace="info"))(data[5:])
    chex.assert_trees_all_equal(fast, cond_all, jitted)
    mask = np.arange(55) % 3 != 0
    st_m, tr_m = js.run_stream(L, key, data[5:], s0, mask=mask, trace="info")
    # the reference: a Python loop that learns only the kept rows, with their global round keys
    s = s0
    for t in range(55):
        if mask[t]:
            s, info = L.update(jax.random.fold_in(key, t), s, jnp.asarray(data[5 + t]))
            np.testing.assert_array_equal(tr_m.noise[t], info.noise)
        else:
            assert tr_m.noise[t] == 0 and tr_m.loss[t] == 0
    chex.assert_trees_all_equal(st_m, s)


@pytest.mark.parametrize("masked", [False, True])
def test_update_traced_once_per_configuration(data, masked):
    """`run_stream` reuses its compiled scan: `update` is traced once, not per call."""
    chex.clear_trace_counter()  # chex counts per code location, across parametrisations
    L = big_learner(8)
    L = L._replace(update=chex.assert_max_traces(L.update, n=1))
    key = jax.random.key(0)
    s0 = L.init(key, data[:5])
    mask = (np.arange(55) % 2 == 0) if masked else None
    for i in range(3):
        js.run_stream(L, jax.random.key(i), np.roll(data[5:], i, axis=0), s0, mask=mask)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_chunked_from_files_equals_one_call(data, tmp_path, prefetch, capsys):
    L = mean_learner()
    key = jax.random.key(2)
    s0 = L.init(key, data[:5])
    st, tr = js.run_stream(L, key, data[5:], s0)
    np.save(tmp_path / "s.npy", data[5:])
    np.savetxt(tmp_path / "s.csv", data[5:].astype(np.float64), delimiter=",", fmt="%.9g")
    for src in (str(tmp_path / "s.npy"), tmp_path / "s.csv"):
        st_c, res = js.run_stream_chunked(L, key, src, s0, chunk_size=8, keep_losses=True, prefetch=prefetch,
                                          progress=True)
        chex.assert_trees_all_equal(st_c, st)  # float32 CSV round trip is exact with 9 digits
        np.testing.assert_array_equal(res.losses, tr)
    err = capsys.readouterr().err
    assert "100.0%" in err and "55/55" in err  # .npy: a bar with the known length


def test_chunked_errors_resume_from_generator(data, tmp_path):
    L = mean_learner()
    key = jax.random.key(2)
    s0 = L.init(key, data[:5])
    bad = data[5:].copy()
    bad[20, 0] = np.nan
    with pytest.raises(ValueError, match="row 16"):
        js.run_stream_chunked(L, key, iter([bad[:30], bad[30:]]), s0, chunk_size=8)
    st, tr = js.run_stream(L, key, data[5:], s0)
    ckpt = tmp_path / "c.ckpt"

    class Stop(Exception):
        pass

    def stop(n_done, state, losses):
        if n_done == 40:
            raise Stop

    blocks = lambda: (data[5 + i:5 + i + 7] for i in range(0, 55, 7))
    with pytest.raises(Stop):
        js.run_stream_chunked(L, key, blocks(), s0, chunk_size=8, checkpoint=ckpt, checkpoint_every=2,
                              on_chunk=stop, keep_losses=True)
    st_r, res = js.run_stream_chunked(L, key, blocks(), s0, chunk_size=8, checkpoint=ckpt, resume=True,
                                      keep_losses=True)
    chex.assert_trees_all_equal(st_r, st)
    np.testing.assert_array_equal(res.losses, tr)
    with pytest.raises(ValueError, match="chunk_size"):
        js.run_stream_chunked(L, key, blocks(), s0, chunk_size=5, checkpoint=ckpt, resume=True, keep_losses=True)


def test_run_streams_under_jit_equals_eager(data):
    L = mean_learner()
    keys = jax.random.split(jax.random.key(1), 3)
    xs = np.stack([np.roll(data, i, axis=0) for i in range(3)])
    states = js.init_streams(L, keys, xs[:, :5])
    eager = js.run_streams(L, keys, xs[:, 5:], states)
    jitted = jax.jit(lambda x, s: js.run_streams(L, keys, x, s))(xs[:, 5:], states)
    chex.assert_trees_all_close(eager, jitted, rtol=1e-6)


@pytest.mark.parametrize("factory,kw", [("slpc", dict(max_segments=6, history_size=64)),
                                        ("pacbo", dict(max_clusters=5, history_size=32, n_steps=8)),
                                        ("landmark_mds", dict(max_landmarks=6, buffer_size=32))])
def test_a_second_factory_call_compiles_nothing(factory, kw):
    """Two factory calls with equal arguments give the same learner (its
    functions are the same objects), so initialising and running a 100-point
    stream with the second compiles nothing: no compile request reaches XLA
    (counted with jax.monitoring) and `update` is traced once (chex)."""
    from jax import monitoring

    chex.clear_trace_counter()
    xs = js.datasets.make_cubic_stream(120, seed=0).astype(np.float32)
    key = jax.random.key(0)
    first = getattr(js, factory)(**kw)
    traced = chex.assert_max_traces(first.update, n=1)
    run = jax.jit(lambda s, x: js.run_stream(first._replace(update=traced), key, x, s))
    s0 = first.init(key, xs[:20])
    jax.block_until_ready(run(s0, xs[20:]))
    jax.block_until_ready(js.run_stream(first, key, xs[20:], s0))

    events = []
    listener = lambda name, **k: events.append(name)  # noqa: E731
    monitoring.register_event_listener(listener)
    try:
        second = getattr(js, factory)(**kw)
        assert second is first and second.update is first.update and second.config == first.config
        s1 = second.init(key, xs[:20])
        out = js.run_stream(second, key, xs[20:], s1)
        jax.block_until_ready(run(s1, xs[20:]))  # the counted update is not traced again
    finally:
        monitoring.unregister_event_listener(listener)
    assert "/jax/compilation_cache/compile_requests_use_cache" not in events, events
    chex.assert_trees_all_equal(out, js.run_stream(first, key, xs[20:], s0))
    # another configuration is another learner
    assert getattr(js, factory)(**dict(kw, **{next(iter(kw)): next(iter(kw.values())) + 1})) is not first
