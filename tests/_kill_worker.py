"""Run by tests/test_kill.py: a checkpointed chunked run (a save after every
chunk) that resumes from its checkpoint if there is one; the test SIGKILLs
it at a random moment, starts it again, and so on.
Usage: _kill_worker.py DATA.npy CHECKPOINT KEEP_LOSSES(0|1)
Prints "ready <n_done>" once the first chunk of this process is learned."""
import sys

import numpy as np
import jax

import jaxstream as js

CHUNK = 8


def learner():
    return js.landmark_mds(4, buffer_size=12)


def main():
    data, ckpt, keep = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    L = learner()
    key = jax.random.key(5)
    X = np.load(data)
    s0 = L.init(key, X[:8])
    told = []

    def ready(n_done, state, losses):
        if not told:
            print(f"ready {n_done}", flush=True)
            told.append(True)

    js.run_stream_chunked(L, key, X, s0, chunk_size=CHUNK, keep_losses=keep, checkpoint=ckpt,
                          checkpoint_every=1, resume=True, on_chunk=ready, prefetch=0)
    print("done", flush=True)


if __name__ == "__main__":
    main()
