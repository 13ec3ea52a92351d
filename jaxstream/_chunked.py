"""Streams longer than memory: `run_stream_chunked` (chunks through one compiled scan,
a reader thread, a progress bar, checkpoints and resume) and the block readers."""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Callable, Iterable, NamedTuple, Optional, Sequence, Union

import numpy as np
import jax

from ._checks import check_points
from ._core import PRNGKey, State, StreamLearner, _compiled_scan, _trace_loss
from ._sharding import _key_parts

__all__ = ["ChunkedResult", "run_stream_chunked", "read_npy_blocks", "read_csv_blocks"]


class ChunkedResult(NamedTuple):
    """Summary of `run_stream_chunked`.

    Attributes:
      n_points: number of valid points learned (skipped non-finite rows excluded).
      cumulative_loss: sum of prequential losses (float64 on the host).
      losses: per-point prequential losses (NumPy) when ``keep_losses=True``,
        else None.
      seconds: wall time spent, compile included.
    """

    n_points: int
    cumulative_loss: float
    losses: Optional[np.ndarray]
    seconds: float


def read_npy_blocks(path, block_rows: int = 65536) -> Iterable[np.ndarray]:
    """Blocks of rows of a (T, d) ``.npy`` file, read through a memory map
    (host memory: one block, whatever the file's size)."""
    arr = np.load(path, mmap_mode="r")
    if arr.ndim != 2:
        raise ValueError(f"{path}: expected a (T, d) array; got shape {arr.shape}")
    for i in range(0, arr.shape[0], block_rows):
        yield np.array(arr[i:i + block_rows])


def read_csv_blocks(path, block_rows: int = 65536, *, delimiter: str = ",", skip_header: int = 0,
                    columns: Optional[Sequence[int]] = None) -> Iterable[np.ndarray]:
    """Blocks of rows of a numeric CSV file (host memory: one block).

    Args:
      path: the file.
      block_rows: rows parsed at a time.
      delimiter: column separator.
      skip_header: lines to skip at the top.
      columns: indices of the columns to keep (default: all).
    """
    import itertools
    with open(path) as f:
        for _ in range(skip_header):
            next(f, None)
        while True:
            lines = list(itertools.islice(f, block_rows))
            if not lines:
                return
            block = np.loadtxt(lines, delimiter=delimiter, usecols=columns, ndmin=2)
            yield block


def _n_rows(xs) -> Optional[int]:
    if isinstance(xs, (np.ndarray, jax.Array)):
        return int(xs.shape[0])
    if isinstance(xs, (str, os.PathLike)) and str(xs).endswith(".npy"):
        return int(np.load(xs, mmap_mode="r").shape[0])
    return None


def _source(xs, chunk_size):
    if isinstance(xs, (str, os.PathLike)):
        path = str(xs)
        if path.endswith(".npy"):
            return read_npy_blocks(path, chunk_size)
        if path.endswith((".csv", ".txt", ".tsv")):
            return read_csv_blocks(path, chunk_size, delimiter="\t" if path.endswith(".tsv") else ",")
        raise ValueError(f"{path}: a path must name a .npy or .csv/.tsv/.txt file")
    return xs


def _iter_chunks(xs, chunk_size, skip: int = 0):
    """Chunks of exactly chunk_size rows (the last one shorter), after `skip` rows."""
    if isinstance(xs, (np.ndarray, jax.Array)):
        for i in range(skip, xs.shape[0], chunk_size):
            yield np.asarray(xs[i:i + chunk_size])
        return
    buf = []
    n = 0
    for block in xs:
        block = np.asarray(block)
        if block.ndim == 1:
            block = block[None]
        if skip:
            drop = min(skip, block.shape[0])
            block, skip = block[drop:], skip - drop
        buf.append(block)
        n += block.shape[0]
        while n >= chunk_size:
            cat = np.concatenate(buf)
            yield cat[:chunk_size]
            rest = cat[chunk_size:]
            buf, n = ([rest] if rest.shape[0] else []), rest.shape[0]
    if skip:
        raise ValueError(f"the stream ended {skip} rows before the checkpoint's position")
    if n:
        yield np.concatenate(buf)


class _Prefetcher:
    """Reads and prepares the next chunks in a thread while the device runs
    the current one; at most `depth` prepared chunks wait (bounded memory)."""

    _END = object()

    def __init__(self, gen, depth: int):
        self._q = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, args=(gen,), daemon=True)
        self._thread.start()

    def _work(self, gen):
        try:
            for item in gen:
                if not self._put(item):
                    return
            self._put(self._END)
        except BaseException as e:  # handed to the consumer, raised there
            self._put(e)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        while True:
            item = self._q.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)


class _Progress:
    def __init__(self, total: Optional[int], start_done: int):
        self.total, self.t0, self.start_done = total, time.perf_counter(), start_done

    def update(self, done: int, loss: float):
        rate = (done - self.start_done) / max(time.perf_counter() - self.t0, 1e-9)
        if self.total:
            frac = min(done / self.total, 1.0)
            bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
            eta = (self.total - done) / rate if rate > 0 else float("inf")
            line = (f"\r[{bar}] {100 * frac:5.1f}% {done:,}/{self.total:,} points, {rate:,.0f}/s, "
                    f"ETA {eta:,.0f} s, cumulative loss {loss:.4g}")
        else:
            line = f"\r[jaxstream] {done:,} points, {rate:,.0f}/s, cumulative loss {loss:.4g}"
        print(line, end="", file=sys.stderr, flush=True)

    def close(self):
        print(file=sys.stderr, flush=True)


def _save_checkpoint(path, learner, state, key, n_done, n_valid, total, kept, chunk_size):
    from . import checkpoint
    if kept is not None:  # the losses so far, beside the checkpoint, written first and atomically
        tmp = f"{path}.losses.tmp.npy"
        np.save(tmp, np.concatenate(kept) if kept else np.zeros(0, np.float32))
        os.replace(tmp, f"{path}.losses.npy")
    meta = dict(n_done=n_done, n_valid=n_valid, cumulative_loss=total, key=_key_fingerprint(key),
                keep_losses=kept is not None, chunk_size=chunk_size)
    checkpoint.save(path, learner, state, metadata=meta, allow_missing_config=learner.config is None)


def _key_fingerprint(key) -> list:
    kd, _ = _key_parts(key)
    return np.asarray(kd).ravel().tolist()


def run_stream_chunked(learner: StreamLearner, key: PRNGKey, xs, state: State, *,
                       chunk_size: int = 4096, keep_losses: bool = False, nonfinite: str = "raise",
                       progress: bool = False, prefetch: int = 2,
                       checkpoint: Optional[Union[str, os.PathLike]] = None, checkpoint_every: int = 16,
                       resume: bool = False,
                       on_chunk: Optional[Callable[[int, State, np.ndarray], None]] = None):
    """Run a very long stream chunk by chunk with bounded device and host memory.

    One compiled scan of ``chunk_size`` rounds is reused for every chunk (a
    chunk with a non-finite row, and the last, shorter one, use a second,
    masked scan), and round keys are ``fold_in(key, t)`` with the global t, so
    the result equals one `run_stream` call bit for bit. A reader thread
    prepares the next chunks while the device runs the current one (JAX
    dispatch is asynchronous), so reading a file overlaps with compute.

    Memory: on the device, the state plus one chunk (and its losses); on the
    host, at most ``prefetch + 2`` chunks (with ``keep_losses=False``).

    Args:
      xs: a (T, d) array; a path to a ``.npy`` file (memory-mapped: a file
        larger than memory is fine) or to a numeric ``.csv``/``.tsv`` file
        without header (parsed block by block; use `read_csv_blocks` for
        headers or column choices); or any iterable of (n_i, d) blocks (e.g.
        a generator reading a database), so the whole stream never has to be
        in memory.
      chunk_size: rounds per compiled scan.
      keep_losses: keep every prequential loss on the host (O(T) host memory);
        by default only their running sum is kept.
      nonfinite: ``"raise"`` (default: ValueError naming the chunk) or
        ``"skip"`` rows with NaN/inf.
      progress: draw a progress bar on stderr (with percentage and ETA when
        the length is known: arrays and ``.npy`` files).
      prefetch: chunks read ahead by the reader thread (0: read in the main
        thread, no overlap).
      checkpoint: a file to save the state to every `checkpoint_every` chunks
        and at the end (`jaxstream.checkpoint.save`, atomic: a kill leaves the
        previous checkpoint intact). With ``keep_losses=True`` the losses so
        far go to ``<checkpoint>.losses.npy``.
      checkpoint_every: chunks between checkpoints.
      resume: when `checkpoint` exists, start from it: load the state, skip
        the rows it has already learned and go on; the result equals one
        uninterrupted call bit for bit. The checkpoint must come from the same
        learner configuration, key, chunk size and `keep_losses`
        (ValueError otherwise); `state` is then ignored.
      on_chunk: optional callback ``(n_done, state, chunk_losses)`` after each
        chunk (e.g. to log).

    Returns:
      ``(final_state, ChunkedResult)``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1; got {checkpoint_every}")
    if nonfinite not in ("raise", "skip"):
        raise ValueError(f"nonfinite must be 'raise' or 'skip'; got {nonfinite!r}")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint=<path>")
    run_full = _compiled_scan(learner.update, _trace_loss, True, False, False)
    run_masked = _compiled_scan(learner.update, _trace_loss, False, True, False)
    start = time.perf_counter()
    n_done, n_valid, total = 0, 0, 0.0
    kept = [] if keep_losses else None
    if resume and os.path.exists(checkpoint):
        from . import checkpoint as ckpt
        state, meta = ckpt.load(checkpoint, learner, allow_missing_config=learner.config is None)
        if meta.get("key") != _key_fingerprint(key):
            raise ValueError(f"{checkpoint} was written for another key")
        if meta.get("keep_losses") != keep_losses:
            raise ValueError(f"{checkpoint} was written with keep_losses={meta.get('keep_losses')}")
        if meta.get("chunk_size") != chunk_size:
            raise ValueError(f"{checkpoint} was written with chunk_size={meta.get('chunk_size')}: resume with "
                             "the same chunk size")
        n_done, n_valid, total = int(meta["n_done"]), int(meta["n_valid"]), float(meta["cumulative_loss"])
        if keep_losses:
            kept = [np.load(f"{checkpoint}.losses.npy")]
            if kept[0].shape[0] != n_done:
                raise ValueError(f"{checkpoint}.losses.npy does not match the checkpoint")

    def prepared():
        offset = n_done
        for chunk in _iter_chunks(_source(xs, chunk_size), chunk_size, skip=n_done):
            chunk = np.asarray(check_points(chunk, f"xs (the chunk starting at row {offset})",
                                            allow_nonfinite=(nonfinite == "skip")))
            n = chunk.shape[0]
            offset += n
            valid = np.isfinite(chunk).all(axis=1)
            if n == chunk_size and valid.all():
                yield chunk, None, n
                continue
            if n < chunk_size:
                chunk = np.concatenate([chunk, np.zeros((chunk_size - n, chunk.shape[1]), chunk.dtype)])
                valid = np.concatenate([valid, np.zeros(chunk_size - n, bool)])
            yield chunk, valid, n

    chunks = _Prefetcher(prepared(), prefetch) if prefetch > 0 else prepared()
    bar = _Progress(_n_rows(xs), n_done) if progress else None
    n_chunks = 0
    try:
        for chunk, valid, n in chunks:
            if valid is None:
                state, losses = run_full(key, chunk, state, None, n_done)
            else:
                state, losses = run_masked(key, chunk, state, valid, n_done)
            losses = np.asarray(losses)[:n]  # waits for this chunk; the reader is already on the next
            total += float(losses.astype(np.float64).sum())
            if keep_losses:
                kept.append(losses)
            n_done += n
            n_valid += n if valid is None else int(valid[:n].sum())
            n_chunks += 1
            if checkpoint is not None and n_chunks % checkpoint_every == 0:
                _save_checkpoint(checkpoint, learner, state, key, n_done, n_valid, total, kept, chunk_size)
            if on_chunk is not None:
                on_chunk(n_done, state, losses)
            if bar is not None:
                bar.update(n_done, total)
    finally:
        if isinstance(chunks, _Prefetcher):
            chunks.close()
        if bar is not None:
            bar.close()
    if checkpoint is not None and n_chunks % checkpoint_every:
        _save_checkpoint(checkpoint, learner, state, key, n_done, n_valid, total, kept, chunk_size)
    losses = np.concatenate(kept) if keep_losses and kept else (np.zeros(0) if keep_losses else None)
    return state, ChunkedResult(n_valid, total, losses, time.perf_counter() - start)
