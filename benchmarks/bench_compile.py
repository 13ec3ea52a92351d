"""Compile cost of each learner and of the command line's first run, each in a fresh process.

    python benchmarks/bench_compile.py [--learners slpc,pacbo,landmark_mds] [--repeats 2] [--no-cli]

For each learner at its defaults (a fresh interpreter per measurement, no persistent compilation
cache, so every program compiles):

- ``first 100 s``: building the learner, ``init`` on 20 points and the first ``run_stream`` of 100
  points, to the result on the host (what a user waits for; compilation dominates it);
- ``hlo lines`` / ``while``: the StableHLO text of ``jit(update)`` (its length and its while loops,
  a measure of how much program XLA must compile per round);
- ``update compile s``: ``jit(update).lower(...).compile()`` alone;
- ``100 pts warm s``: the same ``run_stream`` of 100 points once compiled (what the first call paid
  beyond compilation is the difference).

And for the command line (``--no-cli`` skips it): the wall time of ``jaxstream`` (slpc on the
seismic stream) and ``jaxstream cluster`` with ``JAXSTREAM_COMPILATION_CACHE=0``.
Each figure is the median of ``--repeats`` fresh processes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LEARNERS = ("slpc", "pacbo", "landmark_mds")

_CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
import jaxstream as js
name = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from _timing import default_stream
xs = default_stream(name, 120)
t_import = time.perf_counter() - t_start
key = jax.random.key(0)
t = time.perf_counter()
learner = getattr(js, name)()
state = learner.init(key, xs[:20])
state, losses = js.run_stream(learner, key, xs[20:], state)
np.asarray(losses)
first = time.perf_counter() - t
t = time.perf_counter()
s2, l2 = js.run_stream(learner, key, xs[20:], learner.init(key, xs[:20]))
np.asarray(l2)
warm = time.perf_counter() - t
lowered = jax.jit(learner.update).lower(key, state, jnp.asarray(xs[0]))
text = lowered.as_text()
t = time.perf_counter()
lowered.compile()
compile_s = time.perf_counter() - t
print(json.dumps(dict(import_s=t_import, first=first, warm=warm, lines=text.count("\n"),
                      whiles=text.count("stablehlo.while"), compile=compile_s)))
"""


def _env():
    env = dict(os.environ, JAXSTREAM_COMPILATION_CACHE="0", JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return env


def measure_learner(name: str, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", _CHILD, name, os.path.dirname(os.path.abspath(__file__))],
                             capture_output=True, text=True, env=_env(),
                             check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def measure_cli(args: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "jaxstream", *args, "--out", os.path.join(tmp, "out.png")],
                           capture_output=True, text=True, env=dict(_env(), MPLBACKEND="Agg"), check=True, cwd=tmp)
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", default=",".join(LEARNERS))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-cli", action="store_true")
    args = ap.parse_args(argv)
    import jax
    print(f"# jax {jax.__version__}, backend {os.environ.get('JAX_PLATFORMS', 'cpu')}, "
          f"{os.cpu_count()} CPUs, median of {args.repeats} fresh processes, no compilation cache")
    print(f"{'learner':<14}{'first 100 s':>12}{'100 pts warm s':>16}{'update compile s':>18}"
          f"{'hlo lines':>11}{'while':>7}{'import s':>10}")
    for name in args.learners.split(","):
        r = measure_learner(name, args.repeats)
        print(f"{name:<14}{r['first']:>12.2f}{r['warm']:>16.3f}{r['compile']:>18.2f}{int(r['lines']):>11,}"
              f"{int(r['whiles']):>7}{r['import_s']:>10.2f}", flush=True)
    if not args.no_cli:
        for cmd in (["curve"], ["cluster"]):
            print(f"jaxstream {cmd[0]:<8} (no disk cache): {measure_cli(cmd, args.repeats):.1f} s wall", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
