"""Streams longer than memory: `run_stream_chunked` (chunks through one compiled scan,
a reader thread, a progress bar, checkpoints and resume) and the block readers."""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, NamedTuple, Optional, Union

import numpy as np

from ._blocks import (StreamMismatch, _iter_chunks, _n_rows, _Prefetcher, _RowHash, _source, read_csv_blocks,  # noqa: F401
                      read_npy_blocks)
from ._checks import check_points
from ._core import PRNGKey, State, StreamLearner, _compiled_scan, _trace_loss
from ._sharding import _key_parts

__all__ = ["ChunkedResult", "StreamMismatch", "run_stream_chunked", "read_npy_blocks", "read_csv_blocks"]


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


class _Job(NamedTuple):
    """A run of `run_stream_chunked`: its learner, key and options, fixed from its start."""

    learner: StreamLearner
    key: PRNGKey
    chunk_size: int
    keep_losses: bool
    nonfinite: str
    progress: bool
    prefetch: int
    checkpoint: Optional[str]
    checkpoint_every: int
    resume: bool
    on_chunk: Optional[Callable]


class _Done(NamedTuple):
    """How far a run got: the state after its last complete chunk, the rows it learned (``n_done``,
    of which ``n_valid`` finite), their cumulative loss and the digest of those rows (None without
    a checkpoint). A run replaces it in one assignment, once a chunk is complete."""

    state: State
    n_done: int
    n_valid: int
    total: float
    stream: Optional[str]


def _save_checkpoint(job: _Job, done: _Done, kept) -> None:
    """One atomic file: the state, the progress (metadata, with the digest of the rows learned)
    and, with kept losses, the losses so far (`checkpoint.save`'s ``arrays``), so a kill at any
    instant leaves the previous or the next set."""
    from . import checkpoint
    meta = dict(n_done=done.n_done, n_valid=done.n_valid, cumulative_loss=done.total, key=_key_fingerprint(job.key),
                keep_losses=kept is not None, chunk_size=job.chunk_size, stream_blake2b=done.stream)
    arrays = None
    if kept is not None:
        arrays = dict(losses=np.concatenate(kept) if kept else np.zeros(0, np.float32))
    checkpoint.save(job.checkpoint, job.learner, done.state, metadata=meta, arrays=arrays,
                    allow_missing_config=job.learner.config is None)


def _resume(job: _Job):
    """``(done, kept, stream)`` from the checkpoint a run of `run_stream_chunked` wrote (`stream`:
    the digest of the rows it learned; None before 0.4.6)."""
    from . import checkpoint as ckpt
    path, learner = job.checkpoint, job.learner
    state, meta, arrays = ckpt.load_with_arrays(path, learner, allow_missing_config=learner.config is None)
    if "n_done" not in meta or "key" not in meta:
        raise ValueError(f"{path} is a jaxstream checkpoint but not one written by run_stream_chunked "
                         "(its metadata has no progress)")
    if meta.get("key") != _key_fingerprint(job.key):
        raise ValueError(f"{path} was written for another key")
    if meta.get("keep_losses") != job.keep_losses:
        raise ValueError(f"{path} was written with keep_losses={meta.get('keep_losses')}")
    if meta.get("chunk_size") != job.chunk_size:
        raise ValueError(f"{path} was written with chunk_size={meta.get('chunk_size')}: resume with "
                         "the same chunk size")
    n_done, n_valid, total = int(meta["n_done"]), int(meta["n_valid"]), float(meta["cumulative_loss"])
    kept = None
    if job.keep_losses:
        losses = arrays.get("losses")
        legacy = f"{path}.losses.npy"
        if losses is None and os.path.exists(legacy):  # a checkpoint from before the losses moved into it
            losses = np.load(legacy, allow_pickle=False)
        if losses is None or losses.ndim != 1 or losses.shape[0] != n_done:
            got = "none" if losses is None else f"{losses.shape[0] if losses.ndim == 1 else losses.shape}"
            raise ValueError(f"{path} holds the state after {n_done} rows but losses for {got}; the kept losses "
                             "cannot be restored: resume with keep_losses=False or start again")
        kept = [np.asarray(losses)]
    stream = meta.get("stream_blake2b")
    return _Done(state, n_done, n_valid, total, stream), kept, stream


def _key_fingerprint(key) -> list:
    kd, _ = _key_parts(key)
    return np.asarray(kd).ravel().tolist()


def _attach_progress(err, job: _Job, done: _Done, kept, saved_at: int, saving: bool, start: float) -> None:
    """On an error mid-stream (the source raised, a chunk was refused, a callback or Ctrl-C): save the
    progress so far to the checkpoint (when there is one and it is behind) and attach it to the error,
    so nothing learned is lost and the caller knows exactly how far the run got."""
    n_done, checkpoint = done.n_done, job.checkpoint
    if kept is not None:
        kept[:] = [np.concatenate(kept)[:n_done]] if kept else []
    losses = (kept[0] if kept else np.zeros(0)) if kept is not None else None
    try:
        err.jaxstream_state = done.state
        err.jaxstream_result = ChunkedResult(done.n_valid, done.total, losses, time.perf_counter() - start)
    except AttributeError:  # an exception type that takes no attributes: the note and the checkpoint remain
        pass
    where = ""
    if checkpoint is not None:
        if n_done != saved_at and not saving:
            try:
                _save_checkpoint(job, done, kept)
                saved_at = n_done
            except Exception as save_err:  # the original error matters more
                where = f"; saving that state to {checkpoint} failed too ({save_err})"
        if saved_at == n_done:
            where = f"; that state is in {checkpoint} (run again with resume=True to go on)"
        elif not where:
            where = f"; {checkpoint} holds the state after {saved_at} rows"
    note = (f"run_stream_chunked: {n_done} row(s) of the stream were learned before this error{where}; the "
            "state after them is attached as err.jaxstream_state and the totals as err.jaxstream_result")
    if hasattr(err, "add_note"):
        err.add_note(note)


# Wide signature: a public driver's keyword options, each documented.
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
      checkpoint: a file to save the state to every `checkpoint_every` chunks,
        at the end, and when the run stops on an error
        (`jaxstream.checkpoint.save`). One file holds the whole set: the
        state, the progress (rows done, cumulative loss, key, chunk size, a
        digest of the rows learned) and, with ``keep_losses=True``, the
        losses so far; it is replaced atomically, so a kill at any instant
        (inside a save too) leaves the previous or the next checkpoint, never
        a mix. The run holds the checkpoint's `jaxstream.checkpoint.lock`
        throughout: a second job on the same path is refused
        (`CheckpointBusy`) instead of overwriting or deleting the first one's
        files. Temporary files left by a killed save are deleted when a run
        starts.
      checkpoint_every: chunks between checkpoints.
      resume: when `checkpoint` exists, start from it: load the state, skip
        the rows it has already learned and go on; the result equals one
        uninterrupted call bit for bit. The checkpoint must come from the same
        learner configuration, key, chunk size and `keep_losses`, and the
        stream's first rows must be the ones it has learned (the digest is
        compared; checkpoints from before 0.4.6 have none and are not
        checked) (ValueError otherwise); `state` is then ignored.
      on_chunk: optional callback ``(n_done, state, chunk_losses)`` after each
        chunk (e.g. to log).

    Returns:
      ``(final_state, ChunkedResult)``.

    Raises:
      ValueError: bad arguments, a chunk with non-finite rows (with
        ``nonfinite="raise"``) or values out of range (`check_points`), a
        checkpoint that does not match, or a stream shorter than the
        checkpoint's position or other than the one it learned
        (`StreamMismatch`, a ValueError).
      jaxstream.checkpoint.CheckpointBusy: another live process is running
        on the same checkpoint path.

    Whatever stops the run after it started (the source iterator raising, a
    refused chunk, `on_chunk`, Ctrl-C), the error is re-raised with what was
    learned before it: ``err.jaxstream_state`` (the state after the last
    complete chunk), ``err.jaxstream_result`` (a `ChunkedResult` of the rows
    learned) and a note saying how many rows that is; with `checkpoint`,
    that state is saved first, so ``resume=True`` goes on from there.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1; got {checkpoint_every}")
    if nonfinite not in ("raise", "skip"):
        raise ValueError(f"nonfinite must be 'raise' or 'skip'; got {nonfinite!r}")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint=<path>")
    job = _Job(learner, key, chunk_size, keep_losses, nonfinite, progress, prefetch, checkpoint, checkpoint_every,
               resume, on_chunk)
    if checkpoint is None:
        return _run_chunks(job, xs, state)
    from . import checkpoint as ckpt
    with ckpt.lock(checkpoint):  # one writer per checkpoint: a second job is refused, not interleaved
        ckpt._remove_temporaries(checkpoint)  # left by a process killed inside a save
        return _run_chunks(job, xs, state)


def _prepared(xs, chunk_size, n_done, hasher, expected, nonfinite):
    """The chunks after row ``n_done``, checked and padded: ``(chunk, valid or None, n, digest)``, with
    ``valid`` None for a full chunk of finite rows and ``digest`` the rows' digest through this chunk."""
    offset = n_done
    for chunk in _iter_chunks(_source(xs, chunk_size), chunk_size, skip=n_done, hasher=hasher, expected=expected):
        digest = hasher.hexdigest() if hasher is not None else None
        chunk = np.asarray(check_points(chunk, f"xs (the chunk starting at row {offset})",
                                        allow_nonfinite=(nonfinite == "skip")))
        n = chunk.shape[0]
        offset += n
        valid = np.isfinite(chunk).all(axis=1)
        if n == chunk_size and valid.all():
            yield chunk, None, n, digest
            continue
        if n < chunk_size:
            chunk = np.concatenate([chunk, np.zeros((chunk_size - n, chunk.shape[1]), chunk.dtype)])
            valid = np.concatenate([valid, np.zeros(chunk_size - n, bool)])
        yield chunk, valid, n, digest


def _run_chunks(job: _Job, xs, state):
    """`run_stream_chunked`'s loop, once its arguments are checked and the checkpoint is locked."""
    start = time.perf_counter()
    run_full = _compiled_scan(job.learner.update, _trace_loss, True, False, False)
    run_masked = _compiled_scan(job.learner.update, _trace_loss, False, True, False)
    hasher = _RowHash() if job.checkpoint is not None else None
    # `stream`: the digest of the rows learned so far
    done = _Done(state, 0, 0, 0.0, hasher.hexdigest() if hasher is not None else None)
    kept = [] if job.keep_losses else None
    expected = None
    if job.resume and os.path.exists(job.checkpoint):
        done, kept, expected = _resume(job)
    saved_at = done.n_done
    gen = _prepared(xs, job.chunk_size, done.n_done, hasher, expected, job.nonfinite)
    chunks = _Prefetcher(gen, job.prefetch) if job.prefetch > 0 else gen
    bar = _Progress(_n_rows(xs), done.n_done) if job.progress else None
    n_chunks = 0
    saving = False
    try:
        for chunk, valid, n, digest in chunks:
            run = run_full if valid is None else run_masked
            new_state, losses = run(job.key, chunk, done.state, valid, done.n_done)
            losses = np.asarray(losses)[:n]  # waits for this chunk; the reader is already on the next
            if kept is not None:
                kept.append(losses)  # trimmed to n_done should an interrupt fall before the next line
            # the run's progress moves in one statement, once the chunk is complete
            done, n_chunks = _Done(new_state, done.n_done + n, done.n_valid + (n if valid is None else int(valid[:n].sum())),
                                   done.total + float(losses.astype(np.float64).sum()), digest), n_chunks + 1
            if job.checkpoint is not None and n_chunks % job.checkpoint_every == 0:
                saving = True
                _save_checkpoint(job, done, kept)
                saving, saved_at = False, done.n_done
            if job.on_chunk is not None:
                job.on_chunk(done.n_done, done.state, losses)
            if bar is not None:
                bar.update(done.n_done, done.total)
    except StreamMismatch:
        raise  # nothing was learned from this stream: no progress to save or attach
    except BaseException as e:
        _attach_progress(e, job, done, kept, saved_at, saving, start)
        raise
    finally:
        if isinstance(chunks, _Prefetcher):
            chunks.close()
        if bar is not None:
            bar.close()
    if job.checkpoint is not None and (done.n_done != saved_at or not os.path.exists(job.checkpoint)):
        _save_checkpoint(job, done, kept)
    losses = np.concatenate(kept) if kept else (np.zeros(0) if kept is not None else None)
    return done.state, ChunkedResult(done.n_valid, done.total, losses, time.perf_counter() - start)
