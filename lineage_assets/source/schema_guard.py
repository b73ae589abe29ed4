"""Changes to the source table that would break the pipeline are refused where they first enter: in PostgreSQL.

Dropping a column of ``public.orders`` that a job reads downstream, or changing its type, fails in the database
with a message that names the column, every job and column derived from it (the identity module's column
lineage, followed to the end) and what to do. Compatible changes (a new column) pass. The Avro compatibility rules
of the registry cannot catch these: Debezium makes every column an optional field, and dropping an optional field
is a compatible change to Avro, while the Flink jobs read it.

PostgreSQL event triggers do this (``sql_drop`` for dropped columns, ``ddl_command_end`` for type changes). Creating
them needs a superuser, so the source table's asset installs them with the administrator connection when one is
configured, and says so when not.
"""

from __future__ import annotations

import json

from lineage_assets.lineage.identity import Pipeline

SOURCE = "source_orders"
#: the guarded table, as PostgreSQL names it
TABLE_SCHEMA, TABLE_NAME = "public", "orders"
FUNCTION_PREFIX = "lineage_lab_guard_orders"
#: PostgreSQL's own spelling (``format_type``) of the identity module's source column types
FORMAT_TYPES = {"text": "text", "timestamp": "timestamp without time zone"}


def readers(pipeline: Pipeline, source_key: str = SOURCE) -> dict[str, list[str]]:
    """Column of the source -> ``job -> asset.column`` for every column derived from it, however far downstream."""
    derived: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for job in pipeline.jobs.values():
        for out_key, columns in job.column_lineage.items():
            for column, sources in columns.items():
                for src in sources:
                    derived.setdefault((src.dataset, src.column), []).append((job.name, out_key, column))
    found: dict[str, list[str]] = {}
    for column in pipeline.dataset(source_key).column_names:
        uses, frontier, seen = set(), [(source_key, column)], set()
        while frontier:
            at = frontier.pop()
            for job, out_key, out_column in derived.get(at, []):
                asset = "/".join(pipeline.dataset(out_key).asset_key)
                uses.add(f"{job} -> {asset}.{out_column}")
                if (out_key, out_column) not in seen:
                    seen.add((out_key, out_column))
                    frontier.append((out_key, out_column))
        if uses:
            found[column] = sorted(uses)
    return found


def install_sql(guarded: dict[str, list[str]], types: dict[str, str]) -> str:
    """The functions and event triggers; ``types``: the guarded columns' types now (``format_type``)."""
    consumers = json.dumps({c: "; ".join(u) for c, u in guarded.items()}).replace("'", "''")
    declared = json.dumps(types).replace("'", "''")
    hint = (
        "Change the jobs that read it (and their columns in lineage_assets/lineage/identity.py) first and redeploy "
        "them; `lineage-lab impact orders_source.public.orders.<column>` lists them. Then change the table."
    ).replace("'", "''")
    table = f"{TABLE_SCHEMA}.{TABLE_NAME}"
    return f"""
CREATE OR REPLACE FUNCTION public.{FUNCTION_PREFIX}_drop() RETURNS event_trigger LANGUAGE plpgsql AS $guard$
DECLARE
    readers jsonb := '{consumers}'::jsonb;
    gone record;
    col text;
BEGIN
    FOR gone IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table column' LOOP
        IF gone.object_identity LIKE '{table}.%' THEN
            col := substr(gone.object_identity, length('{table}.') + 1);
            IF readers ? col THEN
                RAISE EXCEPTION USING
                    MESSAGE = format('lineage-lab refuses to drop column %s of {table}: it is read downstream by %s',
                                     col, readers ->> col),
                    HINT = '{hint}';
            END IF;
        END IF;
    END LOOP;
END
$guard$;

CREATE OR REPLACE FUNCTION public.{FUNCTION_PREFIX}_alter() RETURNS event_trigger LANGUAGE plpgsql AS $guard$
DECLARE
    readers jsonb := '{consumers}'::jsonb;
    declared jsonb := '{declared}'::jsonb;
    now_type text;
    col text;
BEGIN
    IF to_regclass('{table}') IS NULL
       OR NOT EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() WHERE objid = '{table}'::regclass) THEN
        RETURN;
    END IF;
    FOR col IN SELECT jsonb_object_keys(declared) LOOP
        SELECT format_type(a.atttypid, a.atttypmod) INTO now_type FROM pg_attribute a
         WHERE a.attrelid = '{table}'::regclass AND a.attname = col AND NOT a.attisdropped;
        IF now_type IS NOT NULL AND now_type <> declared ->> col THEN
            RAISE EXCEPTION USING
                MESSAGE = format('lineage-lab refuses to change column %s of {table} from %s to %s: it is read '
                                 'downstream by %s', col, declared ->> col, now_type, readers ->> col),
                HINT = '{hint}';
        END IF;
    END LOOP;
END
$guard$;

DROP EVENT TRIGGER IF EXISTS {FUNCTION_PREFIX}_drop;
CREATE EVENT TRIGGER {FUNCTION_PREFIX}_drop ON sql_drop WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION public.{FUNCTION_PREFIX}_drop();
DROP EVENT TRIGGER IF EXISTS {FUNCTION_PREFIX}_alter;
CREATE EVENT TRIGGER {FUNCTION_PREFIX}_alter ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION public.{FUNCTION_PREFIX}_alter();
"""


def install(admin_conn, pipeline: Pipeline) -> dict[str, list[str]]:
    """Install (or refresh) the guard through a superuser connection to the source database; returns what it
    guards. A guarded column the table does not have yet (an optional one the source team adds later) is held to
    its declared type, so adding it with another type is refused too."""
    guarded = readers(pipeline)
    rows = admin_conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        (f"{TABLE_SCHEMA}.{TABLE_NAME}",),
    ).fetchall()
    types = {name: kind for name, kind in rows if name in guarded}
    for column in pipeline.dataset(SOURCE).columns:
        if column.name in guarded and column.name not in types and column.type in FORMAT_TYPES:
            types[column.name] = FORMAT_TYPES[column.type]
    admin_conn.execute(install_sql(guarded, types))
    return guarded
