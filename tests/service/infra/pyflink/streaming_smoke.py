"""A tiny unbounded PyFlink Table API job (datagen -> Python UDF -> blackhole), submitted detached."""

import sys

from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import udf

t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t_env.get_config().set("pipeline.name", sys.argv[1])
t_env.execute_sql(
    "CREATE TABLE src (n BIGINT) WITH "
    "('connector'='datagen', 'rows-per-second'='5', 'fields.n.min'='1', 'fields.n.max'='9')"
)
t_env.execute_sql("CREATE TABLE sink (n BIGINT) WITH ('connector'='blackhole')")
double = udf(lambda n: n * 2, result_type=DataTypes.BIGINT())
t_env.create_temporary_function("double_it", double)
t_env.execute_sql("INSERT INTO sink SELECT double_it(n) FROM src")
