"""Schema registry with the Confluent-compatible REST API: Apicurio Registry 3 (Quarkus), stored in PostgreSQL."""

from __future__ import annotations

from infra.artifacts import bundle_dir
from infra.services.base import Launch, Service, http_ok, java_binary

BUNDLE = "apicurio-registry"


class SchemaRegistry(Service):
    name = "schema-registry"
    bundles = (BUNDLE,)
    startup_timeout = 120.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.schema_registry_port,)

    def launch(self) -> Launch:
        s = self.settings
        runner = next(bundle_dir(s.jars_dir, BUNDLE).glob("apicurio-registry-app-*-runner.jar"))
        env = {
            "QUARKUS_HTTP_HOST": s.listen_host,
            "QUARKUS_HTTP_PORT": str(s.schema_registry_port),
            "APICURIO_STORAGE_KIND": "sql",
            "APICURIO_STORAGE_SQL_KIND": "postgresql",
            "APICURIO_DATASOURCE_URL": s.jdbc_url("schema_registry"),
            "APICURIO_DATASOURCE_USERNAME": "registry",
            "APICURIO_DATASOURCE_PASSWORD": s.registry_db_password,
            "APICURIO_DATASOURCE_JDBC_INITIAL_SIZE": "2",
            "APICURIO_DATASOURCE_JDBC_MIN_SIZE": "2",
            "APICURIO_DATASOURCE_JDBC_MAX_SIZE": "10",
        }
        return Launch(
            [
                java_binary(),
                f"-Xmx{s.schema_registry_heap_mb}m",
                "-XX:+UseSerialGC",
                "-XX:MaxMetaspaceSize=192m",
                "-Djava.util.logging.manager=org.jboss.logmanager.LogManager",
                "-Djava.net.preferIPv4Stack=true",
                "-jar",
                str(runner),
            ],
            env=env,
            cwd=self.data_path,
        )

    def prepare(self) -> None:
        self.data_path.mkdir(parents=True, exist_ok=True)

    def is_healthy(self) -> bool:
        s = self.settings
        return http_ok(f"http://{s.host}:{s.schema_registry_port}/health/ready")

    def after_start(self) -> None:
        """Confluent's default compatibility (BACKWARD); Apicurio's own default is NONE."""
        import requests

        resp = requests.put(
            f"{self.settings.schema_registry_url}/config", json={"compatibility": "BACKWARD"}, timeout=10
        )
        if resp.status_code >= 300:
            raise self.fail(f"setting global compatibility failed: HTTP {resp.status_code} {resp.text[:200]}")
