"""Run by tests/test_sharding.py in a subprocess with 4 forced host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4). Exits non-zero on any
mismatch.

What is compared: each device runs, on its block of B/4 streams, the very
program `run_streams(..., devices=1)` runs on that block, so the sharded
result equals the single-device results of the blocks bit for bit. It also
equals one device running all B streams at once, bit for bit, for learners
whose arithmetic is IEEE-exact at any array width (landmark_mds, checked
below). Learners that call exp/log/erfinv (PACBO, the running mean's
`jax.random.normal` noise) can differ there by ulps:
XLA:CPU evaluates transcendental functions with a SIMD polynomial on full
vector lanes and a scalar routine on the remainder, so a value depends on
where it falls in the array (see `run_streams`)."""
import sys

import numpy as np
import jax
import jax.numpy as jnp

import jaxstream as js

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_core import big_learner, mean_learner  # noqa: E402


def assert_equal(a, b, what):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b), what
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True), f"{what}: results differ"
    print("ok", what, flush=True)


def blockwise(fn, n_dev, B, *batched):
    """`fn(*blocks)` on one device for each device's block of the padded batch."""
    B_pad = -(-B // n_dev) * n_dev
    pad = lambda a: np.concatenate([np.asarray(a), np.repeat(np.asarray(a)[:1], B_pad - B, 0)])
    padded = [jax.tree_util.tree_map(pad, a) for a in batched]
    k = B_pad // n_dev
    outs = [fn(*[jax.tree_util.tree_map(lambda a: a[i * k:(i + 1) * k], a) for a in padded])
            for i in range(n_dev)]
    return jax.tree_util.tree_map(lambda *o: np.concatenate([np.asarray(v) for v in o])[:B], *outs)


def assert_close(a, b, what):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6, err_msg=what)
    print("ok (close)", what, flush=True)


def main():
    devs = jax.devices()
    assert len(devs) == 4, devs
    rng = np.random.default_rng(0)
    for B in (8, 6):  # 6: padded to 8 with copies of stream 0, padding dropped
        keys = jax.random.split(jax.random.key(1), B)
        X = rng.normal(size=(B, 45, 3)).astype(np.float32)
        # running mean with per-stream params (params_batched), masks, non-finite rows
        L = mean_learner()
        params = jnp.arange(1.0, B + 1)
        s1 = js.init_streams(L, keys, X[:, :5], params, params_batched=True, devices=1)
        s4 = js.init_streams(L, keys, X[:, :5], params, params_batched=True)
        assert_equal(s1, s4, f"init_streams B={B}")
        assert s4.mean.shape[0] == B
        if B % 4 == 0:
            assert len(s4.mean.sharding.device_set) == 4 and s4.mean.sharding.spec[0] == "streams"
        kd = jax.random.key_data(keys)
        wrap = jax.random.wrap_key_data
        run1 = lambda kd, x, s, **kw: js.run_streams(L, wrap(kd), x, s, devices=1, **kw)
        r4 = js.run_streams(L, keys, X[:, 5:], s4)
        assert_equal(r4, blockwise(run1, 4, B, kd, X[:, 5:], s1), f"run_streams B={B}")
        # its noise is jax.random.normal (erfinv: a transcendental), so only close
        assert_close(r4, js.run_streams(L, keys, X[:, 5:], s1, devices=1), f"run_streams B={B} vs one batch")
        mask = np.arange(40)[None] < rng.integers(5, 41, B)[:, None]
        Xn = X[:, 5:].copy()
        Xn[0, 3, 1] = np.nan
        kw = dict(trace="info", nonfinite="skip", step_offset=7)
        assert_equal(js.run_streams(L, keys, Xn, s4, mask=mask, **kw),
                     blockwise(lambda kd, x, s, m: run1(kd, x, s, mask=m, **kw), 4, B, kd, Xn, s1, mask),
                     f"run_streams masked B={B}")
        if B != 8:
            continue  # the padded batch: init and runs above suffice
        # two of the four devices, chosen explicitly
        assert_equal(js.run_streams(L, keys, X[:, 5:], s1, devices=[devs[3], devs[1]]),
                     blockwise(run1, 2, B, kd, X[:, 5:], s1), f"devices=[3, 1] B={B}")
        # a learner with a large leaf rewritten one row per round
        Lb = big_learner(16)
        sb = js.init_streams(Lb, keys, X[:, :5], devices=1)
        assert_equal(js.run_streams(Lb, keys, X[:, 5:], sb),
                     blockwise(lambda kd, x, s: js.run_streams(Lb, wrap(kd), x, s, devices=1), 4, B, kd, X[:, 5:], sb),
                     f"big state B={B}")
    # a real learner
    L = js.landmark_mds(4, buffer_size=12)
    B = 8
    keys = jax.random.split(jax.random.key(2), B)
    X = rng.normal(size=(B, 40, 3)).astype(np.float32)
    s1 = js.init_streams(L, keys, X[:, :8], devices=1)
    s4 = js.init_streams(L, keys, X[:, :8])
    assert_equal(s1, s4, "landmark_mds init")
    kd = jax.random.key_data(keys)
    assert_equal(js.run_streams(L, keys, X[:, 8:], s4, trace="info"),
                 blockwise(lambda kd, x, s: js.run_streams(L, jax.random.wrap_key_data(kd), x, s, devices=1,
                                                           trace="info"), 4, B, kd, X[:, 8:], s1),
                 "landmark_mds run")
    assert_equal(js.run_streams(L, keys, X[:, 8:], s4, trace="info"),
                 js.run_streams(L, keys, X[:, 8:], s1, devices=1, trace="info"), "landmark_mds run vs one batch")
    print("ALL OK")


if __name__ == "__main__":
    main()
