"""Test and operations support for ``postgresql://`` URLs (the suite's and the CLI's
hooks, loaded through ``Backend.testing``): a ledger never imports this module."""

from __future__ import annotations

from ledger_core.opening import Route, reroute_address
from ledger_core.scratch import prefix_bounds, scratch_request
from ledger_core.urls import LedgerURL

# One DELETE of the namespaces in a ``bytea`` range [low, high) (byte order: no collation
# and no LIKE pattern to escape), answering how many distinct namespaces it took. Each
# namespace's genesis goes with it; the old per-table genesis (namespace 0xFF) stays.
_REMOVE_SCRATCH = (
    "WITH gone AS (DELETE FROM {table} WHERE namespace >= {low} AND namespace < {high} "
    "RETURNING namespace) SELECT count(DISTINCT namespace) FROM gone"
)


class _Hooks:
    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        return reroute_address(url, route, 5432)

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Delete every row of the namespaces named ``prefix...`` (a check's own scratch
        prefix, else refused before any I/O) in one framed statement; say how many
        namespaces. Opens with the URL's options and create=false: a missing table is an
        error, never created; one connection, closed, bounded by the URL's ``timeout``."""
        from .backend import require_driver

        require_driver()
        from psycopg import sql

        from . import errors
        from .commands import Op, Statements, bytea_literal
        from .ledger import connect_within, run_op
        from .options import parse

        low, high = prefix_bounds(prefix)
        target = parse(scratch_request(url))
        st = Statements(target.config)
        statement = sql.SQL(_REMOVE_SCRATCH).format(
            table=st.table,
            low=sql.SQL(bytea_literal(low.encode()).decode()),
            high=sql.SQL(bytea_literal(high.encode()).decode()),
        )
        op = Op(st.framed(statement), result=Statements.FRAMED_RESULT)
        try:
            with connect_within(target.conninfo, target.config.timeout) as conn:
                row = run_op(conn, op)
        except Exception as exc:
            if getattr(exc, "sqlstate", None) == "42P01":  # undefined_table
                raise errors.missing_table(target.config.qualified) from exc
            what = f"remove_scratch on {target.location}"
            raise errors.unavailable(what, exc, target.password) from exc
        assert row is not None  # a count always answers one row
        return int(row[0])


HOOKS = _Hooks()
