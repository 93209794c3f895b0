"""The parallel batch runner (benchlib.ingest.batches): batches run by worker processes and by this one,
results whole and in order, workers on one polars thread, and everything here when processes cannot start."""

from __future__ import annotations

import os

import polars as pl
import pytest

from benchlib.ingest import batches as runner
from benchlib.ingest.batches import Batches, pool_context, warm_pool


def test_workers_run_polars_on_one_thread_and_this_process_is_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers already fill two cores; polars threads in each only competed with the other worker."""
    from concurrent.futures import ProcessPoolExecutor

    monkeypatch.delenv("POLARS_MAX_THREADS", raising=False)
    warm_pool()
    assert "POLARS_MAX_THREADS" not in os.environ
    with ProcessPoolExecutor(1, mp_context=pool_context()) as pool:
        assert pool.submit(pl.thread_pool_size).result() == 1


def test_batches_run_everywhere_and_come_back_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches queued while the workers start, run by workers and by this process, return whole and in order."""
    for _ in range(3):  # many small batches: many hand-overs between threads
        _queue_and_collect(Batches(sum, workers=2, size=3), 3)  # two workers and this process


def test_this_process_runs_a_batch_only_while_it_would_not_keep_the_workers_waiting() -> None:
    """It must use every result (build and write the frames) itself.

    Taking batches from an idle-to-be worker only delays that.
    """

    class Feeding:
        def is_alive(self) -> bool:
            return True

    batches = Batches(sum, workers=1)
    batches.batches = [[0]] * 10
    for _ in range(4):
        batches.queued.put(0)
    assert batches._worth_running_here()  # no pace known yet: take one and measure
    batches.feeder = Feeding()  # type: ignore[assignment]
    batches.submitted, batches.received = 2, 0  # two with the worker, four queued: 6 x 50 ms left there
    batches.run_time, batches.use_time = 0.05, 0.02
    batches.yielded = 0  # ten results still to use: 200 ms, and 50 ms more to run one here
    assert batches._worth_running_here()  # 250 ms <= 300 ms
    batches.use_time = 0.03  # 300 + 50 ms: this process would finish after the worker
    assert not batches._worth_running_here()
    batches.yielded = 6  # four results left to use: 120 + 50 ms
    assert batches._worth_running_here()
    batches.feeder = None  # no workers: this process runs everything
    batches.use_time = 1.0
    assert batches._worth_running_here()


def _queue_and_collect(batches: object, size: int) -> None:
    import time

    items = 400 * size + 2
    try:
        for item in range(size):
            batches.add(item)
        deadline = time.monotonic() + 60
        while (
            not batches.submitted and batches.feed_error is None and time.monotonic() < deadline
        ):  # workers up: the feeder hands on as they come
            time.sleep(0.01)
        for item in range(size, items):
            batches.add(item)
        results = batches.results()
    finally:
        batches.close()
    assert results == [sum(range(start, min(start + size, items))) for start in range(0, items, size)]


def test_batches_all_run_here_when_worker_processes_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoProcesses:
        def Pool(self, processes: int) -> None:  # noqa: N802 -- multiprocessing's name
            raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(runner, "pool_context", NoProcesses)
    monkeypatch.setattr(runner, "warm_pool", lambda: None)
    _queue_and_collect(Batches(sum, workers=2, size=3), 3)
