"""S3-compatible object store: s3proxy with its filesystem backend, holding the Iceberg warehouse and the archive."""

from __future__ import annotations

from infra.artifacts import bundle_dir
from infra.services.base import Launch, Service, http_ok, java_binary, render
from infra.settings import StackSettings

BUNDLE = "s3proxy"


def s3_client(settings: StackSettings):
    """A boto3 client for the stack's store."""
    return s3_client_for(settings.s3_endpoint, settings.s3_access_key, settings.s3_secret_key, settings.s3_region)


def s3_client_for(endpoint: str, access_key: str, secret_key: str, region: str):
    """A boto3 client for an S3-compatible store (path-style, short timeouts so a dead store fails fast)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=region,
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=2,
            read_timeout=10,
            retries={"total_max_attempts": 1},  # one attempt: in legacy mode max_attempts counts retries
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


class ObjectStore(Service):
    name = "object-store"
    bundles = (BUNDLE,)
    startup_timeout = 60.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.object_store_port,)

    def prepare(self) -> None:
        s = self.settings
        self.data_path.mkdir(parents=True, exist_ok=True)
        render(
            "s3proxy.properties",
            self.conf_path / "s3proxy.properties",
            host=s.listen_host,
            port=s.object_store_port,
            access_key=s.s3_access_key,
            secret_key=s.s3_secret_key,
            basedir=self.data_path,
        )

    def launch(self) -> Launch:
        jar = next(bundle_dir(self.settings.jars_dir, BUNDLE).glob("s3proxy-*.jar"))
        return Launch(
            [
                java_binary(),
                f"-Xmx{self.settings.object_store_heap_mb}m",
                "-XX:+UseSerialGC",
                "-Djava.net.preferIPv4Stack=true",
                "-jar",
                str(jar),
                "--properties",
                str(self.conf_path / "s3proxy.properties"),
            ]
        )

    def is_healthy(self) -> bool:
        return http_ok(f"{self.settings.s3_endpoint}/healthz")

    def after_start(self) -> None:
        client = s3_client(self.settings)
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        for bucket in (self.settings.warehouse_bucket, self.settings.archive_bucket):
            if bucket not in existing:
                client.create_bucket(Bucket=bucket)
