"""OUT's tables in the session's catalog (`--database NAME`): `SELECT ... FROM NAME.requests`.

Each table the job wrote becomes an external Parquet table of that name at its place in OUT
(the data stays where the job wrote it; dropping the table leaves it), its partitions
recovered: requests, responses, records, frames, delivery, delivery_summary, and the group and
share tables as groups_<name> and share_<name> (groups/members -> NAME.groups_members). A
table of that name which kwire made is replaced; one it did not make (no `kwire.table`
property) is left alone and the job says so. The same SQL serves a classic session (its
in-memory catalog, or Hive's with spark.sql.catalogImplementation=hive) and a Spark Connect one
(the server's catalog, which other clients of the server then see).
"""

from __future__ import annotations

import os
import re

from pyspark.sql import SparkSession

from kwire.capture.distributed import local_path

# A property on each table kwire makes: the OUT table it names ("requests", "groups/members").
MARK = "kwire.table"
_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CatalogError(Exception):
    """The tables cannot be made as asked (the message says why, in one line)."""


def table_name(name: str) -> str:
    """The catalog's name for an OUT table: groups/members -> groups_members."""
    return name.replace("/", "_")


def quoted(database: str) -> str:
    """`database` (NAME, or CATALOG.NAME) back-quoted for SQL; CatalogError for a name that is
    not plain identifiers."""
    parts = database.split(".")
    if not database or not all(_PART.fullmatch(p) for p in parts):
        raise CatalogError(
            f"--database {database!r}: give NAME or CATALOG.NAME, letters, digits and _"
        )
    return ".".join(f"`{p}`" for p in parts)


def _location(out: str, relative: str) -> str:
    path = f"{out.rstrip('/')}/{relative}"
    local = local_path(path)
    return os.path.abspath(local) if local is not None else path


def _sql_text(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# The OUT tables partitioned by a column (Hive-style directories): their new partitions are
# recovered on every publish.
PARTITIONED = ("requests", "responses")


def publish(
    spark: SparkSession,
    database: str,
    out: str,
    tables: dict[str, str],
    replace: bool = True,
) -> list[str]:
    """Makes DATABASE.<table> for each OUT table in `tables` (name -> path relative to OUT, as
    the manifest lists them), replacing kwire's own of that name (`replace`; without it, as
    kwire live does after each batch of the same OUT, those stay and only get their new
    partitions); returns the tables' full names."""
    db = quoted(database)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    made = []
    for name, relative in sorted(tables.items()):
        table = table_name(name)
        full = f"{db}.`{table}`"
        exists = _kwire_table(spark, database, table)
        if exists and replace:
            spark.sql(f"DROP TABLE {full}")
        if replace or not exists:
            location = _sql_text(_location(out, relative))
            spark.sql(
                f"CREATE TABLE {full} USING parquet LOCATION {location} "
                f"TBLPROPERTIES ({_sql_text(MARK)} = {_sql_text(name)})"
            )
        if name in PARTITIONED:
            spark.sql(f"ALTER TABLE {full} RECOVER PARTITIONS")
        made.append(f"{database}.{table}")
    return made


def _kwire_table(spark: SparkSession, database: str, table: str) -> bool:
    """Whether DATABASE.TABLE exists (made by kwire); CatalogError when it exists and kwire did
    not make it."""
    if not spark.catalog.tableExists(f"{database}.{table}"):
        return False
    rows = spark.sql(f"SHOW TBLPROPERTIES {quoted(database)}.`{table}`").collect()
    if not any(r[0] == MARK for r in rows):
        raise CatalogError(
            f"{database}.{table} exists and is not one kwire made: it is left as it is; give "
            "another --database"
        )
    return True


def out_of(spark: SparkSession, database: str) -> str:
    """The OUT whose tables DATABASE holds (from its requests table's location), for the
    readers of OUT (kwire groups, kwire report)."""
    table = f"{quoted(database)}.`requests`"
    if not spark.catalog.tableExists(f"{database}.requests"):
        raise CatalogError(f"{database}.requests: no such table (kwire decode --database makes it)")
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    location = next((r[1] for r in rows if r[0] == "Location"), None)
    if not location:
        raise CatalogError(f"{database}.requests has no location")
    text = str(location).rstrip("/")
    out = text[: -len("/requests")] if text.endswith("/requests") else os.path.dirname(text)
    return local_path(out) or out
