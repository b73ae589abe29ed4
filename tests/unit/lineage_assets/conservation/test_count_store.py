"""The count store's per-hop lock holds across processes: a read-modify-write of a hop's state never interleaves."""

import multiprocessing
import time

import pytest

from lineage_assets.conservation.count_store import Busy, CountStore


def _bump(path: str, times: int) -> None:
    store = CountStore(path)
    for _ in range(times):
        with store.locked("hop"):
            now = int(store.facts("t").get("n", "0"))
            time.sleep(0.002)  # another process would read the same value here without the lock
            store.put_facts("t", {"n": str(now + 1)})


def test_two_processes_updating_one_hop_lose_no_update(tmp_path):
    path = str(tmp_path / "counts.sqlite")
    CountStore(path)
    workers = [multiprocessing.get_context("spawn").Process(target=_bump, args=(path, 40)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    assert CountStore(path).facts("t") == {"n": "80"}


def test_marks_keep_the_first_and_the_newest(tmp_path):
    store = CountStore(tmp_path / "c.sqlite")
    store.add_marks("orders", 0, [(o, o // 2) for o in range(0, 1000, 10)], keep=5)
    assert store.first_mark("orders", 0) == (0, 0)
    assert store.mark_below("orders", 0, 955) == (950, 475)
    assert store.mark_below("orders", 0, 500) == (0, 0)  # the marks between were dropped: resume from the first


def _hold(path: str, seconds: float) -> None:
    with CountStore(path).locked("hop"):
        open(path + ".held", "w").close()  # the test waits for this before it tries
        time.sleep(seconds)


def test_a_lock_with_a_timeout_gives_up_and_says_the_hop_is_busy(tmp_path):
    path = str(tmp_path / "counts.sqlite")
    CountStore(path)
    holder = multiprocessing.get_context("spawn").Process(target=_hold, args=(path, 5))
    holder.start()
    try:
        store = CountStore(path)
        deadline = time.monotonic() + 30
        while not (tmp_path / "counts.sqlite.held").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(Busy), store.locked("hop", timeout=0.3):
            pass
    finally:
        holder.join(30)
    with CountStore(path).locked("hop", timeout=0.3):  # free again
        pass
