"""Test and operations support for ``postgresql://`` URLs: a ledger never imports it."""

from __future__ import annotations

from ledger_core.opening import Route, reroute_address
from ledger_core.scratch import prefix_bounds, scratch_request
from ledger_core.urls import LedgerURL

# The namespaces in a ``bytea`` range [low, high), genesis included (not the old 0xFF).
_REMOVE_SCRATCH = (
    "WITH gone AS (DELETE FROM {table} WHERE namespace >= {low} AND namespace < {high} "
    "RETURNING namespace) SELECT count(DISTINCT namespace) FROM gone"
)


class _Hooks:
    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        return reroute_address(url, route, 5432)

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Delete the namespaces named ``prefix...`` (a check's scratch prefix) in one
        framed statement on one connection, create=false; how many namespaces."""
        from .backend import require_driver

        require_driver()
        from psycopg import sql
        from psycopg.rows import tuple_row

        from . import errors
        from .connect import connect_within
        from .options import parse
        from .statements import Statements, bytea_literal

        low, high = prefix_bounds(prefix)
        target = parse(scratch_request(url))
        st = Statements(target.config)
        statement = sql.SQL(_REMOVE_SCRATCH).format(
            table=st.table,
            low=sql.SQL(bytea_literal(low.encode()).decode()),
            high=sql.SQL(bytea_literal(high.encode()).decode()),
        )
        try:
            with connect_within(target.conninfo, target.config.timeout) as conn:
                cursor = conn.cursor(row_factory=tuple_row)
                cursor.execute(st.framed(statement))
                for _ in range(Statements.FRAMED_RESULT):
                    cursor.nextset()
                row = cursor.fetchone()
        except Exception as exc:
            if getattr(exc, "sqlstate", None) == "42P01":  # undefined_table
                raise errors.missing_table(target.config.qualified) from exc
            what = f"remove_scratch on {target.location}"
            raise errors.unavailable(what, exc, target.password) from exc
        assert row is not None  # a count always answers one row
        return int(row[0])


HOOKS = _Hooks()
