"""The counter answers from remembered marks alone when every target has one of its own (a SQLite count store; no
broker: the reads themselves are held by the service tests)."""

from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.kafka_counts import Marks, known_marks


def test_every_target_with_a_mark_of_its_own_is_answered_from_the_marks(tmp_path):
    store = CountStore(tmp_path / "c.sqlite")
    store.add_marks("orders", 0, [(10, 0), (500, 480), (501, 480)])
    marks = Marks(store, "orders", 0, None)
    assert known_marks(marks, [500, 501]) == {500: (500, 480, 0), 501: (501, 480, 0)}


def test_one_target_without_its_own_mark_sends_the_whole_partition_to_be_read(tmp_path):
    store = CountStore(tmp_path / "c.sqlite")
    store.add_marks("orders", 1, [(0, 0), (300, 300)])
    assert known_marks(Marks(store, "orders", 1, None), [300, 301]) is None
    assert known_marks(Marks(store, "orders", 2, None), [3]) is None  # never counted


def test_sums_are_answered_from_the_marks_of_their_own_measure(tmp_path):
    store = CountStore(tmp_path / "c.sqlite")
    store.add_sum_marks("orders", 0, "price", [(0, 0, 0), (40, 38, 12_345)])
    assert known_marks(Marks(store, "orders", 0, "price"), [40]) == {40: (40, 38, 12_345)}
    assert known_marks(Marks(store, "orders", 0, "quantity"), [40]) is None
