"""The archive hop's pure logic: keys, record positions (gaps, overlaps, dead letters, pending), offsets named, the
sharded listing. Every expected value is written by hand."""

from typing import Any

import pytest

from lineage_assets.conservation.archive_keys import KeyPlace, object_key, parse_place, place_of, sink_place
from lineage_assets.conservation.archive_listing import (
    OUTSIDE,
    FolderPlan,
    Listing,
    age,
    choose_rotation,
    fresh_shards,
    list_archive,
    plan_shards,
    rotation_note,
    shard_range,
    verified_at,
)
from lineage_assets.conservation.archive_objects import count_lines, fact_lines
from lineage_assets.conservation.archive_walk import Held, Placed, hole_text, offsets_of, span_end, walk

P = "topics/orders/"


def key(p: int, start: int) -> str:
    return f"{P}partition={p}/orders+{p}+{start:020d}.jsonl"


def test_object_key_is_the_sinks_layout():
    assert object_key(P, "orders", 1, 300) == "topics/orders/partition=1/orders+1+00000000000000000300.jsonl"


def test_place_of_keys():
    parts = [0, 1, 2]
    assert place_of(key(1, 300), P, "orders", parts) == KeyPlace(1, 300)
    assert place_of(key(2, 1_000_000_300), P, "orders", parts) == KeyPlace(2, 1_000_000_300)
    wrong_folder = f"{P}partition=1/orders+0+{300:020d}.jsonl"
    assert place_of(wrong_folder, P, "orders", parts).problem == "named for partition 0 in folder partition=1"
    assert place_of(f"{P}partition=01/orders+1+{300:020d}.jsonl", P, "orders", parts).partition is None
    assert place_of(f"{P}partition=1/copy-of-orders.jsonl", P, "orders", parts).problem.startswith("the name")
    assert place_of(f"{P}partition=1/orders+1+300.jsonl", P, "orders", parts).problem.startswith("the name")
    assert place_of(f"{P}orders+1+{300:020d}.jsonl", P, "orders", parts).problem == "not in a partition=<p>/ folder"
    assert place_of(key(7, 0), P, "orders", parts).problem == "orders has no partition 7"


def test_count_lines():
    assert count_lines([b'{"a":1}\n{"a":2}\n']) == 2
    assert count_lines([b'{"a":1}\n{"a"', b":2}"]) == 2
    assert count_lines([b""]) == 0
    assert count_lines([]) == 0


def test_span_end_skips_dead_letters():
    assert span_end(0, 10, []) == 10
    assert span_end(0, 10, [5]) == 11
    assert span_end(0, 10, [5, 10, 11, 30]) == 13
    assert span_end(20, 3, [5, 10]) == 23


def test_contiguous_objects_balance():
    w = walk([Placed("a", 0, 100), Placed("b", 100, 100)], [], cut=200, end=200)
    assert (w.held, w.missing, w.extra, w.pending, w.dead) == (200, [], {}, 0, 0)


def test_deleted_object_leaves_a_hole():
    w = walk([Placed("a", 0, 100), Placed("c", 200, 50)], [], cut=250, end=250)
    assert w.missing == [(100, 200)]
    assert (w.held, w.extra, w.pending) == (150, {}, 0)


def test_first_and_last_objects_deleted():
    w = walk([Placed("b", 100, 100)], [], cut=300, end=300)
    assert w.missing == [(0, 100), (200, 300)]


def test_dead_letters_between_and_inside_objects():
    # as seen live: 59 lines from 0, 17 from 59, records 76 and 77 dead-lettered, 9 lines from 78
    w = walk([Placed("a", 0, 59), Placed("b", 59, 17), Placed("c", 78, 9)], [76, 77], cut=87, end=87)
    assert (w.held, w.dead, w.missing, w.extra, w.pending) == (85, 2, [], {}, 0)
    # a converter failure inside an object: the sink goes on in the same object
    w = walk([Placed("a", 0, 10), Placed("b", 11, 5)], [5], cut=16, end=16)
    assert (w.held, w.dead, w.missing, w.extra) == (15, 1, [], {})


def test_a_hole_around_a_dead_letter_is_one_hole():
    """A deleted object that held records on both sides of a dead letter: one hole, its dead letter inside (the
    balance's missing count leaves it out); dead letters at its edges are not part of it."""
    w = walk([Placed("a", 0, 10), Placed("c", 30, 10)], [15], cut=40, end=40)
    assert w.missing == [(10, 30)]
    assert w.dead == 1
    edges = walk([Placed("a", 0, 10), Placed("c", 30, 10)], [10, 29], cut=40, end=40)
    assert edges.missing == [(11, 29)]


def test_copy_with_another_start_inside_the_records_is_extra():
    objects = [Placed("a", 0, 100), Placed("b", 100, 100), Placed("copy-of-a", 50, 100)]
    w = walk(objects, [], cut=200, end=200)
    assert w.extra == {"copy-of-a": 100}
    assert w.overlaps == {"copy-of-a": "a"}
    assert (w.held, w.missing) == (200, [])


def test_copy_past_the_end_is_extra():
    w = walk([Placed("a", 0, 59), Placed("far", 59, 59)], [], cut=59, end=59)
    assert w.extra == {"far": 59}
    assert w.overlaps == {}


def test_overlap_covering_a_hole_holds_what_the_hole_lacks():
    # the replay window of the sink's README: b (100..149) rotated by time, then a replay wrote 100..199 as c
    objects = [Placed("a", 0, 100), Placed("c", 100, 100), Placed("b-old", 100, 50), Placed("d", 200, 10)]
    w = walk(objects, [], cut=210, end=210)
    assert w.extra == {"b-old": 50}
    assert (w.held, w.missing) == (210, [])
    # a deleted object whose records another (overlapping) object still holds in part
    w = walk([Placed("a", 0, 100), Placed("x", 50, 100), Placed("c", 200, 10)], [], cut=210, end=210)
    assert w.extra == {"x": 50}
    assert w.missing == [(150, 200)]


def test_pending_is_what_no_object_holds_at_or_above_the_cut():
    w = walk([Placed("a", 0, 100)], [], cut=100, end=130)
    assert (w.pending, w.first_pending, w.missing) == (30, 100, [])
    # uploaded, its commit not seen yet: held, not pending
    w = walk([Placed("a", 0, 100), Placed("b", 100, 30)], [], cut=100, end=130)
    assert (w.pending, w.held, w.missing) == (0, 130, [])
    # dead-lettered above the cut: pending until committed, inside an object or not
    w = walk([Placed("a", 0, 100), Placed("b", 100, 10)], [105, 112], cut=100, end=115)
    assert (w.pending, w.dead, w.held) == (5, 0, 110)


def test_every_record_is_accounted_once():
    objects = [Placed("a", 0, 10), Placed("b", 12, 5), Placed("dup", 3, 4), Placed("c", 30, 5)]
    w = walk(objects, [10, 11, 31], cut=33, end=40)
    # 0..9 a; 10, 11 dead; 12..16 b; 17..29 missing; 30 c, 31 dead, 32..35 c (33..35 at or above the cut);
    # 36..39 pending; dup's 4 lines (3..6) are a's already
    assert w.missing == [(17, 30)]
    assert (w.held, w.dead, w.pending, w.extra) == (20, 3, 4, {"dup": 4})
    assert w.held + w.dead + sum(b - a for a, b in w.missing) + w.pending == 40


def test_offsets_of_records():
    anchors = {0: 0, 100: 100, 200: 200}
    assert offsets_of(100, 200, anchors) == (100, 199, True)
    # a transaction marker at offset 150: offset 201 has 200 records below it
    anchors = {0: 0, 100: 100, 201: 200}
    assert offsets_of(100, 200, anchors) == (100, 200, False)
    assert offsets_of(0, 100, anchors) == (0, 99, True)
    # an origin above zero (retention before counting began)
    assert offsets_of(0, 5, {500: 0, 600: 100}) == (500, 504, True)


def test_plan_shards_tiles_the_offsets():
    assert plan_shards([0, 100, 200], upper=300) == [""]
    starts = list(range(0, 250_000, 100))  # 2500 objects of 100 records
    shards = plan_shards(starts, upper=250_000)
    # 15 digits fixed, 5 free: 100 000 offsets, 1000 objects each
    assert shards == ["000000000000000", "000000000000001", "000000000000002"]
    assert plan_shards(starts, upper=250_000, limit=5000) == [""]
    many = list(range(0, 2500))  # objects of one record (time rotation)
    assert plan_shards(many, upper=2500) == ["00000000000000000", "00000000000000001", "00000000000000002"]


class FakeS3:
    """ListObjectsV2 over a sorted key list: Prefix, StartAfter, Delimiter '/', MaxKeys, continuation."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = sorted(keys)
        self.calls: list[dict[str, Any]] = []

    def list_objects_v2(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(kw)
        after = kw.get("ContinuationToken") or kw.get("StartAfter") or ""
        chosen = [k for k in self.keys if k.startswith(kw["Prefix"]) and k > after]
        contents, prefixes = [], []
        for k in chosen:
            rest = k[len(kw["Prefix"]) :]
            if kw.get("Delimiter") == "/" and "/" in rest:
                folder = kw["Prefix"] + rest.split("/")[0] + "/"
                if folder not in prefixes:
                    prefixes.append(folder)
            else:
                contents.append(k)
        page = contents[: kw.get("MaxKeys", 1000)]
        truncated = len(contents) > len(page)
        response: dict[str, Any] = {
            "Contents": [{"Key": k, "ETag": f'"{k}"'} for k in page],
            "CommonPrefixes": [{"Prefix": f} for f in prefixes],
            "IsTruncated": truncated,
        }
        if truncated:
            response["NextContinuationToken"] = page[-1]
        return response


def test_sharded_listing_finds_every_key():
    layout = [key(p, s) for p in (0, 1) for s in range(0, 300_000, 100)]
    foreign = [
        f"{P}partition=1/orders+1+{1_000_000_300:020d}.jsonl",  # a copy far past the end
        f"{P}partition=1/copy.jsonl",  # sorts before the sink's names
        f"{P}partition=1/orders+0+{300:020d}.jsonl",  # another partition's name
        f"{P}partition=1/zz/orders+1+{300:020d}.jsonl",  # a subfolder, after the names
        f"{P}partition=1/orders+1+{100_300:020d}.jsonl.bak",  # inside a shard
        f"{P}partition=9/orders+9+{0:020d}.jsonl",  # a folder of no partition
        f"{P}loose.jsonl",
    ]
    s3 = FakeS3(layout + foreign)
    known = {0: list(range(0, 300_000, 100)), 1: list(range(0, 250_000, 100))}
    found = list_archive(s3, "b", P, "orders", known, {0: 300_000, 1: 300_000}, "http://s3")
    assert sorted(found.objects) == sorted(layout + foreign)
    # shards of at most 1000 remembered keys: 3 per partition folder, one page each, and the (empty) shard
    # where the next object starts
    assert sum(1 for c in s3.calls if c["Prefix"].startswith(f"{P}partition=0/orders+0+0")) == 4
    full = list_archive(FakeS3(layout + foreign), "b", P, "orders", known, {0: 1, 1: 1}, "http://s3", full=True)
    assert sorted(full.objects) == sorted(layout + foreign)


# ---------------------------------------------------------------------------------------------------------------
# The rotating listing: which shards a run lists, given what is remembered

S15 = "00000000000000"  # 14 digits: + one more digit = a shard of 100 000 start offsets


def test_shard_range():
    assert shard_range("") == (0, 10**20)
    assert shard_range(S15 + "2") == (200_000, 300_000)
    assert shard_range("1") == (10**19, 2 * 10**19)


def test_fresh_shards_are_those_at_or_above_the_last_committed_offset():
    shards = [S15 + "0", S15 + "1", S15 + "2", S15 + "3"]
    assert fresh_shards(shards, None) == shards  # nothing remembered: every shard
    assert fresh_shards(shards, 250_000) == [S15 + "2", S15 + "3"]
    assert fresh_shards(shards, 300_000) == [S15 + "3"]  # the shard where the next object starts
    assert fresh_shards(shards, 0) == shards


def test_verified_at_inherits_from_the_prefix_that_covered_a_split_shard():
    verified = {"0:" + S15 + "1": 50.0, "0:": 20.0, "1:" + S15 + "1": 70.0, f"0:{OUTSIDE}": 5.0}
    assert verified_at(0, S15 + "1", verified) == 50.0
    assert verified_at(0, S15 + "10", verified) == 50.0  # split since: its parent was listed at 50
    assert verified_at(0, S15 + "2", verified) == 20.0  # only the whole folder listed (a --deep run)
    assert verified_at(2, S15 + "2", verified) == 0.0  # never
    assert verified_at(0, OUTSIDE, verified) == 5.0
    assert verified_at(1, OUTSIDE, verified) == 0.0


def test_rotation_lists_the_least_recently_verified_within_the_budget():
    units = [(0, "a", 1000), (0, "b", 1000), (0, "c", 1000), (1, "a", 1000), (0, OUTSIDE, 26_000)]
    verified = {"0:a": 30.0, "0:b": 10.0, "0:c": 20.0, "1:a": 40.0, f"0:{OUTSIDE}": 35.0}
    assert choose_rotation(units, verified, budget=2000) == [(0, "b"), (0, "c")]
    assert choose_rotation(units, verified, budget=3500) == [(0, "b"), (0, "c"), (0, "a")]
    # never listed first, in their order
    assert choose_rotation(units, {"0:b": 10.0}, budget=2000) == [(0, "a"), (0, "c")]
    # a folder check costlier than the budget goes alone when it is the stalest
    assert choose_rotation(units, {**verified, f"0:{OUTSIDE}": 1.0}, budget=2000) == [(0, OUTSIDE)]
    assert choose_rotation([], verified) == []


def test_rotation_reaches_every_unit_within_its_period():
    """12 shards of 1000 keys and a folder check of 24 000, budget 4000: 3 runs for the shards, 1 for the folder
    check, so every unit is listed within 4 runs (and again within the next 4)."""
    units = [(0, f"s{i:02d}", 1000) for i in range(12)] + [(0, OUTSIDE, 24_000)]
    verified = {f"0:s{i:02d}": 100.0 + i for i in range(12)} | {f"0:{OUTSIDE}": 105.5}
    runs = []
    for now in (200.0, 201.0, 202.0, 203.0, 204.0):
        chosen = choose_rotation(units, verified, budget=4000)
        runs.append(chosen)
        verified |= {f"{p}:{u}": now for p, u in chosen}
    assert runs[0] == [(0, "s00"), (0, "s01"), (0, "s02"), (0, "s03")]
    assert runs[1] == [(0, "s04"), (0, "s05"), (0, "s06"), (0, "s07")]  # the folder check does not fit after s05
    assert runs[2] == [(0, OUTSIDE)]  # now the stalest: alone
    assert runs[3] == [(0, "s08"), (0, "s09"), (0, "s10"), (0, "s11")]
    assert {u for run in runs[:4] for _, u in run} == {f"s{i:02d}" for i in range(12)} | {OUTSIDE}
    assert runs[4] == runs[0]


def test_rotating_listing_lists_fresh_shards_and_the_stalest_old_ones():
    layout = [key(0, s) for s in range(0, 300_000, 100)]  # 3000 objects, shards ...0, ...1, ...2 (+ ...3 next)
    copy_far = f"{P}partition=0/orders+0+{5_000_000_000:020d}.jsonl"
    s3 = FakeS3([*layout, copy_far, f"{P}partition=0/zz-replayed.jsonl"])
    known = {0: list(range(0, 300_000, 100))}
    verified = {f"0:{S15}0": 10.0, f"0:{S15}1": 20.0, f"0:{OUTSIDE}": 30.0}
    found = list_archive(
        s3, "b", P, "orders", known, {0: 300_000}, "http://s3", floors={0: 280_000}, verified=verified, budget=1000
    )
    plan = found.plans[0]
    assert plan.listed == [S15 + "0", S15 + "2", S15 + "3"] and plan.rotated == [S15 + "0"] and not plan.outside
    listed = [c["Prefix"].removeprefix(f"{P}partition=0/orders+0+") for c in s3.calls if "Delimiter" not in c]
    assert sorted(listed) == [S15 + "0", S15 + "2", S15 + "3"]
    assert sorted(found.objects) == sorted(k for k in layout if not 100_000 <= int(k[-26:-6]) < 200_000)
    # covered: what this run listed; the old shard ...1, the copies outside every shard are not
    assert found.covers(key(0, 500)) and found.covers(key(0, 250_000)) and found.covers(key(0, 300_100))
    assert not found.covers(key(0, 150_000))
    assert not found.covers(copy_far) and not found.covers(f"{P}partition=0/zz-replayed.jsonl")
    assert found.covers(f"{P}loose.jsonl")
    # the folder check, when it is the stalest, finds the keys outside every shard
    s3 = FakeS3([*layout, copy_far, f"{P}partition=0/zz-replayed.jsonl"])
    verified = {f"0:{S15}0": 40.0, f"0:{S15}1": 50.0, f"0:{OUTSIDE}": 30.0}
    found = list_archive(
        s3, "b", P, "orders", known, {0: 280_000}, "http://s3", floors={0: 280_000}, verified=verified, budget=1000
    )
    assert found.plans[0].outside and found.plans[0].rotated == []
    assert copy_far in found.objects and f"{P}partition=0/zz-replayed.jsonl" in found.objects
    assert found.covers(copy_far)


HEADS = {"topics/orders/partition=0/orders+0+": 0, "topics/orders/partition=1/orders+1+": 1}


def test_sink_place_reads_the_sinks_own_keys_and_leaves_the_rest_to_place_of():
    assert sink_place(key(1, 300), HEADS) == KeyPlace(1, 300)
    assert sink_place(key(0, 0), HEADS) == KeyPlace(0, 0)
    assert sink_place(key(2, 300), HEADS) is None  # no such partition here
    assert sink_place(f"{P}partition=1/orders+0+{300:020d}.jsonl", HEADS) is None  # another partition's name
    assert sink_place(f"{P}partition=1/orders+1+{300:019d}.jsonl", HEADS) is None  # 19 digits
    assert sink_place(f"{P}partition=1/orders+1+{300:020d}.json", HEADS) is None
    assert sink_place(f"{P}partition=1/orders+1+0000000000000000030x.jsonl", HEADS) is None
    assert sink_place(f"{P}partition=1/orders+1+{300:020d}.jsonl.bak", HEADS) is None
    assert sink_place("x", HEADS) is None


def test_fact_lines_reads_the_count_as_object_lines_writes_it():
    assert fact_lines('{"etag": "\\"ab, \\"lines\\": 9\\"", "lines": 120}') == 120
    assert fact_lines('{"lines": 7, "etag": "\\"ab\\""}') == 7  # another order: decoded as JSON
    assert fact_lines('{"etag": "x", "lines": 0}') == 0


def test_a_hole_is_named_as_the_deleted_object_even_with_transaction_markers_inside_it():
    # records at positions 100..199 were offsets 100..219 (20 commit markers among them); the object that held
    # them started at offset 100 and is gone; the next object starts at offset 220
    anchors = {0: 0, 100: 100, 220: 200}
    gone = {key(0, 100)}
    what, first, last = hole_text(0, 100, 200, 100, anchors, lambda o: key(0, o), gone)
    assert (first, last) == (100, 219)
    assert what == (
        f"offsets 100..219 of partition 0: no object holds them; expected {key(0, 100)} (was there: deleted)"
    )
    # a hole no remembered key began at: only the bounds of its offsets are known
    what, first, last = hole_text(0, 100, 200, 100, anchors, lambda o: key(0, o), set())
    assert what == "100 records between offsets 100 and 219 of partition 0: no object holds them"
    # no marker inside: exact, named as expected even if no key was there
    what, _, _ = hole_text(0, 100, 200, 100, {0: 0, 100: 100, 200: 200}, lambda o: key(0, o), set())
    assert what == f"offsets 100..199 of partition 0: no object holds them; expected {key(0, 100)}"


def test_the_parse_places_the_sinks_keys_as_the_shortcut_does():
    parts = [0, 1, 2, 10]
    for p, start in [(1, 300), (10, 7), (0, 0)]:
        assert parse_place(key(p, start), P, "orders", parts) == KeyPlace(p, start)
        assert place_of(key(p, start), P, "orders", parts) == KeyPlace(p, start)
    # a name with a line break is in a folder, but not the sink's name
    odd = f"{P}partition=1/orders+1+\n{300:020d}.jsonl"
    assert parse_place(odd, P, "orders", parts).problem.startswith("the name does not follow orders+<p>+")
    # digits that are not ASCII: not the sink's, whichever way it is parsed
    arabic = f"{P}partition=1\u0660/orders+1\u0660+{300:020d}.jsonl"
    assert place_of(arabic, P, "orders", parts).partition is None


def test_sink_place_needs_the_extension():
    heads = {f"{P}partition=0/orders+0+": 0}
    assert sink_place(f"{P}partition=0/orders+0+{5:020d}.jsonX", heads) is None


def test_offsets_of_without_an_anchor_below_and_with_markers_above():
    assert offsets_of(5, 10, {}) == (5, 9, False)
    # a marker between 100 and 203: the last record lies below offset 202 (203 less the one record above b)
    assert offsets_of(100, 200, {0: 0, 100: 100, 203: 201}) == (100, 201, False)


def test_fact_lines_reads_the_count_from_the_end_even_of_text_that_is_not_json():
    assert fact_lines('{"etag": x, "lines": 1, "lines": 12}') == 12
    assert fact_lines('{"etag": x, "lines": 7}') == 7
    assert fact_lines('{"etag": "e", "lines": 12, "more": 1}') == 12  # not the fast form: read as JSON
    assert fact_lines('{"etag": "e", "lines": 1.5}') == 1
    with pytest.raises(ValueError):
        fact_lines('{"etag": x, "lines": 12')
    with pytest.raises(ValueError):
        fact_lines('X{"etag": x, "lines": 12}')


def test_plan_shards_stops_at_twenty_digits_and_at_upper():
    z = "0" * 17
    assert plan_shards([5, 5, 5], upper=10, limit=1) == [z + "00" + str(d) for d in range(10)]
    assert plan_shards([0, 15], upper=1000, limit=1) == [z + "0" + str(d) for d in range(10)] + [
        z + str(d) for d in range(1, 10)
    ]
    assert plan_shards([15, 16], upper=1000, limit=1) == [
        z + "00",
        *(z + "01" + str(d) for d in range(10)),
        *(z + "0" + str(d) for d in range(2, 10)),
        *(z + str(d) for d in range(1, 10)),
    ]
    lo = 10**17  # past float precision
    assert plan_shards([lo + 1, lo + 2], upper=lo + 3, limit=1) == [
        "000",
        "00100000000000000000",
        "00100000000000000001",
        "00100000000000000002",
    ]


def test_walk_edges():
    # a dead letter at position 0 is one
    w = walk([Placed("a", 1, 4)], [0], cut=5, end=5)
    assert (w.dead, w.held, w.missing) == (1, 4, [])
    # an object of no lines does not split the hole it lies in
    assert walk([Placed("a", 0, 10), Placed("z", 12, 0), Placed("b", 20, 5)], [], 25, 25).missing == [(10, 20)]
    # one line: still the chain (its copy is the overlap)
    w = walk([Placed("a", 0, 1), Placed("dup", 0, 1)], [], cut=1, end=1)
    assert (w.extra, w.overlaps) == ({"dup": 1}, {"dup": "a"})
    # an object starting past the end: every line extra, no more
    assert walk([Placed("a", 0, 5), Placed("far", 7, 3)], [], cut=5, end=5).extra == {"far": 3}
    # an object starting at the end overlaps nothing (even inside a chain object's lines past the end)
    w = walk([Placed("a", 0, 10), Placed("d", 5, 3)], [], cut=5, end=5)
    assert (w.extra, w.overlaps) == ({"a": 5, "d": 3}, {})
    w = walk([Placed("a", 0, 5), Placed("d", 5, 3)], [], cut=5, end=5)
    assert (w.extra, w.overlaps) == ({"d": 3}, {})


def test_walk_the_same_key_twice_adds_its_extra_lines_and_is_no_overlap_of_itself():
    w = walk([Placed("x", 0, 10), Placed("x", 0, 5), Placed("x", 0, 3)], [], cut=10, end=10)
    assert (w.extra, w.overlaps) == ({"x": 8}, {})


def test_walk_names_the_chain_object_the_overlap_starts_in():
    w = walk([Placed("a", 0, 10), Placed("c", 10, 10), Placed("c-short", 10, 5)], [], cut=20, end=20)
    assert w.overlaps == {"c-short": "c"}


def test_walk_pending_pieces_add_up_and_a_hole_ending_at_the_cut_is_not_pending():
    w = walk([Placed("a", 0, 5), Placed("c", 20, 5)], [], cut=0, end=30)
    assert (w.pending, w.first_pending, w.missing) == (20, 5, [])
    w = walk([Placed("a", 0, 5), Placed("c", 10, 5)], [], cut=10, end=15)
    assert (w.missing, w.pending, w.first_pending) == ([(5, 10)], 0, None)


def test_held_intervals_merge_where_they_touch():
    held = Held()
    held.add(0, 5)
    held.add(5, 8)
    assert (held.starts, held.ends) == ([0], [8])
    held = Held()
    for a, b in [(0, 2), (4, 6), (6, 8)]:
        held.add(a, b)
    assert (held.starts, held.ends) == ([0, 4], [2, 8])
    held = Held()
    for a, b in [(0, 2), (4, 6), (2, 4)]:
        held.add(a, b)
    assert (held.starts, held.ends) == ([0], [6])
    held = Held()
    for a, b in [(0, 2), (4, 6), (10, 12), (2, 4)]:
        held.add(a, b)
    assert (held.starts, held.ends) == ([0, 10], [6, 12])
    assert (held.holds(5), held.holds(6), held.holds(10), held.holds(12)) == (True, False, True, False)


def test_held_outside_leaves_no_empty_pieces():
    held = Held()
    held.add(5, 10)
    assert held.outside(5, 8) == []
    assert held.outside(0, 10) == [(0, 5)]
    assert held.outside(0, 5) == [(0, 5)]
    assert held.outside(2, 12) == [(2, 5), (10, 12)]


def test_listing_covers():
    plan = FolderPlan(name="p/partition=0/orders+0+", shards=["0", "1"], listed=["0"], outside=False)
    plan1 = FolderPlan(name="p/partition=1/orders+1+", shards=["0"], listed=[], outside=False)
    listing = Listing(plans={0: plan, 1: plan1}, whole=["p/loose/"], folders_under="p/partition=")
    assert listing.covers("p/loose/x.jsonl")  # listed whole
    assert listing.covers("p/partition=0/orders+0+0123")  # in a shard listed
    assert not listing.covers("p/partition=0/orders+0+1123")  # an old shard not listed
    assert not listing.covers("p/partition=0/sub/x")  # in the folder, outside the shards: not listed this run
    assert not listing.covers("p/partition=0/xxxxxxxxx0abc")  # as long as the name, not the sink's
    assert listing.covers("p/partition=x/a")  # a folder of no partition: listed whole
    assert listing.covers("p/partition=01/orders+1+0123")  # not partition 1's folder
    assert listing.covers("q/other")


def test_age_in_seconds_then_minutes():
    assert (age(89), age(90), age(3600)) == ("89 s", "2 min", "60 min")


def test_rotation_note_says_what_was_listed_and_how_stale_the_oldest_verification_is():
    plans = {
        1: FolderPlan("n1", ["0", "1", "2"], ["1", "2", "", "0"], True, ["", "0"]),
        0: FolderPlan("n0", [""], [""], False),
    }
    verified = {"0:": 500.0, "0:outside": 350.0, "1:0": 400.0, "1:1": 450.0, "1:2": 420.0, "1:outside": 300.0}
    rest = (
        "The other shards stand as last listed (deletions and copies there are found when rotation re-lists them, "
        "3000 keys a run, least recently verified first; keys found gone or named are looked at every run); the "
        "oldest verification is "
    )
    assert rotation_note(Listing(plans=plans), verified, 1000.0, False) == (
        "verified this run: partition 0: 1 shard(s) where the sink writes (*); partition 1: 2 shard(s) where the "
        "sink writes (1, 2), 2 old re-listed in rotation (*, 0), the keys outside every shard. "
        + rest
        + "12 min ago; `reconcile --deep` lists everything."
    )
    one = {0: FolderPlan("n0", [""], [""], False)}
    assert rotation_note(Listing(plans=one), {"0:": 500.0, "0:outside": 0.5}, 1000.0, False).endswith(
        "is 17 min ago; `reconcile --deep` lists everything."
    )
    assert rotation_note(Listing(plans=one), {"0:": 500.0}, 1000.0, False).endswith(
        "is never; `reconcile --deep` lists everything."
    )
    assert rotation_note(Listing(), {}, 1000.0, False) == (
        "verified this run: the folders and loose files. " + rest + "0 s ago; `reconcile --deep` lists everything."
    )
    assert rotation_note(Listing(), {}, 1000.0, True) == "verified: every key of the archive listed this run (--deep)"
