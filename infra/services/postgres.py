"""PostgreSQL from Debian: the one database server behind Marquez, the Iceberg catalog, the schema registry and
the orders source table."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from infra.services.base import Launch, Service, ServiceError, port_open

PG_BIN_CANDIDATES = (Path("/usr/lib/postgresql/15/bin"), Path("/usr/lib/postgresql/16/bin"))
RUN_AS = "postgres"


@dataclass(frozen=True)
class Database:
    """A database and the role that owns it (Marquez needs to own its database on PostgreSQL 15)."""

    name: str
    owner: str
    password: str


def databases(settings) -> tuple[Database, ...]:
    return (
        Database("marquez", "marquez", settings.marquez_db_password),
        Database("iceberg_catalog", "iceberg", settings.catalog_db_password),
        Database("schema_registry", "registry", settings.registry_db_password),
        Database("orders_source", "orders", settings.source_db_password),
        # Dagster's run storage where Dagster is deployed as services (infra/compose); `dagster dev` keeps its own
        Database("dagster", "dagster", settings.dagster_db_password),
    )


def pg_bin() -> Path:
    for candidate in PG_BIN_CANDIDATES:
        if (candidate / "postgres").exists():
            return candidate
    raise ServiceError(
        "postgres: PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin; "
        "run scripts/bootstrap.sh (it installs Debian's `postgresql`)"
    )


class Postgres(Service):
    name = "postgres"
    startup_timeout = 60.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.postgres_port,)

    def _owned_by_runner(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            shutil.chown(path, entry.pw_uid, entry.pw_gid)

    def _let_runner_traverse(self, path: Path) -> None:
        """initdb and postgres run as the ``postgres`` OS user, which must pass through every parent of the data
        directory: a clone under /root or in a ``mktemp -d`` folder has parents it cannot pass. Those get an ACL
        entry letting that one user traverse them (never read or write, never other users)."""
        if os.geteuid() != 0:
            return
        for parent in reversed(path.parents):  # from / down: each check needs the ones above to pass already
            if subprocess.run(["test", "-x", str(parent)], user=RUN_AS).returncode == 0:
                continue
            if not shutil.which("setfacl"):
                raise self.fail(
                    f"the {RUN_AS!r} OS user cannot pass through {parent} to reach {path}: install Debian's `acl` "
                    "(scripts/bootstrap.sh does), make it traversable (chmod o+x), or set LINEAGE_LAB_HOME elsewhere"
                )
            subprocess.run(["setfacl", "-m", f"u:{RUN_AS}:--x", str(parent)], check=True)

    def prepare(self) -> None:
        data = self.data_path
        data.mkdir(parents=True, exist_ok=True)
        self._let_runner_traverse(data)
        if not (data / "PG_VERSION").exists():
            self._initdb(data)
        self._allow_network_clients(data)

    def _allow_network_clients(self, data: Path) -> None:
        """initdb lets in loopback clients only; a server listening beyond loopback (its own container on a Docker
        network) takes password-authenticated clients from anywhere it is reachable, replication included."""
        if self.settings.listen_host in ("127.0.0.1", "localhost", "::1"):
            return
        hba = data / "pg_hba.conf"
        rules = ["host all all all scram-sha-256", "host replication all all scram-sha-256"]
        present = hba.read_text().splitlines()
        missing = [rule for rule in rules if rule not in present]
        if missing:
            with hba.open("a") as out:
                out.write("# lineage-lab: clients on the server's network (listen_addresses beyond loopback)\n")
                out.write("".join(f"{rule}\n" for rule in missing))

    def _initdb(self, data: Path) -> None:
        data.chmod(0o700)
        self._owned_by_runner(data)
        # the password file sits next to the data (same owner); initdb needs an empty data dir, so a sibling
        pwfile = data.with_name(data.name + ".pwfile")
        pwfile.write_text(self.settings.postgres_password + "\n")
        pwfile.chmod(0o600)
        try:
            self._owned_by_runner(pwfile)
            cmd = [
                str(pg_bin() / "initdb"),
                "-D",
                str(data),
                "-U",
                self.settings.postgres_superuser,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ]
            user = RUN_AS if os.geteuid() == 0 else None
            result = subprocess.run(cmd, capture_output=True, text=True, user=user)
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0 and "Permission denied" in result.stderr:
            raise self.fail(
                f"initdb, run as the {RUN_AS!r} OS user, cannot reach {data}: make its parent directories "
                f"traversable (chmod o+x) or set LINEAGE_LAB_HOME to another directory ({result.stderr.strip()})"
            )
        if result.returncode != 0:
            raise self.fail(f"initdb failed: {result.stderr.strip() or result.stdout.strip()}")

    def launch(self) -> Launch:
        return Launch(
            argv=[
                str(pg_bin() / "postgres"),
                "-D",
                str(self.data_path),
                "-p",
                str(self.settings.postgres_port),
                "-c",
                f"listen_addresses={self.settings.listen_host}",
                "-c",
                "unix_socket_directories=",
                "-c",
                "shared_buffers=128MB",
                "-c",
                "max_connections=200",
                # Debezium reads the orders table through logical replication
                "-c",
                "wal_level=logical",
                "-c",
                "max_wal_senders=8",
                "-c",
                "max_replication_slots=8",
            ],
            user=RUN_AS,
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        s = self.settings
        host, port = s.postgres_address
        return psycopg.connect(
            host=host,
            port=port,
            user=s.postgres_superuser,
            password=s.postgres_password,
            dbname=dbname,
            autocommit=True,
            connect_timeout=3,
        )

    def is_healthy(self) -> bool:
        if not port_open(*self.settings.postgres_address):
            return False
        try:
            with self.connect() as conn:
                conn.execute("select 1")
            return True
        except psycopg.Error:
            return False

    def after_start(self) -> None:
        """Create each database with its owning role; passwords are re-applied so settings stay the truth."""
        with self.connect() as conn:
            for db in databases(self.settings):
                role = sql.Identifier(db.owner)
                exists = conn.execute("select 1 from pg_roles where rolname = %s", (db.owner,)).fetchone()
                verb = "alter" if exists else "create"
                conn.execute(
                    sql.SQL(verb + " role {} with login replication password {}").format(role, sql.Literal(db.password))
                )
                if not conn.execute("select 1 from pg_database where datname = %s", (db.name,)).fetchone():
                    conn.execute(sql.SQL("create database {} owner {}").format(sql.Identifier(db.name), role))
