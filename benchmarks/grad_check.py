"""Pathwise derivatives against central differences, case by case (issue 56, item 3).

For each learner and each optional stage on and off, over many (stream, key, direction)
cases in float64: reverse mode (``jax.grad`` of the stream's total prequential loss with
respect to the data and the hyper-parameters, no `static_trip_counts` context), forward mode (``jax.jvp``) and a
central difference along a random direction (v in the data, u in the numeric
hyper-parameters, both at once). A case counts as *smooth* when the
difference quotients at h = 1e-5 and 1e-6 agree to 1e-6 relative (otherwise a discrete
choice flips inside the step and no derivative rule can match it). On every smooth case
the script prints the largest relative gap |grad·v − CD| / |CD| and |grad·v − jvp| / |jvp|.

Each configuration compiles its three programs once (about a minute on a 2-core CPU);
the cases then cost milliseconds each.

Usage: python benchmarks/grad_check.py [--cases 24] [--learners slpc pacbo landmark_mds]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxstream as js  # noqa: E402
from jaxstream import differentiable as D  # noqa: E402

H = (1e-5, 1e-6)
SMOOTH_RTOL = 1e-6


def _cubic(case, T):
    return js.datasets.make_cubic_stream(T, seed=1000 + case)


def _route(case, T):
    return js.datasets.make_route_stream(T, seed=1000 + case)


def _shuffled(case, T):
    return js.datasets.make_route_stream(T, seed=1000 + case, ordered=False)


def _drift(case, T):
    return js.datasets.make_drifting_curve_stream(T, shift=(0.0, 1.5), seed=1000 + case)


def configurations():
    """(learner name, option label, learner, stream maker, T) for every stage on and off."""
    s = dict(max_segments=6, history_size=32)
    p = dict(max_clusters=6, history_size=64, n_steps=30)
    m = dict(max_landmarks=6, n_components=2)
    return {
        "slpc": [
            ("default, cubic", js.slpc(**s), _cubic, 50),
            ("default, route in order (head path)", js.slpc(**s), _route, 60),
            ("end_lead=0, route in order", js.slpc(**s, end_lead=0.0), _route, 60),
            ("memory=15 (drift offset), drifting arc", js.slpc(**s, memory=15.0), _drift, 60),
            ("memory=15, drift_offset=False", js.slpc(**s, memory=15.0, drift_offset=False), _drift, 60),
            ("global_moves=1 (8: every vertex), route shuffled", js.slpc(**s, global_moves=1), _shuffled, 60),
            ("default, route shuffled", js.slpc(**s), _shuffled, 60),
            ("init='pca'", js.slpc(**s, init="pca"), _cubic, 50),
        ],
        "pacbo": [
            ("default", js.pacbo(**p), _cubic, 59),
            ("split_guard=False", js.pacbo(**p, split_guard=False), _cubic, 59),
            ("tracking=False", js.pacbo(**p, tracking=False), _cubic, 59),
            ("provisional_size=0", js.pacbo(**p, provisional_size=0), _cubic, 59),
            ("preset='paper'", js.pacbo(**p, preset="paper"), _cubic, 59),
            ("default, drifting arc", js.pacbo(**p), _drift, 59),
            ("tracking=False, drifting arc", js.pacbo(**p, tracking=False), _drift, 59),
        ],
        "landmark_mds": [
            ("default", js.landmark_mds(**m), _cubic, 40),
            ("align=True", js.landmark_mds(**m, align=True), _cubic, 40),
            ("weighted=True", js.landmark_mds(**m, weighted=True), _cubic, 40),
            ("embed_arrivals=True", js.landmark_mds(**m, embed_arrivals=True), _cubic, 40),
            ("eps0=0.05, density_shift=0.5, weighted", js.landmark_mds(**m, eps0=0.05, density_shift=0.5, weighted=True),
             _cubic, 40),
        ],
    }


def embedding_energy(learner):
    """A smooth function of landmark MDS's final embedding (its loss does not read the
    embedding): the squared norm of the embedded landmarks, invariant to the axes' signs."""
    return lambda state: jnp.sum(jnp.where(state.is_landmark[:, None], learner.predict(state, state.points), 0.0) ** 2)


def _split_params(params):
    """(floating leaves, rebuild(floating leaves) -> params): integer parameters stay fixed."""
    leaves, treedef = jax.tree.flatten(params)
    is_float = [jnp.issubdtype(jnp.asarray(p).dtype, jnp.floating) for p in leaves]
    floats = [jnp.asarray(p) for p, f in zip(leaves, is_float) if f]

    def rebuild(new):
        it = iter(new)
        return jax.tree.unflatten(treedef, [next(it) if f else p for p, f in zip(leaves, is_float)])
    return floats, rebuild


def check(learner, make, T, n_cases):
    """Compile once, run `n_cases` cases; returns (smooth, worst CD gap, worst jvp gap, compile s).

    Each case moves the data along v and the finite floating-point hyper-parameters along u
    (each scaled by its magnitude; those at 0 or not finite stay) together."""
    pen = embedding_energy(learner) if learner.config.name == "landmark_mds" else None
    p0, rebuild = _split_params(learner.params)
    loss = lambda y, k, p: D.stream_loss(learner, k, y, rebuild(p), penalty=pen)
    f = jax.jit(loss)
    g = jax.jit(jax.grad(loss, argnums=(0, 2)))
    t = jax.jit(lambda x, k, p, v, u: jax.jvp(lambda y, q: loss(y, k, q), (x, p), (v, u))[1])
    smooth, worst_cd, worst_jvp, t_compile = 0, 0.0, 0.0, None
    for case in range(n_cases):
        xs = jnp.asarray(make(case, T))
        key = jax.random.key(case)
        rng = np.random.default_rng(case)
        v = jnp.asarray(rng.normal(size=xs.shape))
        # a parameter at 0 sits on the edge of its range (eps0, drift_level = 0: a one-sided
        # derivative); non-finite ones are "off" (radius=nan) or infinite (memory=inf)
        u = [jnp.where(jnp.isfinite(p) & (p != 0), rng.normal(size=p.shape) * jnp.abs(p), 0.0).astype(p.dtype)
             for p in p0]
        t0 = time.perf_counter()
        gx, gp = g(xs, key, p0)
        gv = float(jnp.vdot(gx, v) + sum(jnp.vdot(a, b) for a, b in zip(gp, u)))
        tv = float(t(xs, key, p0, v, u))
        if t_compile is None:
            t_compile = time.perf_counter() - t0
        step = lambda h: [a + h * b for a, b in zip(p0, u)]
        cd = [float((f(xs + h * v, key, step(h)) - f(xs - h * v, key, step(-h))) / (2 * h)) for h in H]
        if not np.isfinite(gv) or not np.isfinite(tv):
            return smooth, np.inf, np.inf, t_compile
        if abs(cd[0] - cd[1]) > SMOOTH_RTOL * abs(cd[1]):
            continue
        smooth += 1
        worst_cd = max(worst_cd, abs(gv - cd[1]) / abs(cd[1]))
        worst_jvp = max(worst_jvp, abs(gv - tv) / max(abs(tv), 1e-300))
    return smooth, worst_cd, worst_jvp, t_compile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--learners", nargs="+", default=["slpc", "pacbo", "landmark_mds"])
    ap.add_argument("--only", help="run only the configurations whose label contains this text")
    a = ap.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, float64, {a.cases} cases per configuration")
    print(f"{'learner':13s} {'options':42s} {'smooth':>7s} {'max |grad.v-CD|/|CD|':>21s} "
          f"{'max |grad.v-jvp|/|jvp|':>23s} {'compile s':>10s}")
    confs = configurations()
    for name in a.learners:
        for label, learner, make, T in confs[name]:
            if a.only and a.only not in label:
                continue
            smooth, wcd, wjvp, tc = check(learner, make, T, a.cases)
            print(f"{name:13s} {label:42s} {smooth:3d}/{a.cases:<3d} {wcd:21.2e} {wjvp:23.2e} {tc:10.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
