"""The CSV and JSON forms every history command writes (Markdown is each command's own)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Iterable, Mapping, Sequence


def csv_text(rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def json_text(result: Any) -> str:
    return json.dumps(result, indent=1, default=str)
