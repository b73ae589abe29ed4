"""A Kafka Connect connector's lineage as Connect runs it: read from the connector's live configuration
(``GET /connectors/<name>/config``), whoever last changed it, not from the identity module's declaration.

Why the configuration and not Debezium's own OpenLineage integration (Debezium 3.x emits OpenLineage itself, and sees
from inside the task what the configuration only implies: the tables a regex captures, where its SMTs send records):
it sends through its own transport straight to Marquez, bypassing the outbox that keeps events while Marquez is down;
it covers Debezium's connector (the source), not the project's S3 sink; and its job names, run ids and dataset naming
are its own, so the graph would hold the source twice. The price here: the few renaming rules below are re-read from
the configuration, and one not known here gives ``Unknown`` rather than a guess.

``connector_account`` is pure: what it needs beyond the configuration (the cluster's topics, a publication's tables) is
passed in as callables; the ones the sensor uses are at the end of this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import psycopg
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.lineage import naming
from lineage_assets.lineage.account import Account, DatasetName, Unknown, with_declared_columns
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.source.resource import SourceDatabaseResource

S3_SINK = "lab.lineage.connect.s3.S3JsonLinesSinkConnector"
DEBEZIUM_POSTGRES = "io.debezium.connector.postgresql.PostgresConnector"
REGEX_ROUTER = "org.apache.kafka.connect.transforms.RegexRouter"
LOGICAL_TABLE_ROUTER = "io.debezium.transforms.ByLogicalTableRouter"
EXTRACT_NEW_RECORD_STATE = "io.debezium.transforms.ExtractNewRecordState"
TOPIC_NAME_MATCHES = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
#: the topic naming strategies that name a table's topic <topic.prefix><delimiter><schema><delimiter><table>
_SCHEMA_TOPIC_NAMING = {"io.debezium.schema.SchemaTopicNamingStrategy", "io.debezium.schema.DefaultTopicNamingStrategy"}

#: the cluster's topic names, or why they cannot be listed now
ListTopics = Callable[[], Sequence[str] | str]
#: (host, port, database, publication) -> the publication's tables as "schema.table", or why they cannot be read
PublicationTables = Callable[[str, int, str, str], Sequence[str] | str]

# a table.include.list entry that names one table: schema.table, its dot escaped or not
_LITERAL_TABLE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\\?\.([A-Za-z_][A-Za-z0-9_]*)")


class _Cannot(Exception):
    """Why this configuration's lineage cannot be read (becomes the account's ``Unknown`` reason)."""


def connector_reader(connect_url: str, connector: str) -> str:
    """What an account read from Connect says it was read from (names the connector and the Connect cluster)."""
    return f"Kafka Connect {connect_url} config of {connector}"


def connector_account(
    pipeline: Pipeline,
    job: str,
    config: Mapping[str, str] | None,
    *,
    bootstrap: str,
    list_topics: ListTopics,
    reader: str,
    publication_tables: PublicationTables | None = None,
) -> Account | Unknown:
    """The lineage of pipeline job ``job`` from ``config``, its connector's live configuration as Connect returns it
    (None: Connect has no such connector). ``bootstrap``: the cluster the connector's topics are named after;
    ``reader``: where the config was read (``connector_reader``). ``list_topics`` may also raise: that propagates.
    Connect shows no columns: each output's declared column lineage is added, marked declared."""
    if config is None:
        return Unknown(
            job,
            f"{reader}: not found, the connector is not on Kafka Connect: nothing runs it now; materialize its "
            "asset to deploy it",
        )
    cls = config.get("connector.class", "")
    try:
        if cls == S3_SINK:
            inputs, outputs = _s3_sink(config, bootstrap, list_topics)
        elif cls == DEBEZIUM_POSTGRES:
            inputs, outputs = _debezium_postgres(config, bootstrap, publication_tables)
        else:
            return Unknown(
                job,
                f"{reader}: connector class {cls or '(none)'}: lineage-lab reads lineage only from the configurations "
                f"of {S3_SINK} and {DEBEZIUM_POSTGRES}; its declared lineage is not used as an observation",
            )
    except _Cannot as exc:
        return Unknown(job, f"{reader}: {exc}")
    account = Account(
        job=job,
        reader=reader,
        inputs=tuple(dict.fromkeys(_spelled(pipeline, d) for d in inputs)),
        outputs=tuple(dict.fromkeys(_spelled(pipeline, d) for d in outputs)),
    )
    return with_declared_columns(account, pipeline)


def describe(account: Account | Unknown) -> str:
    """One line for an asset observation: what the connector reads and writes, or why that is unknown."""
    if isinstance(account, Unknown):
        return f"unknown: {account.reason}"
    reads = ", ".join(str(d) for d in account.inputs) or "nothing"
    writes = ", ".join(str(d) for d in account.outputs) or "nothing"
    return f"reads {reads}; writes {writes}"


# the two connector classes ---------------------------------------------------------------------------------------
def _s3_sink(
    config: Mapping[str, str], bootstrap: str, list_topics: ListTopics
) -> tuple[list[DatasetName], list[DatasetName]]:
    """Each topic it consumes, the archive prefix of each (``<s3.prefix>topics/<topic>``), its dead-letter topic."""
    listed, pattern = _value(config, "topics").strip(), _value(config, "topics.regex").strip()
    if listed and pattern:
        raise _Cannot("both topics and topics.regex are set (Connect refuses such a config)")
    if listed:
        topics = list(dict.fromkeys(t.strip() for t in listed.split(",") if t.strip()))
    elif pattern:
        topics = _matching_topics(pattern, list_topics)
    else:
        raise _Cannot("neither topics nor topics.regex is set")
    bucket = _value(config, "s3.bucket.name").strip()
    if not bucket:
        raise _Cannot("s3.bucket.name is not set")
    prefix = _value(config, "s3.prefix").strip()
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"  # as the sink normalises it
    inputs = [_named(naming.kafka, bootstrap, t) for t in topics]
    outputs = [_named(naming.s3, f"s3://{bucket}/{prefix}topics/{t}") for t in topics]
    dead_letters = _value(config, "errors.deadletterqueue.topic.name").strip()
    if dead_letters:
        outputs.append(_named(naming.kafka, bootstrap, dead_letters))
    return inputs, outputs


def _matching_topics(pattern: str, list_topics: ListTopics) -> list[str]:
    compiled = _compile(pattern, "topics.regex")
    topics = list_topics()
    if isinstance(topics, str):
        raise _Cannot(f"topics.regex {pattern!r} cannot be resolved against the cluster's topics: {topics}")
    # internal topics (Connect's own, __consumer_offsets, ...) are not data
    return sorted(t for t in set(topics) if not t.startswith("_") and compiled.fullmatch(t))


def _debezium_postgres(
    config: Mapping[str, str], bootstrap: str, publication_tables: PublicationTables | None
) -> tuple[list[DatasetName], list[DatasetName]]:
    """Each captured table, and the topic its changes go to after the connector's transforms."""
    host = _value(config, "database.hostname").strip()
    db = _value(config, "database.dbname").strip()
    prefix = _value(config, "topic.prefix").strip()
    missing = [k for k, v in (("database.hostname", host), ("database.dbname", db), ("topic.prefix", prefix)) if not v]
    if missing:
        raise _Cannot(f"{', '.join(missing)} not set")
    port_text = _value(config, "database.port").strip() or "5432"
    if not port_text.isdigit():
        raise _Cannot(f"database.port {port_text!r} is not a port number")
    port = int(port_text)
    strategy = config.get("topic.naming.strategy", "").strip()
    if strategy and strategy not in _SCHEMA_TOPIC_NAMING:
        raise _Cannot(f"topic.naming.strategy {strategy}: lineage-lab cannot tell the topics it names")
    delimiter = config.get("topic.delimiter", ".") or "."
    tables = _captured_tables(config, host, port, db, publication_tables)
    routes = _routes(config)
    inputs, outputs = [], []
    for schema, table in tables:
        inputs.append(_named(naming.postgres, host, port, db, schema, table))
        topic = _kafka_topic_chars(delimiter.join((prefix, schema, table)))
        for route in routes:
            topic = route(topic)
        outputs.append(_named(naming.kafka, bootstrap, topic))
    return inputs, outputs


def _captured_tables(
    config: Mapping[str, str], host: str, port: int, db: str, publication_tables: PublicationTables | None
) -> list[tuple[str, str]]:
    """The (schema, table) pairs the connector captures: each entry of ``table.include.list`` naming one table, and the
    tables of the connector's publication a regex entry matches (Debezium matches the whole "schema.table", ignoring
    case); without an include list, every table of the publication the schema/table exclude lists leave."""
    entries = _regex_list(_value(config, "table.include.list"))
    tables: list[str] = []
    patterns: list[str] = []
    for entry in entries:
        literal = _LITERAL_TABLE.fullmatch(entry)
        (tables.append(f"{literal[1]}.{literal[2]}") if literal else patterns.append(entry))
    if patterns or not entries:
        publication = config.get("publication.name", "").strip() or "dbz_publication"
        what = f"table.include.list regex {', '.join(patterns)}" if patterns else "no table.include.list (every table)"
        if publication_tables is None:
            raise _Cannot(f"{what} cannot be resolved from the config alone (the tables of publication {publication})")
        listed = publication_tables(host, port, db, publication)
        if isinstance(listed, str):
            raise _Cannot(f"{what} cannot be resolved against publication {publication}: {listed}")
        compiled = [_compile(p, "table.include.list", re.IGNORECASE) for p in patterns]
        excluded = _compiled_list(config, "table.exclude.list")
        found = sorted(
            t
            for t in set(listed)
            if (any(c.fullmatch(t) for c in compiled) if entries else not any(c.fullmatch(t) for c in excluded))
        )
        if not found:
            raise _Cannot(
                f"{what}: no table of publication {publication} matches (Debezium creates the publication when the "
                "connector starts: is it running?)"
            )
        tables += found
    schemas_in = _compiled_list(config, "schema.include.list")
    schemas_out = _compiled_list(config, "schema.exclude.list")
    captured = []
    for name in dict.fromkeys(tables):
        schema, _, table = name.partition(".")
        if schemas_in and not any(c.fullmatch(schema) for c in schemas_in):
            continue
        if any(c.fullmatch(schema) for c in schemas_out):
            continue
        captured.append((schema, table))
    return captured


# transforms --------------------------------------------------------------------------------------------------------
def _routes(config: Mapping[str, str]) -> list[Callable[[str], str]]:
    """The connector's transforms that rename topics, in order, as topic -> topic functions; a transform that may
    rename topics in a way not known here makes the lineage unknown, any other passes records through unrenamed."""
    routes = []
    for alias in _list(config.get("transforms")):
        cls = config.get(f"transforms.{alias}.type", "").strip()
        key = f"transforms.{alias}."
        options = {k.removeprefix(key): v for k, v in config.items() if k.startswith(key)}
        if cls == REGEX_ROUTER:
            route = _regex_route(alias, options.get("regex", ""), options.get("replacement", ""))
        elif cls == LOGICAL_TABLE_ROUTER:
            route = _regex_route(alias, options.get("topic.regex", ""), options.get("topic.replacement", ""))
        elif cls == EXTRACT_NEW_RECORD_STATE and options.get("route.by.field", "").strip():
            raise _Cannot(f"transform {alias} ({cls}) routes each record by its field {options['route.by.field']!r}")
        elif re.search(r"Route|Topic", cls.rsplit(".", 1)[-1]):
            raise _Cannot(f"transform {alias} ({cls}) may rename topics in a way lineage-lab does not know")
        else:
            continue  # ExtractNewRecordState, ExtractField, ReplaceField, Cast, InsertField, HeaderFrom, ...
        routes.append(_conditional(config, alias, options, route))
    return routes


def _regex_route(alias: str, regex: str, replacement: str) -> Callable[[str], str]:
    """A topic matching ``regex`` whole becomes ``replacement`` (Java's ``$1``/``${name}``); any other stays."""
    if not regex:
        raise _Cannot(f"transform {alias} has no regex")
    compiled = _compile(regex, f"transforms.{alias}")

    def route(topic: str) -> str:
        match = compiled.fullmatch(topic)
        return _java_replacement(match, replacement, alias) if match else topic

    return route


def _conditional(
    config: Mapping[str, str], alias: str, options: Mapping[str, str], route: Callable[[str], str]
) -> Callable[[str], str]:
    """``route`` applied under the transform's predicate: one on the topic name is followed; any other (a header, a
    tombstone) applies per record, so where a table's records go cannot be told."""
    predicate = options.get("predicate", "").strip()
    if not predicate:
        return route
    kind = config.get(f"predicates.{predicate}.type", "").strip()
    if kind != TOPIC_NAME_MATCHES:
        raise _Cannot(f"transform {alias} renames topics only for records matching predicate {predicate} ({kind})")
    pattern = _compile(config.get(f"predicates.{predicate}.pattern", ""), f"predicates.{predicate}.pattern")
    negate = options.get("negate", "false").strip().lower() == "true"
    return lambda topic: route(topic) if bool(pattern.fullmatch(topic)) != negate else topic


def _java_replacement(match: re.Match, replacement: str, alias: str) -> str:
    """``replacement`` expanded as Java's ``Matcher.replaceFirst`` does: ``$n`` (the longest number that is a group),
    ``${name}``, ``\\x`` for a literal x; an unmatched group gives nothing."""
    out, i, groups = [], 0, match.re.groups
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and replacement[i + 1 : i + 2] == "{" and "}" in replacement[i:]:
            end = replacement.index("}", i)
            name = replacement[i + 2 : end]
            if name not in match.re.groupindex:
                raise _Cannot(f"transform {alias}: replacement {replacement!r} names no group {name!r}")
            out.append(match.group(name) or "")
            i = end + 1
        elif c == "$" and replacement[i + 1 : i + 2].isdigit():
            ref, i = int(replacement[i + 1]), i + 2
            while i < len(replacement) and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups:
                ref, i = ref * 10 + int(replacement[i]), i + 1
            if ref > groups:
                raise _Cannot(
                    f"transform {alias}: replacement {replacement!r} refers to group {ref}, which is not there"
                )
            out.append(match.group(ref) or "")
        elif c in "\\$":
            raise _Cannot(f"transform {alias}: replacement {replacement!r} is not one Java accepts")
        else:
            out.append(c)
            i += 1
    return "".join(out)


# helpers -----------------------------------------------------------------------------------------------------------
def _value(config: Mapping[str, str], key: str) -> str:
    value = config.get(key) or ""
    if "${" in value:
        raise _Cannot(f"{key} is {value!r}, a config provider reference only the worker resolves")
    return value


def _list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _regex_list(value: str | None) -> list[str]:
    """A Debezium list of regexes: split at commas outside {m,n}, [...] and escapes."""
    entries, current, depth, escaped = [], [], 0, False
    for c in value or "":
        if escaped:
            current.append(c)
            escaped = False
            continue
        if c == "\\":
            escaped = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth = max(depth - 1, 0)
        elif c == "," and depth == 0:
            entries.append("".join(current).strip())
            current = []
            continue
        current.append(c)
    entries.append("".join(current).strip())
    return [e for e in entries if e]


def _compile(pattern: str, key: str, flags: int = 0) -> re.Pattern:
    """A Java regex in Python's dialect (named groups ``(?<name>`` become ``(?P<name>``); one Python cannot read makes
    the lineage unknown rather than guessed."""
    try:
        return re.compile(re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern), flags)
    except re.error as exc:
        raise _Cannot(f"{key} {pattern!r} is not a regex lineage-lab can read ({exc})") from exc


def _compiled_list(config: Mapping[str, str], key: str) -> list[re.Pattern]:
    """A Debezium include/exclude list, matched as Debezium does: whole names, ignoring case."""
    return [_compile(p, key, re.IGNORECASE) for p in _regex_list(config.get(key))]


def _kafka_topic_chars(topic: str) -> str:
    """As Debezium sanitises a topic name: each character Kafka does not allow becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", topic)


def _named(function: Callable[..., tuple[str, str]], *args) -> DatasetName:
    try:
        return DatasetName(*function(*args))
    except naming.NamingError as exc:
        raise _Cannot(str(exc)) from exc


def _spelled(pipeline: Pipeline, name: DatasetName) -> DatasetName:
    """The identity module's spelling of a dataset it declares (the same physical dataset: ``localhost`` for
    ``127.0.0.1``), so the events name one node; any other dataset keeps the name it was given."""
    for ds in pipeline.datasets.values():
        if naming.physical_key(ds.namespace, ds.name) == name.physical:
            return DatasetName(ds.namespace, ds.name)
    return name


# the I/O the sensor passes in --------------------------------------------------------------------------------------
def cluster_topics(kafka: KafkaConnection | str, timeout: float = 10.0) -> ListTopics:
    """The cluster's topic names, listed once (on first use) per returned callable."""
    listed: list[Sequence[str] | str] = []

    def read() -> Sequence[str] | str:
        if not listed:
            config = KafkaConnection.of(kafka).client_config(**{"socket.timeout.ms": int(timeout * 1000)})
            try:
                listed.append(sorted(AdminClient(config).list_topics(timeout=timeout).topics))
            except KafkaException as exc:
                listed.append(f"Kafka at {kafka} did not list its topics within {timeout:.0f} s ({exc})")
        return listed[0]

    return read


def source_publication_tables(source_db: SourceDatabaseResource) -> PublicationTables:
    """A publication's tables, read from the source database the resource connects to, only when that is the
    connector's database (another server's publication says nothing of what the connector captures)."""

    def read(host: str, port: int, db: str, publication: str) -> Sequence[str] | str:
        wanted = naming.physical_key(f"postgres://{host}:{port}", db)
        have = naming.physical_key(f"postgres://{source_db.host}:{source_db.port}", source_db.dbname)
        if wanted != have:
            return (
                f"the source_db resource connects to {have[0]}/{have[1]}, not the connector's {wanted[0]}/{wanted[1]}"
            )
        query = "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s"
        try:
            with source_db.connect() as conn:
                return sorted(row[0] for row in conn.execute(query, (publication,)).fetchall())
        except psycopg.Error as exc:
            return f"reading it from {host}:{port}/{db} failed ({exc.__class__.__name__}: {exc})".strip()

    return read
