"""DuckDB queries over a store: what needs rows of every rank at once.

Operator statistics (count, total, mean, median, p95, population std of each name's
durations over every rank and captured step) and collective entry lateness (matching a
collective's members across ranks by process group and ``seq``) cannot be computed one
rank group at a time; DuckDB runs them over the Parquet parts with bounded memory
(``memory_limit``; it spills to ``temp_directory`` beyond). The SQL reproduces the numpy
definitions of :mod:`echo_sim.analysis.statistic` and :mod:`echo_sim.analysis.stragglers`:

* quantiles: ``quantile_cont`` interpolates linearly at ``q·(n−1)``, numpy's default;
* an operator's category: that of its shortest occurrence;
* a collective's first / last member: earliest / latest entry, ties to the lower / higher
  rank (the numpy path's lexicographic order); top collectives by spread, ties by
  (group, seq).

Sums are added in DuckDB's order, not numpy's: totals, means and standard deviations agree
to float rounding (~1e-12 relative); counts, maxima, quantiles and ranks are exact.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from echo_sim.analysis.compare import Side
from echo_sim.analysis.statistic import OpStat
from echo_sim.analysis.stragglers import CollectiveSpread, Lateness
from echo_sim.errors import EchoError
from echo_sim.store import StoreInfo, read_names
from echo_sim.trace.model import CAT_NAMES, COLLECTIVES, Cat

__all__ = ["DEFAULT_MEMORY_LIMIT", "StoreDB", "connect"]

DEFAULT_MEMORY_LIMIT = "2GB"
"""DuckDB's memory limit for these queries (it spills to disk beyond)."""
QUANTILE_ROWS_PER_PASS = 20_000_000
"""Events per pass of the operator-statistics query (its quantiles hold a pass's durations:
~0.5 GB per 2·10^7 events)."""

_P2P = (COLLECTIVES.index("send"), COLLECTIVES.index("recv"))


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise EchoError("the duckdb engine needs duckdb: pip install 'echo-sim[store]' "
                        "(or pip install 'duckdb>=1.0'); or pass --engine memory") from None
    return duckdb


@dataclass
class StoreDB:
    """A DuckDB connection with the view ``ev`` over a store's event parts (times rebased)."""

    con: Any
    info: StoreInfo
    memory_limit: str = ""

    def seen_steps(self) -> np.ndarray:
        """Every step >= 0 that has events, ascending."""
        rows = self.con.execute("SELECT DISTINCT step FROM ev WHERE step >= 0 ORDER BY step"
                                ).fetchall()
        return np.asarray([r[0] for r in rows], np.int64)

    def op_stats(self, steps: np.ndarray, step_total_us: float) -> list[OpStat]:
        """:class:`OpStat` per event name over the captured steps (markers left out).

        Quantiles hold every duration of a group in memory (DuckDB cannot spill them), so
        the names are split into ``ceil(events / QUANTILE_ROWS_PER_PASS)`` sets by id and
        each set is one pass over the parts: memory stays bounded by a pass."""
        names = read_names(self.info)
        passes = max(1, -(-self.info.num_events // QUANTILE_ROWS_PER_PASS))
        rows = []
        for i in range(passes):
            rows += self._run(f"""
                SELECT name, count(*), sum(dur_us), stddev_pop(dur_us),
                       quantile_cont(dur_us, 0.5), quantile_cont(dur_us, 0.95),
                       arg_min(cat, struct_pack(d := dur_us, r := rank, t := ts_us))
                FROM ev WHERE step IN ({_ints(steps)}) AND cat <> {int(Cat.STEP)}
                  AND name % {passes} = {i}
                GROUP BY name ORDER BY name""").fetchall()
        rows.sort(key=lambda r: r[0])
        out = []
        for name, n, total, std, median, p95, cat in rows:
            share = total / step_total_us if step_total_us > 0 else 0.0
            out.append(OpStat(name=names[int(name)], category=CAT_NAMES[int(cat)],
                              count=int(n), total_us=float(total), mean_us=float(total / n),
                              median_us=float(median), p95_us=float(p95),
                              std_us=float(std or 0.0), share=float(share)))
        return out

    def side(self, steps: np.ndarray, ranks: Sequence[int] | None = None) -> Side:
        """name → (category, occurrences, total µs) over the captured steps (markers left
        out) of ``ranks`` (None: all): one side of ``compare``."""
        names = read_names(self.info)
        only = "" if ranks is None else f"AND rank IN ({_ints(ranks)})"
        rows = self._run(f"""
            SELECT name, count(*), sum(dur_us),
                   arg_max(cat, struct_pack(r := rank, t := ts_us))
            FROM ev WHERE step IN ({_ints(steps)}) AND cat <> {int(Cat.STEP)} {only}
            GROUP BY name""").fetchall()
        return {names[int(n)]: (CAT_NAMES[int(c)], int(k), float(t)) for n, k, t, c in rows}

    def lateness(self, ranks: np.ndarray, steps: np.ndarray, *,
                 max_collectives: int | None) -> Lateness:
        """Collective entry lateness per (rank, step) cell of ``ranks`` × ``steps``."""
        con = self.con
        self._run(f"""
            CREATE OR REPLACE TEMP TABLE coll AS
            SELECT rank, step, ts_us, "group" AS g, seq, coll, name FROM ev
            WHERE step IN ({_ints(steps)}) AND cat = {int(Cat.COMM)} AND seq >= 0
              AND "group" >= 0 AND coll NOT IN ({_ints(_P2P)})""")
        self._run("""
            CREATE OR REPLACE TEMP TABLE ops AS
            SELECT g, seq, count(*) AS members, min(ts_us) AS first_ts, max(ts_us) AS last_ts,
                   arg_min(rank, struct_pack(t := ts_us, r := rank)) AS first_rank,
                   arg_max(rank, struct_pack(t := ts_us, r := rank)) AS last_rank,
                   arg_min(struct_pack(step := step, name := name, coll := coll),
                           struct_pack(t := ts_us, r := rank)) AS first_row
            FROM coll GROUP BY g, seq""")
        per_cell = con.execute("""
            SELECT c.rank, c.step, count(*), max(c.ts_us - o.first_ts),
                   sum(c.ts_us - o.first_ts)
            FROM coll c JOIN ops o USING (g, seq) GROUP BY c.rank, c.step""").fetchall()
        n = ranks.size * steps.size
        cnt = np.zeros(n, np.int64)
        max_late = np.zeros(n)
        sum_late = np.zeros(n)
        if per_cell:
            r, s, c, mx, sm = (np.asarray(col) for col in zip(*per_cell, strict=True))
            cell = np.searchsorted(ranks, r) * steps.size + np.searchsorted(steps, s)
            cnt[cell] = c
            max_late[cell] = np.maximum(mx.astype(np.float64), 0.0)
            sum_late[cell] = sm
        mean_late = sum_late / np.maximum(cnt, 1)
        times_last = dict.fromkeys(ranks.tolist(), 0)
        for rank, k in con.execute("""
                SELECT last_rank, count(*) FROM ops
                WHERE last_ts - first_ts > 0 AND members > 1 GROUP BY last_rank""").fetchall():
            times_last[int(rank)] = int(k)
        limit = "" if max_collectives is None else f"LIMIT {int(max_collectives)}"
        top = con.execute(f"""
            SELECT g, seq, members, first_rank, last_rank, last_ts - first_ts AS spread,
                   first_row.step, first_row.name, first_row.coll
            FROM ops ORDER BY spread DESC, g, seq {limit}""").fetchall()
        names = read_names(self.info) if top else []
        spreads = [CollectiveSpread(
            step=int(step), name=names[int(name)],
            collective=COLLECTIVES[int(coll)] if coll >= 0 else "",
            group_ranks=list(self.info.groups[int(g)]), seq=int(seq), members=int(members),
            first_rank=int(first), last_rank=int(last), spread_us=float(spread))
            for g, seq, members, first, last, spread, step, name, coll in top]
        con.execute("DROP TABLE coll")
        con.execute("DROP TABLE ops")
        return Lateness(cnt, max_late, mean_late, spreads, times_last)

    def _run(self, sql: str) -> Any:
        try:
            return self.con.execute(sql)
        except Exception as e:  # duckdb.Error has no common import-free base here
            if type(e).__name__ == "OutOfMemoryException":
                raise EchoError(f"{self.info.root}: the DuckDB query ran out of its memory "
                                f"limit ({self.memory_limit}); free memory or use a machine "
                                "with more") from None
            raise

    def close(self) -> None:
        self.con.close()


def _ints(values: Any) -> str:
    return ", ".join(str(int(v)) for v in values) or "NULL"


def connect(info: StoreInfo, *, threads: int = 1,
            memory_limit: str = DEFAULT_MEMORY_LIMIT) -> StoreDB:
    """A :class:`StoreDB` over ``info``'s event parts."""
    duckdb = _duckdb()
    con = duckdb.connect(config={"threads": max(1, threads), "memory_limit": memory_limit,
                                 "temp_directory": tempfile.gettempdir(),
                                 "preserve_insertion_order": False})
    files = ", ".join("'" + str(info.path(p.events)).replace("'", "''") + "'"
                      for p in info.parts)
    con.execute("CREATE TEMP TABLE shift (rank INTEGER, s DOUBLE)")
    if info.ts_shift_us:
        con.executemany("INSERT INTO shift VALUES (?, ?)", list(info.ts_shift_us.items()))
    src = f"read_parquet([{files}])"
    if info.ts_shift_us:  # times of later-based ranks moved onto the earliest base
        con.execute(f"""CREATE TEMP VIEW ev AS SELECT * REPLACE
                        (CASE WHEN s IS NULL THEN ts_us ELSE ts_us + s END AS ts_us)
                        FROM {src} LEFT JOIN shift USING (rank)""")
    else:
        con.execute(f"CREATE TEMP VIEW ev AS SELECT * FROM {src}")
    return StoreDB(con, info, memory_limit)
