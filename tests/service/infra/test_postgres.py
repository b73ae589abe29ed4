from pathlib import Path

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


def test_initdb_reaches_a_data_dir_below_a_folder_only_root_may_enter(settings, tmp_path):
    """A clone under /root or in `mktemp -d` (mode 0700): the postgres OS user gets passage, and nothing more."""
    import dataclasses
    import os
    import shutil
    import stat
    import subprocess
    import tempfile

    import pytest

    if os.geteuid() != 0:
        pytest.skip("only root starts PostgreSQL as the postgres OS user")
    private = Path(tempfile.mkdtemp(dir=tmp_path))  # 0700, owned by root
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    service = Postgres(dataclasses.replace(settings, home=private / "clone" / ".lab"))
    try:
        service.prepare()
        assert (service.data_path / "PG_VERSION").exists(), "initdb ran as postgres below a 0700 folder"
        assert stat.S_IMODE(private.stat().st_mode) & 0o007 == 0, "others still may not enter the folder"
        acl = subprocess.run(["getfacl", "-p", str(private)], capture_output=True, text=True, check=True).stdout
        assert "user:postgres:--x" in acl.splitlines(), acl
    finally:
        shutil.rmtree(private, ignore_errors=True)
