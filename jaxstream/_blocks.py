"""Reading a stream in blocks for `jaxstream.run_stream_chunked`: files, fixed-size chunks, a
running digest of the rows, and a reader thread. Public names are re-exported by `jaxstream`."""
from __future__ import annotations

import hashlib
import os
import queue
import threading
from typing import Iterable, Optional, Sequence

import numpy as np
import jax

from ._checks import host_array


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
    first_line = skip_header + 1
    width = None
    with open(path) as f:
        for _ in range(skip_header):
            next(f, None)
        while True:
            lines = list(itertools.islice(f, block_rows))
            if not lines:
                return
            try:
                block = np.loadtxt(lines, delimiter=delimiter, usecols=columns, ndmin=2)
            except ValueError as e:
                raise ValueError(f"{path}, lines {first_line}-{first_line + len(lines) - 1}: {e}") from None
            if columns is None and block.size:
                if width is None:
                    width = block.shape[1]
                elif block.shape[1] != width:
                    raise ValueError(f"{path}: the rows from line {first_line} on have {block.shape[1]} cells; the "
                                     f"first rows have {width}")
            first_line += len(lines)
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
    if np.ma.isMaskedArray(xs):  # masked entries become NaN (the NaN policy applies), not their fill values
        return host_array(xs, "xs")
    return xs


class StreamMismatch(ValueError):
    """A resume on a stream other than the one the checkpoint has learned."""

    __module__ = "jaxstream"


class _RowHash:
    """A running BLAKE2b digest of a stream's rows as float64 values, in order: the same rows give
    the same digest however they are split into blocks, and whatever their dtype."""

    def __init__(self):
        self._h = hashlib.blake2b(digest_size=16)

    def update(self, rows) -> None:
        self._h.update(np.ascontiguousarray(rows, dtype=np.float64).tobytes())

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _check_skipped(hasher, expected, skip):
    if hasher is not None and expected is not None and hasher.hexdigest() != expected:
        raise StreamMismatch(f"the first {skip} rows of this stream differ from the rows the checkpoint has "
                             "learned: resume with the stream the checkpoint was written for (or start "
                             "again with resume=False or another checkpoint path)")


def _iter_chunks(xs, chunk_size, skip: int = 0, hasher: Optional[_RowHash] = None,
                 expected: Optional[str] = None):
    """Chunks of exactly chunk_size rows (the last one shorter), after `skip` rows.

    With a `hasher`, every row read goes into it in order (the skipped rows,
    then each chunk before it is yielded); once the skipped rows are hashed,
    the digest must equal `expected` (when given).

    Raises:
      ValueError: the stream ends before row `skip` (a resume on a shorter
        stream than the checkpoint's), or a block's dimension differs from
        the first block's.
      StreamMismatch: the skipped rows are not the checkpoint's.
    """
    if isinstance(xs, (np.ndarray, jax.Array)):
        if skip > xs.shape[0]:
            raise ValueError(f"the stream has {xs.shape[0]} rows but the checkpoint has already learned {skip}: "
                             "resume with the stream the checkpoint was written for")
        if hasher is not None:
            for i in range(0, skip, chunk_size):
                hasher.update(xs[i:min(i + chunk_size, skip)])
            _check_skipped(hasher, expected, skip)
        for i in range(skip, xs.shape[0], chunk_size):
            chunk = np.asarray(xs[i:i + chunk_size])
            if hasher is not None:
                hasher.update(chunk)
            yield chunk
        return
    n_skip = skip
    buf = []
    n = 0
    seen = 0
    dim = None
    for block in xs:
        block = host_array(block, f"xs (the block starting at row {seen})")
        if block.ndim == 1:
            block = block[None]
        if block.ndim == 2:
            if dim is None:
                dim = block.shape[1]
            elif block.shape[1] != dim:
                raise ValueError(f"the block starting at row {seen} has {block.shape[1]} columns; the stream's "
                                 f"first block has {dim}: every block must have the same dimension")
        seen += block.shape[0] if block.ndim else 0
        if skip:
            drop = min(skip, block.shape[0])
            if hasher is not None:
                hasher.update(block[:drop])
            block, skip = block[drop:], skip - drop
            if not skip:
                _check_skipped(hasher, expected, n_skip)
        buf.append(block)
        n += block.shape[0]
        while n >= chunk_size:
            cat = np.concatenate(buf)
            if hasher is not None:
                hasher.update(cat[:chunk_size])
            yield cat[:chunk_size]
            rest = cat[chunk_size:]
            buf, n = ([rest] if rest.shape[0] else []), rest.shape[0]
    if skip:
        raise ValueError(f"the stream ended {skip} rows before the checkpoint's position: resume with the stream "
                         "the checkpoint was written for")
    if n:
        last = np.concatenate(buf)
        if hasher is not None:
            hasher.update(last)
        yield last


class _Prefetcher:
    """Reads and prepares the next chunks in a thread while the device runs
    the current one; at most `depth` prepared chunks wait (bounded memory)."""

    _END = object()

    def __init__(self, gen, depth: int):
        self._q = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        # `with jax.enable_x64(True):` is thread-local: the reader prepares (checks, casts) the
        # chunks in the caller's precision, as the main thread would
        x64 = bool(jax.config.jax_enable_x64)
        self._thread = threading.Thread(target=self._work, args=(gen, x64), daemon=True)
        self._thread.start()

    def _work(self, gen, x64: bool):
        try:
            with jax.enable_x64(x64):
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
