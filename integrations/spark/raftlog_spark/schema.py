"""The fixed schema of the ``raftlog`` source, modelled on Spark's Kafka source.

One row per topic record (``position`` = its place in the entry) and one row per raw STATE
entry (``topic`` null, ``value`` = the entry data, ``position`` 0). CONFIG and CHECKPOINT
entries, topic admin commands and malformed topic entries give no row.
"""

from __future__ import annotations

import functools
from typing import Final

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SCHEMA: Final = StructType(
    [
        StructField("index", LongType(), False),
        StructField("position", IntegerType(), False),
        StructField("term", LongType(), False),
        StructField("topic", StringType(), True),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), False),
        StructField("headers", MapType(StringType(), BinaryType(), False), False),
        StructField("timestamp", TimestampType(), True),
        StructField("producer_timestamp", TimestampType(), True),
    ]
)
COLUMNS: Final = tuple(SCHEMA.fieldNames())
SCHEMA_WITHOUT_HEADERS: Final = StructType([f for f in SCHEMA.fields if f.name != "headers"])
"""``includeHeaders=false`` (as in Spark's Kafka source): no ``headers`` column."""


def schema_for(include_headers: bool) -> StructType:
    return SCHEMA if include_headers else SCHEMA_WITHOUT_HEADERS


@functools.cache
def arrow_schema(include_headers: bool = True) -> pa.Schema:
    """Exactly the Arrow schema Spark checks ``read()``'s record batches against."""
    return to_arrow_schema(schema_for(include_headers), timezone="UTC")
