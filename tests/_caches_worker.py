"""Run by tests/test_caches.py: builds and runs N configurations of the learners named in KINDS
(comma-separated: slpc, pacbo, landmarks) in one process, and prints the resident memory (MiB)
after each configuration, one number per line. Usage: _caches_worker.py N KINDS [keep-jax]"""
import sys

import jax
import numpy as np

import jaxstream as js


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def build(kind: str, i: int):
    if kind == "slpc":
        return js.slpc(max_segments=4 + i, history_size=24)
    if kind == "pacbo":
        return js.pacbo(3 + i, 16, 5)
    return js.landmark_mds(3 + i, buffer_size=64)


def main():
    n, kinds = int(sys.argv[1]), sys.argv[2].split(",")
    if sys.argv[3:] == ["keep-jax"]:
        js.set_cache_size(js.cache_size(), clear_jax=False)
    xs = jax.numpy.asarray(np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32))
    key = jax.random.key(0)
    for i in range(n):
        L = build(kinds[i % len(kinds)], i)
        _, losses = js.run_stream(L, key, xs[20:], L.init(key, xs[:20]))
        assert np.isfinite(np.asarray(losses)).all()
        print(f"{rss_mib():.0f}", flush=True)


if __name__ == "__main__":
    main()
