"""One of two processes started by tests/test_sharding.py: joins a
jax.distributed job through a coordinator on 127.0.0.1 (CPU collectives:
gloo), runs init_streams / run_streams on the global devices and saves what
it got. Usage: _distributed_worker.py PROCESS_ID PORT OUT.npz"""
import sys

import numpy as np
import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{sys.argv[2]}", num_processes=2,
                           process_id=int(sys.argv[1]), initialization_timeout=60,
                           heartbeat_timeout_seconds=20, shutdown_timeout_seconds=20)

import jaxstream as js  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_core import big_learner, mean_learner  # noqa: E402


def main():
    assert jax.process_count() == 2 and len(jax.devices()) == 2 and len(jax.local_devices()) == 1
    rng = np.random.default_rng(0)  # the same inputs on every process
    B = 5
    X = rng.normal(size=(B, 30, 3)).astype(np.float32)
    mask = np.arange(25)[None] < rng.integers(3, 26, B)[:, None]
    keys = jax.random.split(jax.random.key(1), B)
    out = {}
    L = mean_learner()
    states = js.init_streams(L, keys, X[:, :5])  # NumPy on every process (gather=True)
    st, tr = js.run_streams(L, keys, X[:, 5:], states, mask=mask, trace="info")
    out.update(mean=st.mean, n=st.n, loss=tr.loss, noise=tr.noise)
    Lb = big_learner(8)
    sb, trb = js.run_streams(Lb, keys, X[:, 5:], js.init_streams(Lb, keys, X[:, :5]))
    out.update(table=sb.table, big_loss=trb)
    # gather=False: global arrays, each process holding its own streams
    B2 = 4
    k2 = keys[:B2]
    s2 = js.init_streams(L, k2, X[:B2, :5], gather=False)
    assert not s2.mean.is_fully_addressable
    g2, _ = js.run_streams(L, k2, X[:B2, 5:], s2, gather=False)
    shard, = g2.mean.addressable_shards
    out["local_rows"] = np.asarray(shard.index[0].indices(B2)[:2])
    out["local_mean"] = np.asarray(shard.data)
    np.savez(sys.argv[3], **out)
    print("WORKER OK", jax.process_index(), flush=True)


if __name__ == "__main__":
    main()
