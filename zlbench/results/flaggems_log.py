"""Reader for FlagGems result logs (and zlbench's run.log): `[INFO] {json}` record lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, List, Optional

from zlbench.errors import UsageError
from zlbench.results.records import Row


def iter_records(path: Path, skipped: Optional[List[int]] = None) -> Iterator[dict]:
    """Each `[INFO] {"op_name": ..., "result": [...]}` record. Other lines (attribute dumps, the
    'logger enabled' banner, zlbench warnings) are passed over; a broken record line is an error that
    names the line, or with `skipped` given, its number is added there and reading goes on."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text.startswith("[INFO] {"):
                continue
            try:
                rec = json.loads(text[len("[INFO] "):])
                result = rec.get("result") if isinstance(rec, dict) else None
                if result is not None and not (isinstance(result, list) and all(isinstance(r, dict) for r in result)):
                    raise ValueError("its result is not a list of objects")
            except ValueError as e:
                if skipped is not None:
                    skipped.append(lineno)
                    continue
                raise UsageError(
                    f"{path}:{lineno}: malformed result record ({e}). Fix: repair or delete that line "
                    "(each `[INFO] {...}` line is one JSON object), or add --skip-bad-lines to read the "
                    "rest of the log."
                )
            if isinstance(rec, dict) and "op_name" in rec and "result" in rec:
                yield rec


def rows_from_log(path: Path, skipped: Optional[List[int]] = None) -> List[dict]:
    """The log's rows; see iter_records for `skipped`."""
    rows = [Row.from_result(rec, res).to_dict()
            for rec in iter_records(path, skipped) for res in rec.get("result") or []]
    if not rows:
        raise UsageError(
            f"{path} holds no `[INFO] {{json}}` result records. Fix: pass a run dir, a zlbench "
            "run.log, or a FlagGems log written with --record log."
        )
    return rows

