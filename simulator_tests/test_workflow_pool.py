"""The workflow's one process pool: results by position, submission order, callbacks, lost workers."""

from __future__ import annotations

import os

import pytest

from devkit.workflow import pool


def _square(x: int) -> int:
    return x * x


def _die_on_negative(x: int) -> int:
    if x < 0:
        os._exit(3)  # the worker process dies without a Python exception
    return x * x


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_come_back_in_item_order_whatever_the_submission_order(jobs):
    items = [3, 1, 4, 1, 5]
    started, done = [], []
    out = pool.run_jobs(
        _square, items, jobs=jobs, order=[4, 2, 0, 1, 3], on_start=started.append, on_done=done.append
    )
    assert out == [9, 1, 16, 1, 25]
    assert sorted(done) == sorted(out)
    assert sorted(started) == sorted(items)
    if jobs == 1:  # in process: started strictly in the given order
        assert started == [5, 4, 3, 1, 1]


def test_order_must_be_a_permutation():
    with pytest.raises(ValueError, match="permutation"):
        pool.run_jobs(_square, [1, 2], jobs=1, order=[0, 0])


def test_a_lost_worker_becomes_a_result_through_on_failure():
    lost = []

    def on_failure(item, exc, what):
        lost.append((item, what))
        return -1

    out = pool.run_jobs(_die_on_negative, [2, -1], jobs=2, on_failure=on_failure)
    assert out[1] == -1 and (-1, "worker failed") in lost
    assert out[0] in (4, -1)  # the healthy job may share the broken pool's fate, never a wrong value


def test_a_lost_worker_raises_without_on_failure():
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises(BrokenProcessPool):
        pool.run_jobs(_die_on_negative, [-1, 2], jobs=2)


def test_default_jobs_is_at_least_one():
    assert pool.default_jobs() >= 1
