"""Two plain runs of one caliber, A and B, read from `zlbench summary A --ab B`'s ab.json (each row's
value in A and B) and B's rows.jsonl (B's process-level intervals): how often A's value lies inside
B's interval, B's interval widths, and how far rows moved from A to B.

    python3 benchmarks/gpu/plain_pair23.py CMP/ab.json B/rows.jsonl

Used where A's own run dir did not come back from the device (eighteenth session, call 1)."""

import json
import statistics
import sys


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main(ab_json: str, rows_b: str) -> None:
    b = {(r["node"], r["op"], r["shape"]): r for r in map(json.loads, open(rows_b))
         if r.get("status") == "ok" and r.get("latency_ci")}
    inside, widths, wide20, moves, moves5 = 0, [], [], [], []
    rows = json.load(open(ab_json))["rows"]
    for t in rows:
        r = b[(t["node"], t["op"], t["shape"])]
        lo, hi = r["latency_ci"]
        inside += lo <= t["a_ms"] <= hi
        width, move = (hi - lo) / r["latency"], abs(t["b_ms"] / t["a_ms"] - 1)
        widths.append(width)
        moves.append(move)
        if r["latency"] >= 0.02:
            wide20.append(width)
        if r["latency"] >= 0.005:
            moves5.append(move)
    pct = lambda xs: "p50 %.2f%% p90 %.2f%% max %.2f%%" % (100 * statistics.median(xs), 100 * quantile(xs, 0.9),  # noqa: E731
                                                           100 * max(xs))
    print(f"rows {len(rows)}; A's value inside B's interval: {inside}")
    print(f"B's width, all rows: {pct(widths)}; rows >= 20 us ({len(wide20)}): {pct(wide20)}")
    print(f"A to B, all rows: {pct(moves)}; rows >= 5 us ({len(moves5)}): {pct(moves5)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
