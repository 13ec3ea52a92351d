"""Run by tests/test_checkpoint_sharing.py: a chunked run on a checkpoint that, after its second
chunk, writes READY and waits (up to 120 s) for GO to exist, then finishes and saves its
cumulative loss to OUT.npy. Usage: _sharing_worker.py DATA.npy CHECKPOINT READY GO OUT"""
import os
import sys
import time

import jax
import numpy as np

import jaxstream as js


def main():
    data, ckpt, ready, go, out = sys.argv[1:6]
    L = js.landmark_mds(4, buffer_size=12)
    key = jax.random.key(5)
    x0 = jax.numpy.asarray(np.load(data)[:8])

    def wait(n_done, state, losses):
        if n_done == 2 * 16:
            open(ready, "w").close()
            end = time.time() + 120
            while not os.path.exists(go) and time.time() < end:
                time.sleep(0.05)

    _, res = js.run_stream_chunked(L, key, data, L.init(key, x0), chunk_size=16, checkpoint=ckpt,
                                   checkpoint_every=1, on_chunk=wait)
    np.save(out, np.array([res.cumulative_loss]))


if __name__ == "__main__":
    main()
