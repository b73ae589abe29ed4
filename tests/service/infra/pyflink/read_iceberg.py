"""Batch Flink SQL over the stack's Iceberg REST catalog; prints one JSON line per row (argv: uri namespace table
s3-endpoint access-key secret-key)."""

import json
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

uri, namespace, table, endpoint, access_key, secret_key = sys.argv[1:7]
t_env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t_env.execute_sql(
    f"""CREATE CATALOG lakehouse WITH ('type'='iceberg', 'catalog-type'='rest', 'uri'='{uri}',
        'io-impl'='org.apache.iceberg.aws.s3.S3FileIO', 's3.endpoint'='{endpoint}', 's3.path-style-access'='true',
        's3.access-key-id'='{access_key}', 's3.secret-access-key'='{secret_key}', 'client.region'='us-east-1')"""
)
with t_env.execute_sql(
    f"SELECT order_id, item, CAST(price AS STRING), supplier, CAST(bid_time AS STRING) "
    f"FROM lakehouse.`{namespace}`.`{table}`"
).collect() as rows:
    for row in rows:
        print("ROW " + json.dumps(list(row)))
