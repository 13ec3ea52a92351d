"""slpc's initial state: the data's units, the first principal segment, the history of the initial
points; and the bytes a round needs (checked by `jaxstream.curves.learner.init`)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _ops
from .._checks import tree_nbytes
from . import cache, history
from .objective import Params
from .types import Config, State

Array = jax.Array


def _standardise(x_init):
    centre = jnp.mean(x_init, 0)
    scale = jnp.sqrt(jnp.mean(jnp.sum((x_init - centre) ** 2, 1)))
    return centre, scale


def _pca_segment(u):
    mean = u.mean(0)
    cov = _ops.matmul((u - mean).T, u - mean)
    _, vecs = jnp.linalg.eigh(cov)
    axis = vecs[:, -1]
    # eigh's sign is arbitrary (it can flip under a shift's rounding); orient
    # the axis so that the first point lies on the start side: equivariant.
    axis = jnp.where(_ops.matmul(u[0] - mean, axis) > 0, -axis, axis)
    proj = _ops.matmul(u - mean, axis)
    return jnp.stack([mean + proj.min() * axis, mean + proj.max() * axis])


ROUND_TEMP_VALUES = (56, 10)  # a round's temporaries per stored point: 56 + 10·d values (XLA:CPU, fitted)


def round_bytes(x_init: Array, params: Params, config: Config) -> int:
    """Bytes one round needs: the state read and the state written (exact) and the round's
    temporaries (`ROUND_TEMP_VALUES` per stored point; XLA:CPU's own figures are 56 values at
    d = 1, 72 at d = 2, 79 at d = 3, 105 at d = 10, 400 at d = 40). ``tests/test_nothing_silent.py`` checks this against
    the compiled round's memory analysis."""
    spec = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), jnp.result_type(a)), (x_init, params))
    return _round_bytes(spec, config)


@functools.lru_cache(maxsize=64)
def _round_bytes(spec, config: Config) -> int:
    x_init, params = spec
    shapes = jax.eval_shape(functools.partial(_initial_state, config=config), x_init, params)[0]
    a, b = ROUND_TEMP_VALUES
    d = x_init.shape[-1]
    return 2 * tree_nbytes(shapes) + (a + b * d) * (config.history_size + 1) * np.dtype(params.delta.dtype).itemsize


# One program, not JAX's op-by-op dispatch: eagerly, each of the few hundred operations below was
# compiled on its own (8 s and ~330 MiB of executables for a first `init`, CPU).
@functools.partial(jax.jit, static_argnums=(2,))
def _initial_state(x_init: Array, params: Params, config: Config):
    """`init`'s state before the offline fit, the raw scale and the initial segment's length
    (standardised), for the checks made on concrete values outside the program."""
    n0, d = x_init.shape
    H, V = config.history_size, config.max_segments + 1
    dt = params.delta.dtype
    centre, raw_scale = _standardise(x_init)
    scale = jnp.where(raw_scale > 0, raw_scale, 1.0)
    u = (x_init - centre) / scale
    ends_idx = jnp.round(_pca_segment(u) / params.delta).astype(jnp.int32)
    len0 = jnp.linalg.norm((ends_idx[1] - ends_idx[0]).astype(dt) * params.delta)
    vertex_idx = jnp.zeros((V, d), jnp.int32).at[:2].set(ends_idx).at[2:].set(ends_idx[1])
    hx = jnp.zeros((H + 1, d), dt).at[:n0].set(u)
    # Leave-one-out: each initial point against the others; on points arriving in order, each
    # point's residual across the trend of the TREND_WINDOW points around it (as in the rounds).
    others = ~jnp.eye(n0, dtype=bool)
    r0 = jax.vmap(history.nn_residual, in_axes=(0, None, 0))(u, u, others)
    R = history.NN_ROWS
    # the ring holds point n in row n mod R: the last min(n0, R) initial points
    last = jnp.arange(n0)[-R:]
    recent = jnp.zeros((R, d), dt).at[last % R].set(u[last])
    if n0 >= history.TREND_WINDOW:
        r0 = jnp.where(history.arrival_order(recent, jnp.asarray(n0, jnp.int32)) >= history.ORDERED,
                       history.trend_residuals(u) * history.NN_INFLATION, r0)
    hr = jnp.zeros((H + 1,), dt).at[:n0].set(r0)
    ht = jnp.zeros((H + 1,), jnp.int32).at[:n0].set(jnp.arange(n0, dtype=jnp.int32))
    he = jnp.zeros((H + 1,), dt).at[:n0].set(r0 / history.NN_INFLATION)
    pad = jnp.full((H - n0,), jnp.inf, dt)
    sr = jnp.concatenate([jnp.sort(r0), pad])
    se = jnp.concatenate([jnp.sort(r0 / history.NN_INFLATION), pad])
    state = State(vertex_idx, jnp.asarray(2, jnp.int32), hx, jnp.zeros((V - 1, H + 1), dt),
                  jnp.arange(V - 1, dtype=jnp.int32), hr, ht, he, recent, sr, se, jnp.asarray(n0, jnp.int32),
                  jnp.asarray(n0, jnp.int32), jnp.asarray(jnp.inf, dt), jnp.zeros((), dt), centre, scale, params)
    return state._replace(hist_D=cache.segment_table(hx, state.std_vertices, 2)), raw_scale, len0
