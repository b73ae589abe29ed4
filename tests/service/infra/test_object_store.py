import uuid

from infra.services.object_store import s3_client


def test_buckets_exist_and_an_object_round_trips(settings):
    s3 = s3_client(settings)
    names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert {settings.warehouse_bucket, settings.archive_bucket} <= names

    key = f"smoke/{uuid.uuid4().hex}.jsonl"
    body = b'{"order_id": "o-1"}\n{"order_id": "o-2"}\n'
    s3.put_object(Bucket=settings.archive_bucket, Key=key, Body=body)
    try:
        assert s3.get_object(Bucket=settings.archive_bucket, Key=key)["Body"].read() == body
        listed = s3.list_objects_v2(Bucket=settings.archive_bucket, Prefix="smoke/")["Contents"]
        assert key in {o["Key"] for o in listed}
    finally:
        s3.delete_object(Bucket=settings.archive_bucket, Key=key)
