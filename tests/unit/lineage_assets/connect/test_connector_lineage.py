"""A connector's account from its live configuration, and the connector runs carrying it. Every expected name is
written by hand (no naming function of the product computes it)."""

import datetime as dt
import json
from pathlib import Path

from infra.settings import StackSettings
from lineage_assets.connect.client import ConnectorStatus, TaskStatus
from lineage_assets.connect.connector_lineage import connector_account
from lineage_assets.connect.runs import Track, step
from lineage_assets.lineage.account import DECLARED, Account, Unknown
from lineage_assets.lineage.events import EventBuilder
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())
BUILDER = EventBuilder(PIPELINE)
CONNECTORS = Path(__file__).parents[4] / "connect" / "connectors"
#: the placeholders as the embedded stack renders them
RENDERED = {
    "@{registry_api}": "http://127.0.0.1:8085/apis/registry/v2",
    "@{archive_bucket}": "orders-archive",
    "@{s3_endpoint}": "http://127.0.0.1:9000",
    "@{s3_region}": "us-east-1",
    "@{sink_dead_letter_topic}": "orders-dlq",
    "@{archive_rotate_ms}": "60000",
    "@{db_host}": "127.0.0.1",
    "@{db_port}": "15432",
}


def deployed(name: str, **changes: str) -> dict[str, str]:
    """The project's connector file, rendered by hand, with ``changes`` (keys spelled with _ for .)."""
    text = (CONNECTORS / f"{name}.json").read_text()
    for placeholder, value in RENDERED.items():
        text = text.replace(placeholder, value)
    config = {**json.loads(text), "name": name}
    config.update({k.replace("_", "."): v for k, v in changes.items()})
    return config


def account_of(config, job="orders-s3-sink", topics=(), publication=None) -> Account | Unknown:
    return connector_account(
        PIPELINE,
        job,
        config,
        bootstrap="127.0.0.1:9092",
        list_topics=lambda: list(topics) if not isinstance(topics, str) else topics,
        reader=f"Kafka Connect http://127.0.0.1:8083 config of {job}",
        publication_tables=publication,
    )


def names(datasets) -> list[str]:
    return [str(d) for d in datasets]


def test_the_deployed_sink_reads_orders_and_writes_the_archive_and_its_dead_letters():
    account = account_of(deployed("orders-s3-sink"))
    assert isinstance(account, Account)
    assert account.reader == "Kafka Connect http://127.0.0.1:8083 config of orders-s3-sink"
    assert names(account.inputs) == ["kafka://127.0.0.1:9092/orders"]
    assert names(account.outputs) == ["s3://orders-archive/topics/orders", "kafka://127.0.0.1:9092/orders-dlq"]
    archive, dead_letters = account.outputs
    assert set(account.column_origins(archive).values()) == {DECLARED}, "Connect shows no columns"
    assert "order_id" in account.column_origins(archive)
    assert account.column_origins(dead_letters) == {}


def test_the_deployed_source_captures_the_orders_table_into_the_routed_topic():
    account = account_of(deployed("orders-source"), job="orders-source")
    assert isinstance(account, Account)
    assert names(account.inputs) == ["postgres://127.0.0.1:15432/orders_source.public.orders"]
    assert names(account.outputs) == ["kafka://127.0.0.1:9092/orders"], "RegexRouter route: orders_source.public.orders"
    assert set(account.column_origins(account.outputs[0]).values()) == {DECLARED}


def test_a_sink_reading_two_topics_under_a_prefix_writes_an_archive_for_each():
    account = account_of(deployed("orders-s3-sink", topics=" orders , refunds ", s3_prefix="backup"))
    assert names(account.inputs) == ["kafka://127.0.0.1:9092/orders", "kafka://127.0.0.1:9092/refunds"]
    assert names(account.outputs) == [
        "s3://orders-archive/backup/topics/orders",
        "s3://orders-archive/backup/topics/refunds",
        "kafka://127.0.0.1:9092/orders-dlq",
    ]


def test_topics_regex_is_resolved_whole_against_the_clusters_topics_leaving_internal_ones():
    config = {**deployed("orders-s3-sink"), "topics.regex": "orders|refunds-.*|_connect.*"}
    del config["topics"]
    del config["errors.deadletterqueue.topic.name"]
    listed = ["__consumer_offsets", "_connect-configs", "orders", "orders-dlq", "refunds", "refunds-eu"]
    account = account_of(config, topics=listed)
    assert names(account.inputs) == ["kafka://127.0.0.1:9092/orders", "kafka://127.0.0.1:9092/refunds-eu"]
    assert names(account.outputs) == ["s3://orders-archive/topics/orders", "s3://orders-archive/topics/refunds-eu"]
    unlisted = account_of(config, topics="Kafka at 127.0.0.1:9092 did not list its topics within 10 s")
    assert isinstance(unlisted, Unknown) and "did not list its topics" in unlisted.reason


def debezium(*transforms: tuple[str, dict[str, str]], tables="public.orders") -> dict[str, str]:
    config = {k: v for k, v in deployed("orders-source").items() if not k.startswith("transforms")}
    config["table.include.list"] = tables
    config["transforms"] = ",".join(alias for alias, _ in transforms)
    for alias, options in transforms:
        config.update({f"transforms.{alias}.{k}": v for k, v in options.items()})
    return config


REGEX_ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"


def test_debezium_topics_follow_regex_routers_in_order_with_java_group_references():
    config = debezium(
        ("unwrap", {"type": "io.debezium.transforms.ExtractNewRecordState"}),
        ("route", {"type": REGEX_ROUTER, "regex": r"orders_source\.(public|inventory)\.(.*)", "replacement": "cdc.$2"}),
        ("key", {"type": "org.apache.kafka.connect.transforms.ExtractField$Key", "field": "order_id"}),
        ("again", {"type": REGEX_ROUTER, "regex": r"cdc\.(items)", "replacement": "$10"}),  # group 1, then "0"
        tables="public.orders, inventory\\.items",
    )
    account = account_of(config, job="orders-source")
    assert names(account.inputs) == [
        "postgres://127.0.0.1:15432/orders_source.public.orders",
        "postgres://127.0.0.1:15432/orders_source.inventory.items",
    ]
    assert names(account.outputs) == ["kafka://127.0.0.1:9092/cdc.orders", "kafka://127.0.0.1:9092/items0"]


def test_debezium_by_logical_table_router_merges_tables_into_one_topic():
    config = debezium(
        (
            "reroute",
            {
                "type": "io.debezium.transforms.ByLogicalTableRouter",
                "topic.regex": r"orders_source\.public\.orders_(eu|us)",
                "topic.replacement": "all-orders",
            },
        ),
        tables="public.orders_eu,public.orders_us",
    )
    account = account_of(config, job="orders-source")
    assert names(account.inputs) == [
        "postgres://127.0.0.1:15432/orders_source.public.orders_eu",
        "postgres://127.0.0.1:15432/orders_source.public.orders_us",
    ]
    assert names(account.outputs) == ["kafka://127.0.0.1:9092/all-orders"]


def test_a_transform_that_may_route_and_is_not_known_makes_the_lineage_unknown():
    config = debezium(
        ("mask", {"type": "com.acme.connect.MaskSecrets"}),  # not routing: passes
        ("stamp", {"type": "org.apache.kafka.connect.transforms.TimestampRouter"}),
    )
    account = account_of(config, job="orders-source")
    assert isinstance(account, Unknown)
    assert "org.apache.kafka.connect.transforms.TimestampRouter" in account.reason
    passing = account_of(debezium(("mask", {"type": "com.acme.connect.MaskSecrets"})), job="orders-source")
    assert names(passing.outputs) == ["kafka://127.0.0.1:9092/orders_source.public.orders"]


def test_a_table_regex_is_resolved_against_the_publication_or_is_unknown():
    config = debezium(tables=r"public\.orders_.*")
    alone = account_of(config, job="orders-source")
    assert isinstance(alone, Unknown) and "cannot be resolved from the config alone" in alone.reason

    def publication(host, port, db, name):
        assert (host, port, db, name) == ("127.0.0.1", 15432, "orders_source", "orders_source")
        return ["public.customers", "public.ORDERS_us", "public.orders_eu"]

    account = account_of(config, job="orders-source", publication=publication)
    assert names(account.inputs) == [
        "postgres://127.0.0.1:15432/orders_source.public.ORDERS_us",
        "postgres://127.0.0.1:15432/orders_source.public.orders_eu",
    ], "Debezium matches table names ignoring case"


def test_a_connector_class_lineage_lab_does_not_read_is_unknown_not_declared():
    account = account_of({"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders"})
    assert isinstance(account, Unknown) and account.job == "orders-s3-sink"
    assert "connector class io.confluent.connect.jdbc.JdbcSinkConnector" in account.reason
    assert "its declared lineage is not used as an observation" in account.reason


def test_a_deleted_connector_is_unknown_naming_it_and_connect():
    account = account_of(None)
    assert isinstance(account, Unknown)
    assert "orders-s3-sink" in account.reason and "http://127.0.0.1:8083" in account.reason


def test_a_config_provider_reference_is_not_guessed():
    account = account_of(deployed("orders-s3-sink", topics="${file:/etc/topics.properties:topics}"))
    assert isinstance(account, Unknown) and "config provider reference" in account.reason


# the connector's runs ----------------------------------------------------------------------------------------------
T0 = dt.datetime(2025, 5, 1, 10, 0, tzinfo=dt.UTC)
RUNNING = ConnectorStatus("orders-s3-sink", "RUNNING", "w", (TaskStatus(0, "RUNNING", "w", None),))
PAUSED = ConnectorStatus("orders-s3-sink", "PAUSED", "w", (TaskStatus(0, "PAUSED", "w", None),))


def tick(track: Track, account, status=RUNNING, minute=0):
    return step("orders-s3-sink", track, status, "v1", BUILDER, T0 + dt.timedelta(minutes=minute), account=account)


def test_a_config_changed_under_an_open_run_ends_it_and_a_new_run_carries_the_new_lineage():
    """Marquez makes a streaming run's lineage of every dataset its events named: only a new run can show a topic the
    connector reads no more, so a changed config ends the run (no datasets) and opens the next one of the chain."""
    track, opened = tick(Track(), account_of(deployed("orders-s3-sink")))
    assert [e.eventType.value for e in opened] == ["START", "RUNNING"]
    assert [o.name for o in opened[0].outputs] == ["topics/orders", "orders-dlq"]
    track = Track.load(json.loads(json.dumps(track.dump())))  # through the cursor
    track, quiet = tick(track, account_of(deployed("orders-s3-sink")), minute=1)
    assert quiet == [], "the same account read again: nothing to say"
    track, changed = tick(track, account_of(deployed("orders-s3-sink", topics="orders,refunds")), minute=2)
    complete, start, running = changed
    assert [e.eventType.value for e in changed] == ["COMPLETE", "START", "RUNNING"]
    assert complete.run.runId == opened[0].run.runId
    assert [i.name for i in complete.inputs] == ["orders"], "the stretch ends with what it read"
    assert start.run.runId == running.run.runId != opened[0].run.runId
    assert [i.name for i in running.inputs] == ["orders", "refunds"]
    assert [o.name for o in running.outputs] == ["topics/orders", "topics/refunds", "orders-dlq"]
    origin = running.outputs[0].facets["lineageOrigin"]
    assert origin.reader == "Kafka Connect http://127.0.0.1:8083 config of orders-s3-sink"
    assert origin.columns["order_id"] == "declared"
    track, back = tick(track, account_of(deployed("orders-s3-sink")), minute=3)
    assert [e.eventType.value for e in back] == ["COMPLETE", "START", "RUNNING"]
    assert [i.name for i in back[2].inputs] == ["orders"], "put back: the next run reads orders alone"
    assert back[1].run.runId not in (opened[0].run.runId, running.run.runId)


def test_an_unknown_account_keeps_the_last_one_read_from_the_cursor():
    track, _ = tick(Track(), account_of(deployed("orders-s3-sink", topics="orders,refunds")))
    track = Track.load(json.loads(json.dumps(track.dump())))
    unknown = Unknown("orders-s3-sink", "reading orders-s3-sink's config from Kafka Connect: HTTP 500")
    track, steady = tick(track, unknown, minute=1)
    assert steady == []
    kept = Account.from_dict(track.account)
    assert [i.name for i in kept.inputs] == ["orders", "refunds"], "the last account read, not the declaration"
    assert kept.reader == "Kafka Connect http://127.0.0.1:8083 config of orders-s3-sink"
    _, (abort,) = tick(track, unknown, status=PAUSED, minute=2)
    assert abort.eventType.value == "ABORT"
    assert [i.name for i in abort.inputs] == ["orders", "refunds"], "it ends with the last account read"


def test_a_connector_never_read_is_reported_as_declared_and_says_why():
    _, (start, _) = tick(Track(), Unknown("orders-s3-sink", "Kafka Connect http://127.0.0.1:8083 did not answer"))
    assert [i.name for i in start.inputs] == ["orders"]
    assert start.outputs[0].facets["lineageOrigin"].reader == (
        "the identity module's declaration, because the engine's account is unknown: "
        "Kafka Connect http://127.0.0.1:8083 did not answer"
    )


def test_a_changed_config_of_a_paused_connector_waits_for_its_next_run():
    track, _ = tick(Track(), account_of(deployed("orders-s3-sink")))
    track, _ = tick(track, account_of(deployed("orders-s3-sink")), status=PAUSED, minute=1)
    track, none = tick(track, account_of(deployed("orders-s3-sink", topics="refunds")), status=PAUSED, minute=2)
    assert none == [] and track.run_id is None
    _, (start, _) = tick(track, account_of(deployed("orders-s3-sink", topics="refunds")), minute=3)
    assert [i.name for i in start.inputs] == ["refunds"]
