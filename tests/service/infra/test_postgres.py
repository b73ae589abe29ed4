from infra.services.postgres import Postgres, databases


def test_each_database_is_owned_by_its_own_login_role(settings):
    with Postgres(settings).connect() as conn:
        owners = dict(
            conn.execute(
                "select d.datname, r.rolname from pg_database d join pg_roles r on r.oid = d.datdba"
            ).fetchall()
        )
        wal_level = conn.execute("show wal_level").fetchone()[0]
    for db in databases(settings):
        assert owners.get(db.name) == db.owner, f"{db.name} must be owned by {db.owner}"
    assert wal_level == "logical", "Debezium reads the orders table through logical replication"
