"""A cost model of one round of each learner, from its compiled program, that needs no GPU.

    python benchmarks/cost_model.py [--learners slpc,pacbo,landmark_mds] [--batch 256]

For each learner at its defaults it compiles ``jit(update)`` for one stream and ``jit(vmap(update))``
for ``--batch`` streams on the local backend and reads from the optimised HLO and XLA's cost
analysis:

- ``kernels``: the operations of a round that run as separate device kernels (fusions, custom
  calls, reductions, gathers/scatters, sorts, dots, copies, and elementwise operations left unfused),
  counted through control flow: a while loop's body times its known trip count, the costlier branch
  of a conditional, called computations inlined. On a GPU a round of one stream is this chain of
  kernels, each paying a launch and a synchronisation, so this is its number of dependent steps.
- ``loops``: while loops executed per round, with ``unknown`` those whose trip count depends on the
  data (counted once);
- ``batched kernels``: the same count for the vmapped program (``vmap`` turns a branch taken by some
  streams into work for all, and loops run to the longest stream's trip count);
- ``bytes/stream`` and ``flops/stream``: XLA's cost analysis of the batched program divided by the
  batch (the memory a batched round moves per stream; a while loop's body is counted once by XLA);
- ``state bytes``: the learner's state per stream.

The prediction for a GPU takes two constants, a per-kernel cost ``t_k`` (launch and dependency
wait) and an effective memory bandwidth ``bw``:

    round time(B) = kernels(B) · t_k + B · bytes/stream / bw,   stream-updates/s = B / round time(B)

with kernels(1) the one-stream count and kernels(B > 1) the batched one.

Both are fitted on two measured cells (one stream and the largest batch of slpc, the learner
with the least data-dependent control flow) of the H100 table in ``benchmarks/README.md``
(``--calibration``), and the other cells are predictions to compare with the measurements. The
kernel count is read from this backend's HLO (XLA:CPU fuses less than XLA:GPU): the model is a
first-order one, to rank changes before a GPU is lent, not a simulator.
"""
from __future__ import annotations

import argparse
import re
import sys

import numpy as np

# H100 measurements (benchmarks/README.md, "GPU, third lease", 2026-11-27, code aedb696): stream-updates/s.
MEASURED_H100 = {
    ("slpc", 1): 8_257, ("slpc", 256): 1_073_282, ("slpc", 4096): 1_638_923, ("slpc", 32768): 1_823_653,
    ("pacbo", 1): 256, ("pacbo", 256): 52_031, ("pacbo", 4096): 242_511, ("pacbo", 32768): 303_111,
    ("landmark_mds", 1): 7_750, ("landmark_mds", 256): 252_015, ("landmark_mds", 4096): 8_013_292,
    ("landmark_mds", 32768): 2_934_640,
}

# Opcodes that do not launch work of their own on a GPU (layout, tuples, constants, parameters).
_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id",
         "replica-id", "opt-barrier", "iota", "broadcast", "reshape", "copy-start", "copy-done",
         "add-dependency", "domain"}
_CONTROL = {"while", "conditional", "call"}
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][a-z0-9\-]*)\((.*)$")
_HEAD = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")


def parse_hlo(text: str):
    """Computations of an HLO module text: {name: [(opcode, rest of line)]}, and the entry's name."""
    comps, entry, current = {}, None, None
    for line in text.splitlines():
        if current is None:
            m = _HEAD.match(line)
            if m and not line.startswith(" ") and not line.startswith("HloModule"):
                current = m.group(1)
                comps[current] = []
                if line.startswith("ENTRY"):
                    entry = current
            continue
        if line.startswith("}"):
            current = None
            continue
        m = _INSTR.match(line)
        if m:
            comps[current].append((m.group(2), m.group(3)))
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    return comps, entry


def _attr(rest: str, name: str):
    m = re.search(name + r"=%?([\w.\-]+)", rest)
    return m.group(1) if m else None


def count_round(comps, entry):
    """(kernels, loops executed, loops with an unknown trip count) of one execution of `entry`."""
    memo = {}

    def visit(name):
        if name in memo:
            return memo[name]
        kernels, loops, unknown = 0, 0, 0
        for opcode, rest in comps.get(name, []):
            if opcode == "while":
                body, cond = _attr(rest, "body"), _attr(rest, "condition")
                m = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', rest)
                n = int(m.group(1)) if m else 1
                bk, bl, bu = visit(body)
                ck, _, _ = visit(cond)
                kernels += n * (bk + ck)
                loops += 1 + n * bl
                unknown += (0 if m else 1) + n * bu
            elif opcode == "conditional":
                branches = re.search(r"branch_computations=\{([^}]*)\}", rest)
                names = [b.strip().lstrip("%") for b in branches.group(1).split(",")] if branches else \
                    [_attr(rest, "true_computation"), _attr(rest, "false_computation")]
                costs = [visit(b) for b in names if b]
                best = max(costs, default=(0, 0, 0))
                kernels += 1 + best[0]  # the predicate's read back, then the branch
                loops += best[1]
                unknown += best[2]
            elif opcode == "call":
                k, l, u = visit(_attr(rest, "to_apply"))
                kernels, loops, unknown = kernels + k, loops + l, unknown + u
            elif opcode not in _FREE:
                kernels += 1
        memo[name] = (kernels, loops, unknown)
        return memo[name]

    return visit(entry)


def _cost(compiled) -> dict:
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    return ca or {}


def analyse(name: str, batch: int) -> dict:
    import jax
    import jax.numpy as jnp
    import jaxstream as js
    from _timing import default_stream

    xs = default_stream(name, 300)
    learner = getattr(js, name)()
    key = jax.random.key(0)
    state = learner.init(key, xs[:20])
    state, _ = js.run_stream(learner, key, xs[20:276], state)  # a warm state, as throughput.py's cells
    x = jnp.asarray(xs[276])
    one = jax.jit(learner.update).lower(key, state, x).compile()
    comps, entry = parse_hlo(one.as_text())
    kernels, loops, unknown = count_round(comps, entry)
    states = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (batch,) + jnp.shape(a)), state)
    keys = jax.random.split(key, batch)
    xb = jnp.broadcast_to(x, (batch,) + x.shape)
    many = jax.jit(jax.vmap(learner.update)).lower(keys, states, xb).compile()
    kernels_b, loops_b, unknown_b = count_round(*parse_hlo(many.as_text()))
    cb = _cost(many)
    state_bytes = sum(np.asarray(a).nbytes if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key)
                      else 8 for a in jax.tree_util.tree_leaves(state))
    return dict(kernels=kernels, loops=loops, unknown=unknown, kernels_b=kernels_b, unknown_b=unknown_b,
                bytes=float(cb.get("bytes accessed", np.nan)) / batch, flops=float(cb.get("flops", np.nan)) / batch,
                state_bytes=state_bytes)


def calibrate(rows: dict, learner: str = "slpc") -> tuple[float, float]:
    """t_k (s) and bw (bytes/s) from the learner's one-stream and largest-batch H100 cells."""
    r = rows[learner]
    t1 = 1.0 / MEASURED_H100[(learner, 1)]
    bmax = max(b for (lrn, b) in MEASURED_H100 if lrn == learner)
    tb = bmax / MEASURED_H100[(learner, bmax)]
    # t1 = K1 t_k + bytes/bw;  tb = KB t_k + bmax bytes/bw  ->  two equations, two unknowns
    a = np.array([[r["kernels"], r["bytes"]], [r["kernels_b"], bmax * r["bytes"]]], np.float64)
    t_k, per_byte = np.linalg.solve(a, np.array([t1, tb]))
    return float(t_k), float(1.0 / per_byte)


def predict(row: dict, batch: int, t_k: float, bw: float) -> float:
    kernels = row["kernels"] if batch == 1 else row["kernels_b"]
    return batch / (kernels * t_k + batch * row["bytes"] / bw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", default="slpc,pacbo,landmark_mds")
    ap.add_argument("--batch", type=int, default=256, help="batch of the vmapped program analysed")
    ap.add_argument("--calibration", default="slpc", help="learner whose H100 cells fix t_k and bw")
    args = ap.parse_args(argv)
    import jax
    print(f"# jax {jax.__version__}, HLO of backend {jax.default_backend()}; per round, default configurations")
    rows = {}
    print(f"{'learner':<14}{'kernels':>9}{'loops':>7}{'unknown':>9}{'batched kernels':>17}{'unknown':>9}"
          f"{'bytes/stream':>14}{'flops/stream':>14}{'state bytes':>13}")
    for name in args.learners.split(","):
        r = rows[name] = analyse(name, args.batch)
        print(f"{name:<14}{r['kernels']:>9,}{r['loops']:>7}{r['unknown']:>9}{r['kernels_b']:>17,}{r['unknown_b']:>9}"
              f"{r['bytes']:>14,.0f}{r['flops']:>14,.0f}{r['state_bytes']:>13,}", flush=True)
    if args.calibration not in rows:
        return 0
    t_k, bw = calibrate(rows, args.calibration)
    print(f"\n# H100 model fitted on {args.calibration}'s B = 1 and largest-B cells: t_k = {t_k * 1e6:.2f} µs per "
          f"kernel, bw = {bw / 1e12:.2f} TB/s effective")
    print(f"{'learner':<14}{'B':>7}{'predicted/s':>14}{'measured/s':>13}{'pred/meas':>11}")
    for (name, b), measured in MEASURED_H100.items():
        if name not in rows:
            continue
        p = predict(rows[name], b, t_k, bw)
        fitted = " (fitted)" if name == args.calibration and b in (1, max(
            bb for (lrn, bb) in MEASURED_H100 if lrn == name)) else ""
        print(f"{name:<14}{b:>7,}{p:>14,.0f}{measured:>13,}{p / measured:>11.2f}{fitted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
