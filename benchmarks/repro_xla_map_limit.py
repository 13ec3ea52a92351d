"""Minimal reproducer, JAX alone: XLA:CPU dies once a process holds vm.max_map_count mappings.

    python benchmarks/repro_xla_map_limit.py [--programs 1000] [--clear-at 0.5]

Each jitted program below has 40 sorts; XLA:CPU loads every kernel's code and data into memory
mappings of their own (~135 for one such program), and JAX keeps every compiled program in its
caches. Linux allows a process ``vm.max_map_count`` mappings (65,530 by default); past that XLA's
JIT linker cannot map the next program's sections, logs

    execution_engine.cc:54] LLVM compilation error: Cannot allocate memory

and the process dies inside ``backend_compile_and_load``: a segmentation fault, or an abort with
"LLVM ERROR: Unable to allocate section memory!". Measured (jaxlib 0.10.2, XLA:CPU, Linux
x86-64, 2 cores): a segfault after program 480, at 65,347 mappings, in about 7 minutes; as root,
``sysctl -w vm.max_map_count=6000`` shows it in seconds. ``--clear-at S`` calls
``jax.clear_caches()`` whenever the mappings pass S times the limit — the workaround the package
applies (`jaxstream._caches`) — and the same loop then runs to the end.
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp


def maps_in_use() -> int:
    with open("/proc/self/maps", "rb") as f:
        return f.read().count(b"\n")


def program(k: int):
    def f(x):
        out = []
        for i in range(40):
            x = jnp.sort(x * 1.5 + (i + k))
            out.append(jnp.cumsum(x))
        return out
    return jax.jit(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--clear-at", type=float, default=None, help="empty JAX's caches above this share of the limit")
    args = ap.parse_args()
    with open("/proc/sys/vm/max_map_count") as f:
        limit = int(f.read())
    print(f"# jax {jax.__version__}, backend {jax.default_backend()}, vm.max_map_count {limit}", flush=True)
    x = jnp.ones(64)
    kept = []  # the programs stay referenced, as a long-lived process's learners do
    for k in range(args.programs):
        used = maps_in_use()
        if args.clear_at is not None and used > args.clear_at * limit:
            jax.clear_caches()
            kept.clear()
        if k % 10 == 0:
            print(f"program {k}: {used:,} mappings", flush=True)
        kept.append(program(k))  # a new program each time: its own compilation
        jax.block_until_ready(kept[-1](x))
    print(f"# {args.programs} programs compiled, {maps_in_use():,} mappings at the end")


if __name__ == "__main__":
    main()
