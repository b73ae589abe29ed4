"""Marquez, the lineage store: its API server (a Dropwizard jar, database in the stack's PostgreSQL, owned by its
own role) and its web UI (Marquez's own Node server, which serves the UI bundle and proxies /api to the API).

Both come from ``infra/artifacts.toml`` (Maven Central where it serves Marquez, else the checked vendor copy)."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlsplit

from infra.artifacts import bundle_dir
from infra.services.base import Launch, Service, http_ok, java_binary, render

API_BUNDLE = "marquez"
WEB_BUNDLE = "marquez-web"
BIND_LOOPBACK = Path(__file__).resolve().parent.parent / "node" / "bind_loopback.js"


class Marquez(Service):
    name = "marquez"
    bundles = (API_BUNDLE,)
    startup_timeout = 120.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.marquez_port, self.settings.marquez_admin_port)

    @property
    def config_path(self) -> Path:
        return self.conf_path / "marquez.yml"

    def prepare(self) -> None:
        s = self.settings
        render(
            "marquez.yml",
            self.config_path,
            host=s.listen_host,
            port=s.marquez_port,
            admin_port=s.marquez_admin_port,
            jdbc_url=s.jdbc_url("marquez"),
        )

    def launch(self) -> Launch:
        s = self.settings
        jar = next(bundle_dir(s.jars_dir, API_BUNDLE).glob("marquez-api-*.jar"), None)
        if jar is None:
            raise self.fail("marquez-api jar missing: run `lineage-lab artifacts resolve` (scripts/bootstrap.sh)")
        return Launch(
            [
                java_binary(),
                f"-Xmx{s.marquez_heap_mb}m",
                "-Xms128m",
                "-XX:+UseSerialGC",
                "-XX:MaxMetaspaceSize=192m",
                "-Djava.net.preferIPv4Stack=true",
                "-jar",
                str(jar),
                "server",
                str(self.config_path),
            ],
            env={"MARQUEZ_DB_PASSWORD": s.marquez_db_password},
            cwd=self.conf_path,
        )

    def is_healthy(self) -> bool:
        s = self.settings
        return http_ok(f"http://{s.host}:{s.marquez_admin_port}/healthcheck") and http_ok(
            f"{s.marquez_url}/api/v1/namespaces"
        )


class MarquezWeb(Service):
    name = "marquez-web"
    bundles = (WEB_BUNDLE,)
    startup_timeout = 60.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.marquez_web_port,)

    def launch(self) -> Launch:
        s = self.settings
        node = shutil.which("node")
        if not node:
            raise self.fail("Node.js is not installed: run scripts/bootstrap.sh (it installs Debian's `nodejs`)")
        app = next(bundle_dir(s.jars_dir, WEB_BUNDLE).glob("marquez-web-*/setupProxy.js"), None)
        if app is None:
            raise self.fail("the Marquez web UI is missing: run `lineage-lab artifacts resolve`")
        api = urlsplit(s.marquez_url)
        # Marquez's server calls listen(port) with no address; the preload binds it to the stack's listen host
        return Launch(
            [node, "--require", str(BIND_LOOPBACK), str(app)],
            env={
                "MARQUEZ_HOST": api.hostname or s.host,
                "MARQUEZ_PORT": str(api.port or s.marquez_port),
                "WEB_PORT": str(s.marquez_web_port),
                "LINEAGE_LAB_BIND_HOST": s.listen_host,
                "NODE_ENV": "production",
            },
            cwd=app.parent,
        )

    def is_healthy(self) -> bool:
        return http_ok(f"{self.settings.marquez_web_url}/healthcheck")
