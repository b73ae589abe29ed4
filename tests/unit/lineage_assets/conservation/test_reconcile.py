"""reconcile's second look and its handling of readers that fail (fake readers: pure control flow)."""

from types import SimpleNamespace

import pytest

from infra.settings import StackSettings
from lineage_assets.conservation import reconcile as rec
from lineage_assets.conservation.balance import HopBalance, OtherWriter, StoreUnavailable
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())


@pytest.fixture
def stores(tmp_path):
    return SimpleNamespace(pipeline=PIPELINE, counts=CountStore(tmp_path / "counts.sqlite"), deep=False)


def fake_readers(monkeypatch, looks: dict[str, list]):
    def reader(job):
        def read(hop, stores):
            look = looks[job].pop(0)
            if isinstance(look, Exception):
                raise look
            writers = look[4:] if len(look) > 4 else ()
            return HopBalance(job, hop.input.qualified_name, hop.output_names, *look[:4], other_writers=writers)

        return read

    monkeypatch.setattr(rec, "reader_of", lambda hop: reader(hop.job.name))


def test_a_streaming_hop_that_looks_lost_is_read_again_before_it_is_reported(monkeypatch, stores):
    fake_readers(monkeypatch, {"iceberg-ingestion": [(100, 90, 0, 0), (110, 110, 0, 0)]})
    slept = []
    (b,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=25, sleep=slept.append)
    assert (slept, b.in_, b.status) == ([25], 110, "balanced")


def test_a_loss_seen_twice_is_reported(monkeypatch, stores):
    fake_readers(monkeypatch, {"iceberg-ingestion": [(100, 90, 0, 0), (110, 100, 0, 0)]})
    (b,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=25, sleep=lambda s: None)
    assert (b.status, b.missing) == ("missing", 10)


def test_a_batch_hop_is_exact_at_its_commit_and_read_once(monkeypatch, stores):
    fake_readers(monkeypatch, {"dagster.supplier_stats": [(100, 90, 0, 0)]})
    slept = []
    (b,) = rec.reconcile(stores, ["dagster.supplier_stats"], confirm_after_s=25, sleep=slept.append)
    assert (slept, b.missing) == ([], 10)


def test_a_store_that_does_not_answer_makes_that_hop_unknown_and_the_others_still_report(monkeypatch, stores):
    fake_readers(
        monkeypatch,
        {
            "orders-s3-sink": [StoreUnavailable("object store at http://127.0.0.1:9000 did not answer; start it")],
            "iceberg-ingestion": [KeyError("total-records")],
            "supplier-stats": [(5, 5, 0, 0)],
        },
    )
    found = rec.reconcile(stores, ["orders-s3-sink", "iceberg-ingestion", "supplier-stats"], sleep=lambda s: None)
    assert [(b.job, b.status) for b in found] == [
        ("orders-s3-sink", "unknown"),
        ("supplier-stats", "balanced"),
        ("iceberg-ingestion", "unknown"),
    ]
    assert found[0].unknown == "object store at http://127.0.0.1:9000 did not answer; start it"
    assert "KeyError" in found[2].unknown


def test_an_accepted_change_of_another_writer_no_longer_counts_and_is_listed_apart(monkeypatch, stores):
    delete = OtherWriter("s3://warehouse/default/orders", "snapshot 7 (delete, pyiceberg)", -10, "snapshot:7")
    append = OtherWriter("s3://warehouse/default/orders", "snapshot 9 (append, pyiceberg)", 4, "snapshot:9")
    fake_readers(monkeypatch, {"iceberg-ingestion": [(100, 94, 0, 0, delete, append)] * 5})  # accept reads too
    (before,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=0)
    assert (before.status, before.missing) == ("missing", 6)
    rec.accept(stores, "iceberg-ingestion", ["snapshot:7"], by="a test")
    (after,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=0)
    # 94 held, of which +4 another writer's still counted, -10 accepted: out 104 -> 4 doubled
    assert (after.out, after.status, after.duplicates) == (104, "duplicates", 4)
    assert ([w.reference for w in after.accepted], [w.reference for w in after.other_writers]) == (
        ["snapshot:7"],
        ["snapshot:9"],
    )
    rec.accept(stores, "iceberg-ingestion", ["snapshot:9"], by="a test")
    (both,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=0)
    assert (both.out, both.status) == (100, "balanced")


def test_deep_adds_the_key_audit_notes_and_an_unreadable_audit_keeps_the_counts(tmp_path, monkeypatch):
    def audit(hop, stores):
        job = hop.job.name
        if job == "orders-s3-sink":
            raise StoreUnavailable("object store at http://127.0.0.1:9000 did not answer")
        return [f"audited {job}"] if job == "iceberg-ingestion" else []

    monkeypatch.setattr(rec.key_audit, "audit", audit)
    monkeypatch.setattr(
        rec, "reader_of", lambda hop: lambda hop, stores: HopBalance(hop.job.name, "in", (), 5, 5, 0, 0)
    )
    stores = SimpleNamespace(pipeline=PIPELINE, counts=CountStore(tmp_path / "counts.sqlite"), deep=True)
    found = {b.job: b for b in rec.reconcile(stores, confirm_after_s=0)}
    assert found["iceberg-ingestion"].notes == ("audited iceberg-ingestion",)
    assert found["orders-s3-sink"].status == "balanced"
    assert found["orders-s3-sink"].notes == (
        "per-key audit not done: object store at http://127.0.0.1:9000 did not answer",
    )
    assert found["supplier-stats"].notes == ()


def test_the_lock_timeout_reaches_every_look_and_a_short_confirmation_pause_still_confirms(monkeypatch, stores):
    looks = iter([(100, 90, 0, 0), (100, 100, 0, 0)])
    calls = []

    def balance_of(hop, stores_, lock_timeout=None):
        calls.append((hop.job.name, stores_ is stores, lock_timeout))
        return HopBalance(hop.job.name, "in", (), *next(looks))

    monkeypatch.setattr(rec, "balance_of", balance_of)
    slept = []
    (b,) = rec.reconcile(stores, ["iceberg-ingestion"], confirm_after_s=0.5, sleep=slept.append, lock_timeout=7.0)
    assert (b.status, slept) == ("balanced", [0.5])
    assert calls == [("iceberg-ingestion", True, 7.0), ("iceberg-ingestion", True, 7.0)]


def test_the_key_audit_is_given_the_hop_and_the_stores(monkeypatch, stores):
    seen = []

    def audit(hop, stores_):
        seen.append((hop.job.name, stores_ is stores))
        return ["audited"]

    monkeypatch.setattr(rec.key_audit, "audit", audit)
    hop = rec.reconciled_hops(stores.pipeline)["iceberg-ingestion"]
    assert rec.deep_notes(hop, stores) == ["audited"]
    assert seen == [("iceberg-ingestion", True)]
