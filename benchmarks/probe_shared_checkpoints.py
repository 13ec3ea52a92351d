"""Two processes on one checkpoint path, many times: does any job fail or return a wrong result?

Each trial starts job A, then job B after a random delay (0-3 s), both with
``run_stream_chunked(..., checkpoint=P, resume=True)`` on the same path P, in
one of three pairings: the same key on different streams, different keys on
the same stream, the same key and stream. A job may finish (its cumulative
loss must equal an uninterrupted run of its own stream and key), or be refused
with `CheckpointBusy` (the other job holds P), `StreamMismatch` (P holds
another stream's progress) or the other-key ValueError. Anything else, or a
finished job with another result, is counted as a failure.

    python benchmarks/probe_shared_checkpoints.py [--trials 21]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

T, CHUNK = 320, 16


def _stream(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(T, 3)).astype(np.float32)


def worker(path: str, seed: int, key: int, out: str) -> None:
    import jax
    import jaxstream as js

    L = js.landmark_mds(4, buffer_size=12)
    xs = _stream(seed)
    k = jax.random.key(key)
    try:
        _, res = js.run_stream_chunked(L, k, xs, L.init(k, jax.numpy.asarray(xs[:8])), chunk_size=CHUNK,
                                       checkpoint=path, checkpoint_every=1, resume=True,
                                       on_chunk=lambda *a: time.sleep(0.02))
        result = dict(outcome="finished", loss=res.cumulative_loss)
    except Exception as e:  # every outcome is recorded and judged by the parent
        result = dict(outcome=type(e).__name__, message=str(e)[:300])
    with open(out, "w") as f:
        json.dump(result, f)


def reference(seed: int, key: int) -> float:
    import jax
    import jaxstream as js

    L = js.landmark_mds(4, buffer_size=12)
    xs = _stream(seed)
    k = jax.random.key(key)
    return js.run_stream_chunked(L, k, xs, L.init(k, jax.numpy.asarray(xs[:8])), chunk_size=CHUNK)[1].cumulative_loss


ALLOWED = {"CheckpointBusy", "StreamMismatch"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=21)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pairings = [("same key, other streams", (0, 0), (1, 0)), ("other keys, same stream", (0, 0), (0, 1)),
                ("same key and stream", (0, 0), (0, 0))]
    refs = {sk: reference(*sk) for _, a, b in pairings for sk in (a, b)}
    failures, counts = 0, {}
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            name, a, b = pairings[trial % 3]
            path = os.path.join(tmp, f"trial{trial}.ckpt")
            procs, outs = [], []
            for j, (seed, key) in enumerate((a, b)):
                if j:
                    time.sleep(rng.uniform(0.0, 3.0))
                outs.append(os.path.join(tmp, f"trial{trial}.{j}.json"))
                procs.append(subprocess.Popen([sys.executable, __file__, "--worker", path, str(seed), str(key),
                                               outs[-1]]))
            for p in procs:
                p.wait()
            for (seed, key), out in zip((a, b), outs):
                r = json.load(open(out))
                o = r["outcome"]
                ok = (o == "finished" and r["loss"] == refs[(seed, key)]) or o in ALLOWED or (
                    o == "ValueError" and "written for another key" in r.get("message", ""))
                failures += not ok
                counts[(name, o)] = counts.get((name, o), 0) + 1
                if not ok:
                    print(f"trial {trial} ({name}): FAILED {r}")
    for (name, o), n in sorted(counts.items()):
        print(f"{name:26s} {o:15s} {n}")
    print(f"{args.trials} trials, {2 * args.trials} jobs: {failures} failed or wrong")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main()
