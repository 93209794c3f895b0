"""The batch runner: items in batches, each run by a worker process or by this one, results in order.

Ingest uses it twice: fio JSON files (the registry's row-extracting format) go in
batches to worker processes that extract their rows without polars, and small fio
logs go in batches that workers read and write as one Parquet part each. Workers are
forked from a clean server process (:func:`pool_context`), which is started early
(:func:`warm_pool`) so that its imports overlap with listing the study.

>>> batches = Batches(work, *args, workers=worker_count())   # doctest: +SKIP
>>> for item in items:
...     batches.add(item)                                    # full batches start at once
>>> results = batches.results()                              # in batch order
>>> batches.close()
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.pool import Pool

from benchlib.sources.registry import rows_format

#: Items per batch: fio JSON files per Parquet part, and small logs per part.
BATCH = 500
#: Worker processes take batches only for more items than this: below it, starting them
#: (about half a second of imports) costs more than they save (measured: 1,500 files break even).
PARALLEL_FROM = 3 * BATCH


def pool_context() -> multiprocessing.context.BaseContext:
    """Worker processes forked from a clean server process.

    Forking this process directly can deadlock: polars' thread pool may hold a
    lock at the moment of the fork, and the child waits on it for ever.
    """
    context = multiprocessing.get_context("forkserver")
    rows = rows_format()
    # the row extractor's module has no polars: the workers of fio logs import it when they need it
    context.set_forkserver_preload([rows.rows.extract.__module__] if rows is not None and rows.rows else [])
    return context


@contextmanager
def main_hidden() -> Iterator[None]:
    """Start worker processes without the caller's script.

    multiprocessing runs the ``__main__`` script again in every new process;
    the workers need only benchlib, and a user's script that calls
    :func:`ingest_study` without an ``if __name__ == "__main__":`` guard would
    otherwise run again in each worker and fail there.
    """
    names = vars(sys.modules["__main__"]) if "__main__" in sys.modules else {}
    saved = {k: names.pop(k) for k in ("__file__", "__spec__") if k in names}
    names["__spec__"] = None  # multiprocessing reads it; None and no __file__: nothing to run again
    try:
        yield
    finally:
        del names["__spec__"]
        names.update(saved)


def warm_pool() -> None:
    """Start the worker server (once per process), e.g. so that its imports overlap with hashing the files.

    Its workers run polars on one thread each: with this process they already
    fill every core, and polars' own threads only competed with the others
    (measured on 5,000 json+ files: median 2.41 s against 2.73 s).
    """
    from multiprocessing import forkserver

    pool_context()
    saved = os.environ.get("POLARS_MAX_THREADS")
    os.environ["POLARS_MAX_THREADS"] = "1"  # read by the server when it starts, not by this process's polars
    try:
        with main_hidden():
            forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["POLARS_MAX_THREADS"]
        else:
            os.environ["POLARS_MAX_THREADS"] = saved


def worker_count() -> int:
    """Worker processes beside this one, which runs batches too: one per further core.

    On two cores, one worker and this process took 0.64-0.71 s for the
    5,000-file bench where two workers and this process took 0.74-0.82 s.
    """
    return (os.cpu_count() or 1) - 1


@dataclass
class _Failed:
    """A batch whose worker raised."""

    error: BaseException


class Batches:
    """Items in batches of ``BATCH``, each one run as ``worker(batch, *args)``.

    With ``workers`` (worker processes, set when the work warrants starting
    them; this process is one more), full batches are queued as they fill; a
    feeder thread hands the next one to a worker process whenever one is free
    (starting them waits for the worker server's imports: the feeder waits,
    not this process, which goes on listing the study). When asked for the
    results, this process hands them back in batch order and, whenever no
    worker's result is waiting, runs a queued batch itself with ``here``
    (the last, partial one among them): whoever is free starts the next one.
    """

    def __init__(
        self, worker: Callable, *args: object, workers: int = 0, here: Callable | None = None, size: int | None = None
    ) -> None:
        self.worker, self.args, self.workers = worker, args, workers
        self.size = size or BATCH  # read now, not at import: a test may set BATCH
        self.here = here or (lambda batch: worker(batch, *args))  # how this process runs a batch
        self.pending: list = []
        self.batches: list[list] = []
        self.queued: queue.SimpleQueue = queue.SimpleQueue()
        self.done: queue.SimpleQueue = queue.SimpleQueue()  # (index, result or _Failed) from the workers
        self.free = threading.Semaphore(0)  # one per free worker, set when they start
        self.submitted = self.received = 0  # batches handed to workers, results back from them
        self.yielded = self.ran = 0  # results used, batches run here
        self.run_time = self.use_time = 0.0  # this process's mean seconds per batch: running one, using a result
        self.feeder: threading.Thread | None = None
        self.feed_error: BaseException | None = None
        self.stopping = False
        self.pool: Pool | None = None

    def add(self, item: object) -> None:
        """Add an item; a full batch is queued for a worker at once."""
        self.pending.append(item)
        if len(self.pending) == self.size and self.workers:
            if self.feeder is None:
                warm_pool()
                # two batches per worker: it starts the next while this process (busy) takes the last one's result
                self.free = threading.Semaphore(self.workers * 2)
                self.feeder = threading.Thread(target=self._feed, name="benchlib-batches", daemon=True)
                self.feeder.start()
            self._queue(self.pending)
            self.pending = []

    def _queue(self, batch: list) -> None:
        self.batches.append(batch)  # before its index is queued: the feeder reads it at once
        self.queued.put(len(self.batches) - 1)

    def _feed(self) -> None:
        try:
            with main_hidden():
                self.pool = pool_context().Pool(self.workers)  # every worker starts now
            while self.free.acquire() and not self.stopping:
                index = self.queued.get()
                if index is None or self.stopping:
                    return
                self.pool.apply_async(
                    self.worker,
                    (self.batches[index], *self.args),
                    callback=functools.partial(self._returned, index),
                    error_callback=lambda exc, index=index: self._returned(index, _Failed(exc)),
                )
                self.submitted += 1
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller of in_order()
            self.feed_error = exc

    def _returned(self, index: int, result: object) -> None:
        self.done.put((index, result))
        self.free.release()

    def _stop_feeder(self) -> None:
        """Stop handing batches on (at once, also when interrupted with batches still queued)."""
        if self.feeder is not None and self.feeder.is_alive():
            self.stopping = True
            self.free.release()  # if it waits for a free worker
            self.queued.put(None)  # if it waits for a batch
            self.feeder.join()

    def in_order(self) -> Iterator[tuple[int, object]]:
        """Every batch's result as ``(index, result)``, in batch order."""
        for i in range(0, len(self.pending), self.size):
            self._queue(self.pending[i : i + self.size])
        self.pending = []
        waiting: dict[int, object] = {}
        for index in range(len(self.batches)):
            while index not in waiting:
                got, result = self._next()
                if isinstance(result, _Failed):
                    raise result.error
                waiting[got] = result
            start = time.perf_counter()
            yield index, waiting.pop(index)
            self.yielded += 1
            self.use_time += (time.perf_counter() - start - self.use_time) / self.yielded
        self._stop_feeder()

    def _worth_running_here(self) -> bool:
        """Whether this process should run a queued batch rather than wait for a worker.

        Not while what it still has to do with the results (at the pace it
        has used them so far) would keep it busy after the workers are done:
        otherwise it runs batches early and writes results late while the
        workers sit idle.
        """
        if self.feeder is None or not self.feeder.is_alive() or not self.run_time:
            return True  # no workers (or they are gone), or no pace measured yet
        owed = (len(self.batches) - self.yielded) * self.use_time
        left = (self.queued.qsize() + self.submitted - self.received) * self.run_time / self.workers
        return owed + self.run_time <= left

    def _next(self) -> tuple[int, object]:
        """Return the next result.

        A worker's, else one this process makes from a queued batch, else the next to come.
        """
        while True:
            try:
                index, result = self.done.get_nowait()
            except queue.Empty:
                pass
            else:
                self.received += 1
                return index, result
            try:
                if not self._worth_running_here():
                    raise queue.Empty
                index = self.queued.get_nowait()
            except queue.Empty:
                try:
                    index, result = self.done.get(timeout=0.05)
                except queue.Empty:
                    lost = self.feeder is not None and not self.feeder.is_alive() and self.submitted == self.received
                    if self.feed_error is not None and lost and self.queued.empty():
                        raise self.feed_error from None  # the feeder died holding a batch
                    continue
                self.received += 1
                return index, result
            start = time.perf_counter()
            result = self.here(self.batches[index])
            self.ran += 1
            self.run_time += (time.perf_counter() - start - self.run_time) / self.ran
            return index, result

    def results(self) -> list:
        """Every batch's result, in order."""
        return [result for _, result in self.in_order()]

    def close(self) -> None:
        """Stop the feeder and the worker processes (every batch is back, or the caller failed)."""
        self._stop_feeder()
        if self.pool is not None:
            self.pool.terminate()  # every batch is back, or the ingest failed: either way nothing is left to wait for
            self.pool.join()
