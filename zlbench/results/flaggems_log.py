"""Reader for FlagGems result logs (and zlbench's run.log): `[INFO] {json}` record lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, List

from ..errors import UsageError
from .schema import shape_key


def iter_records(path: Path) -> Iterator[dict]:
    """Each `[INFO] {"op_name": ..., "result": [...]}` record. Other lines (attribute dumps, the
    'logger enabled' banner, zlbench warnings) are skipped; a broken record line is an error that
    names the line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text.startswith("[INFO] {"):
                continue
            try:
                rec = json.loads(text[len("[INFO] "):])
            except ValueError as e:
                raise UsageError(
                    f"{path}:{lineno}: malformed result record ({e}). Fix: repair or drop that "
                    "line; every `[INFO] {{...}}` line must be one JSON object."
                )
            if isinstance(rec, dict) and "op_name" in rec and "result" in rec:
                yield rec


def rows_from_log(path: Path) -> List[dict]:
    rows = []
    for rec in iter_records(path):
        for res in rec.get("result") or []:
            markers = res.get("markers") or []
            rows.append({
                "op": rec["op_name"],
                "dtype": rec.get("dtype"),
                "shape": shape_key(res.get("shape_detail")),
                "legacy_shape": res.get("legacy_shape"),
                "latency_base": res.get("latency_base"),
                "latency": res.get("latency"),
                "speedup": res.get("speedup"),
                "gbps_base": res.get("gbps_base"),
                "gbps": res.get("gbps"),
                "timer_used": res.get("timer_used") or rec.get("mode"),
                "markers": markers,
                "status": "failed" if res.get("error_msg") else "ok",
                "reason": res.get("error_msg"),
                "side": "main",
                "round": 0,
            })
    if not rows:
        raise UsageError(
            f"{path} holds no `[INFO] {{json}}` result records. Fix: pass a run dir, a zlbench "
            "run.log, or a FlagGems log written with --record log."
        )
    return rows

