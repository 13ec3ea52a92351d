"""Run by tests/test_sharding.py: a long chunked run that checkpoints every 2
chunks and is killed (SIGKILL, no clean-up) right after chunk 5.
Usage: _chunked_worker.py DATA.npy CHECKPOINT"""
import os
import signal
import sys

import jax

import jaxstream as js


def main():
    data, ckpt = sys.argv[1], sys.argv[2]
    L = js.landmark_mds(4, buffer_size=12)
    key = jax.random.key(5)
    x0 = jax.numpy.asarray(__import__("numpy").load(data)[:8])

    def die(n_done, state, losses):
        if n_done == 5 * 16:
            os.kill(os.getpid(), signal.SIGKILL)

    js.run_stream_chunked(L, key, data, L.init(key, x0), chunk_size=16, keep_losses=True,
                          checkpoint=ckpt, checkpoint_every=2, on_chunk=die)
    sys.exit("not killed")


if __name__ == "__main__":
    main()
