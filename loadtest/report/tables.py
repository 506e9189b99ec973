"""Aggregated tables: computed once in Spark, collected (they are small), kept for the plots and
the page, and written as Parquet (Spark's writer) and as one CSV file each."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TABLES_DIR = "tables"


@dataclass
class Table:
    name: str
    schema: Any  # pyspark StructType: the Parquet copy keeps Spark's types
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def dicts(self) -> list[dict[str, Any]]:
        names = self.columns
        return [dict(zip(names, row)) for row in self.rows]

    def __len__(self) -> int:
        return len(self.rows)


def collect(name: str, frame: DataFrame) -> Table:
    """Run the aggregation (one Spark job) and keep its rows."""
    return Table(name, frame.schema, [tuple(row) for row in frame.collect()])


def from_rows(name: str, ddl: str, rows: list[tuple[Any, ...]]) -> Table:
    """A table made in Python (a handful of rows, e.g. the faults), typed by a DDL schema string."""
    from pyspark.sql.types import DataType

    return Table(name, DataType.fromDDL(ddl), rows)


def write_tables(spark: SparkSession, tables: list[Table], report_dir: Path) -> None:
    """`tables/<name>/` (Parquet, one file) and `tables/<name>.csv` for each table."""
    out = report_dir / TABLES_DIR
    out.mkdir(parents=True, exist_ok=True)
    for table in tables:
        # From the collected rows, not the plan: the aggregation is not computed a second time.
        frame = spark.createDataFrame(table.rows, table.schema)
        frame.coalesce(1).write.mode("overwrite").parquet(str(out / table.name))
        write_csv(table, out / f"{table.name}.csv")


def write_csv(table: Table, path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(table.columns)
        writer.writerows([_csv_value(v) for v in row] for row in table.rows)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else round(value, 6)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value
