"""The Dagster resource of the source database, whose orders table Debezium captures (built from the settings by
resources.build_resources)."""

from __future__ import annotations

import dagster as dg
import psycopg


class SourceDatabaseResource(dg.ConfigurableResource):
    """The PostgreSQL database holding the orders table that Debezium captures."""

    host: str
    port: int
    dbname: str
    user: str
    password: str
    #: a superuser of the same server, only to install the schema guard (event triggers need one); empty: not
    #: installed, and the source table's asset says so
    admin_user: str = ""
    admin_password: str = ""
    #: seconds the server lets one statement run before cancelling it (a stalled query is an error naming the
    #: server, never a wait without end: reconciliation and the sensors read this database)
    statement_timeout_s: int = 60

    def connect(self, admin: bool = False) -> psycopg.Connection:
        return psycopg.connect(
            host=self.host,
            port=self.port,
            dbname=self.dbname,
            user=self.admin_user if admin else self.user,
            password=self.admin_password if admin else self.password,
            autocommit=True,
            connect_timeout=5,
            options=f"-c statement_timeout={self.statement_timeout_s * 1000}",
        )
