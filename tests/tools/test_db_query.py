"""db_query: read-only SELECT over the case tables; validation happens before DuckDB sees anything."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from harness.contracts import EvidenceStatus, JsonValue
from harness.tools import _duck
from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult
from harness.tools.db_query import DatabaseQuery, DbQueryInput, TableFixture

PAYMENTS = TableFixture(
    name="payments",
    columns=("payment_id", "tenant", "order_id", "amount", "currency", "status", "error_code", "created_at"),
    types=("VARCHAR", "VARCHAR", "VARCHAR", "DECIMAL(12,2)", "VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP"),
    rows=(
        ("pay_001", "acme", "ord_001", "120.50", "CNY", "SUCCEEDED", None, "2026-07-01 13:58:12"),
        ("pay_002", "acme", "ord_002", "89.00", "CNY", "FAILED", "GW_TIMEOUT", "2026-07-01 14:03:40"),
        ("pay_003", "acme", "ord_003", "15.99", "CNY", "FAILED", "GW_TIMEOUT", "2026-07-01 14:04:02"),
        ("pay_004", "globex", "ord_004", "300.00", "USD", "SUCCEEDED", None, "2026-07-01 14:05:10"),
        ("pay_005", "globex", "ord_005", "42.00", "USD", "FAILED", "RISK_REJECT", "2026-07-01 14:07:55"),
        ("pay_006", "initech", "ord_006", "7.25", "EUR", "SUCCEEDED", None, "2026-07-01 14:09:30"),
    ),
)
ORDERS = TableFixture(
    name="orders",
    columns=("order_id", "tenant", "status", "created_on"),
    types=("VARCHAR", "VARCHAR", "VARCHAR", "DATE"),
    rows=(
        ("ord_001", "acme", "PAID", "2026-07-01"),
        ("ord_002", "acme", "PENDING", "2026-07-01"),
        ("ord_003", "acme", "PENDING", "2026-07-01"),
        ("ord_004", "globex", "PAID", "2026-07-01"),
        ("ord_005", "globex", "FAILED", "2026-07-01"),
        ("ord_006", "initech", "PAID", "2026-07-01"),
    ),
)
SETTLEMENTS = TableFixture(
    name="settlements",
    columns=("batch_id", "tenant", "currency", "total", "settled"),
    rows=(("b_0701_acme", "acme", "CNY", 120.5, True), ("b_0701_globex", "globex", "USD", 300.0, False)),
)
TABLES = (PAYMENTS, ORDERS, SETTLEMENTS)


def call(tool: DatabaseQuery, raw: Mapping[str, JsonValue]) -> ToolResult:
    """What the Harness does: validate, then run."""
    return tool.run(tool.parse_input(raw))


def scope(tool: DatabaseQuery, sql: str) -> str:
    return tool.normalize_scope(tool.parse_input({"sql": sql}))


@pytest.fixture(scope="module")
def tool() -> DatabaseQuery:
    return DatabaseQuery(TABLES)


class _RecordingCursor:
    """Wraps a DuckDB cursor and remembers every statement sent to it."""

    def __init__(self, inner: duckdb.DuckDBPyConnection) -> None:
        self.inner = inner
        self.statements: list[str] = []

    def execute(self, sql: str, *args: Any) -> duckdb.DuckDBPyConnection:
        self.statements.append(sql)
        return self.inner.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> tuple[DatabaseQuery, _RecordingCursor]:
    real = _duck.cursor
    holder: list[_RecordingCursor] = []

    def recording_cursor() -> Any:
        holder.append(_RecordingCursor(real()))
        return holder[-1]

    monkeypatch.setattr(_duck, "cursor", recording_cursor)
    built = DatabaseQuery(TABLES)
    holder[0].statements.clear()  # forget the construction-time SET search_path
    return built, holder[0]


def test_select_returns_rows_as_json_safe_records(tool: DatabaseQuery) -> None:
    result = call(tool, {"sql": "select payment_id, amount, created_at from payments where tenant = 'acme' order by 1"})

    assert result.evidence_status is EvidenceStatus.EVIDENCE
    assert result.count == 3 and not result.truncated
    assert result.records[0] == {"payment_id": "pay_001", "amount": 120.5, "created_at": "2026-07-01T13:58:12"}
    json.dumps(result.records)  # decimals and timestamps were converted, no default= needed


def test_dates_booleans_and_inferred_types_are_json_values(tool: DatabaseQuery) -> None:
    result = call(
        tool,
        {"sql": "select o.created_on, s.settled, s.total from orders o join settlements s using (tenant) order by 3"},
    )
    assert result.records[0] == {"created_on": "2026-07-01", "settled": True, "total": 120.5}


def test_joins_aggregates_ctes_and_unions_are_allowed(tool: DatabaseQuery) -> None:
    agg = call(
        tool,
        {
            "sql": """
            with failed as (select * from payments where status = 'FAILED')
            select f.tenant, f.error_code, count(*) as n, sum(f.amount) as total
            from failed f join orders o on o.order_id = f.order_id
            group by all order by n desc, f.tenant
            """
        },
    )
    assert agg.records[0] == {"tenant": "acme", "error_code": "GW_TIMEOUT", "n": 2, "total": 104.99}

    union = call(tool, {"sql": "select tenant from payments union select tenant from settlements order by 1"})
    assert [r["tenant"] for r in union.records] == ["acme", "globex", "initech"]


def test_cte_may_shadow_a_case_table(tool: DatabaseQuery) -> None:
    result = call(
        tool, {"sql": "with payments as (select * from payments where tenant = 'globex') select * from payments"}
    )
    assert {r["tenant"] for r in result.records} == {"globex"}


def test_duplicate_output_columns_keep_both_values(tool: DatabaseQuery) -> None:
    sql = "select p.status, o.status from payments p join orders o using (order_id) where p.payment_id = 'pay_002'"
    assert call(tool, {"sql": sql}).records == ({"status": "FAILED", "status_2": "PENDING"},)


def test_row_cap_sets_truncated() -> None:
    capped = DatabaseQuery(TABLES, max_rows=4)

    over = call(capped, {"sql": "select * from payments"})
    assert over.truncated and over.count == 4 and len(over.records) == 4
    assert over.actual_scope == {"sql": "SELECT * FROM payments", "max_rows": 4}

    exact = call(capped, {"sql": "select * from payments limit 4"})
    assert not exact.truncated and exact.count == 4


def test_empty_result_is_no_evidence(tool: DatabaseQuery) -> None:
    result = call(tool, {"sql": "select * from payments where tenant = 'umbrella'"})
    assert result.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert result.count == 0 and result.records == () and not result.truncated


# --- rejection before the backend ----------------------------------------------------------------


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "leak.csv"
    path.write_text("secret,value\ncard,4111111111111111\n")
    return path


REJECTED = [
    ("insert into payments values ('x','acme','o','1','CNY','FAILED',null,'2026-07-01')", "SELECT"),
    ("update payments set status = 'SUCCEEDED'", "SELECT"),
    ("delete from payments", "SELECT"),
    ("merge into payments p using orders o on p.order_id = o.order_id when matched then delete", "SELECT"),
    ("drop table payments", "SELECT"),
    ("create table stolen as select * from payments", "SELECT"),
    ("alter table payments add column x int", "SELECT"),
    ("truncate payments", "SELECT"),
    ("attach 'other.db' as other", "SELECT"),
    ("detach other", "SELECT"),
    ("pragma table_info('payments')", "SELECT"),
    ("set threads = 8", "SELECT"),
    ("reset threads", "SELECT"),
    ("export database 'dump'", "parse"),
    ("import database 'dump'", "parse"),
    ("install httpfs", "SELECT"),
    ("load httpfs", "SELECT"),
    ("call pragma_version()", "SELECT"),
    ("checkpoint", "SELECT"),
    ("explain select * from payments", "SELECT"),
    ("select * into stolen from payments", "read-only"),
    ("select 1; drop table payments", "one statement"),
    ("select * from payments; select * from orders", "one statement"),
    ("select * from glob('*')", "table function"),
    ("select * from duckdb_tables()", "table function"),
    ("select * from query('select 1')", "table function"),
    ("select * from range(10)", "table function"),
    ("select * from unnest([1, 2])", "FROM"),
    ("select * from refunds", "unknown table"),
    ("select * from duckdb_tables", "unknown table"),
    ("select * from main.payments", "qualified"),
    ("select * from memory.main.payments", "qualified"),
    ("select * from information_schema.tables", "qualified"),
    ("select * from payments where amount > ?", "read-only"),
    ("select from where", "parse"),
    ("select 'unterminated from payments", "parse"),
    ("select " + "(" * 400 + "1" + ")" * 400, "nested too deeply"),
    # A name only defined by a *later* CTE is not in scope: it would resolve to the system view.
    ("with a as (select * from duckdb_tables), duckdb_tables as (select 1) select * from a", "unknown table"),
    ("select * from payments where order_id in (select order_id from refunds)", "unknown table"),
]


def test_recorder_sees_exactly_the_normalised_statement(recorded: tuple[DatabaseQuery, _RecordingCursor]) -> None:
    # Makes the "DuckDB never saw it" assertions below meaningful: accepted SQL does reach the cursor.
    tool, cursor = recorded
    call(tool, {"sql": "select  *  from Payments where tenant='acme'  -- hi"})
    assert cursor.statements == ["SELECT * FROM payments WHERE tenant = 'acme'"]


@pytest.mark.parametrize(("sql", "reason"), REJECTED)
def test_non_select_or_foreign_sql_is_rejected_before_duckdb(
    recorded: tuple[DatabaseQuery, _RecordingCursor], sql: str, reason: str
) -> None:
    tool, cursor = recorded
    with pytest.raises(ToolInputError, match=reason) as info:
        call(tool, {"sql": sql})
    assert "sql:" in str(info.value)  # the error names the field
    assert cursor.statements == []  # DuckDB never saw it


@pytest.mark.parametrize(
    "template",
    [
        "select * from read_csv('{p}')",
        "select * from read_csv_auto('{p}')",
        "select * from read_parquet('{p}')",
        "select * from read_json('{p}')",
        "select * from read_text('{p}')",
        "select * from read_blob('{p}')",
        "select * from '{p}'",
        "select (select count(*) from read_csv('{p}')) as n",
        "select * from payments p join read_csv('{p}') c on true",
        "with c as (select * from read_csv('{p}')) select * from c",
        "copy payments to '{p}'",
        "copy payments from '{p}'",
    ],
)
def test_file_access_is_rejected_before_duckdb(
    recorded: tuple[DatabaseQuery, _RecordingCursor], csv_file: Path, template: str
) -> None:
    tool, cursor = recorded
    with pytest.raises(ToolInputError):
        call(tool, {"sql": template.format(p=csv_file)})
    assert cursor.statements == []


def test_rejected_writes_leave_the_tables_unchanged(tool: DatabaseQuery) -> None:
    before = call(tool, {"sql": "select * from payments order by payment_id"}).records
    for sql in ("delete from payments", "drop table payments", "update payments set amount = 0"):
        with pytest.raises(ToolInputError):
            call(tool, {"sql": sql})
    assert call(tool, {"sql": "select * from payments order by payment_id"}).records == before


def test_shared_database_itself_refuses_file_access(csv_file: Path) -> None:
    # Defence in depth: even a statement that slipped past validation could not read the file.
    with pytest.raises(duckdb.PermissionException):
        _duck.cursor().execute(f"select * from read_csv('{csv_file}')").fetchall()
    with pytest.raises(duckdb.Error):
        _duck.cursor().execute("SET enable_external_access = true")


def test_run_rechecks_tables_when_parse_input_was_bypassed(recorded: tuple[DatabaseQuery, _RecordingCursor]) -> None:
    tool, cursor = recorded
    unchecked = DbQueryInput(sql="select * from refunds")  # no case tables known outside parse_input
    with pytest.raises(ToolInputError, match="unknown table"):
        tool.run(unchecked)
    assert cursor.statements == []


def test_a_wrapper_that_reuses_the_input_model_keeps_the_table_allow_list(tool: DatabaseQuery) -> None:
    class Wrapper(BusinessTool[BaseModel]):
        name = tool.name
        description = tool.description
        input_model = tool.input_model  # what a fault-injecting or logging wrapper copies

        def run(self, parsed: BaseModel) -> ToolResult:
            return tool.run(parsed)  # type: ignore[arg-type]

    wrapper = Wrapper()
    with pytest.raises(ToolInputError, match="unknown table"):
        wrapper.parse_input({"sql": "select * from refunds"})
    assert wrapper.run(wrapper.parse_input({"sql": "select count(*) as n from orders"})).records == ({"n": 6},)


def test_input_model_alone_still_rejects_writes() -> None:
    with pytest.raises(ValueError, match="SELECT"):
        DbQueryInput(sql="drop table payments")


def test_sql_length_is_capped(tool: DatabaseQuery) -> None:
    with pytest.raises(ToolInputError, match="sql"):
        tool.parse_input({"sql": "select 1 " + " " * 4000})
    with pytest.raises(ToolInputError, match="limit: Extra inputs"):
        tool.parse_input({"sql": "select 1", "limit": 5})


def test_backend_errors_are_execution_errors_with_duckdb_hints(tool: DatabaseQuery) -> None:
    with pytest.raises(ToolExecutionError, match=r"paymentid.*Candidate bindings.*payment_id") as info:
        call(tool, {"sql": "select paymentid from payments"})
    assert "\n" not in str(info.value) and "LINE 1" not in str(info.value)


def test_runaway_query_is_interrupted(tool: DatabaseQuery) -> None:
    ten = "(select * from payments union all select * from payments) "
    sql = "select count(*) from " + ", ".join(f"{ten} t{i}" for i in range(10))  # 12^10 rows
    with pytest.raises(ToolExecutionError, match=r"(?i)execution time|interrupt"):
        call(tool, {"sql": sql})


# --- scope ---------------------------------------------------------------------------------------


def test_formatting_case_comments_and_quotes_do_not_change_the_scope(tool: DatabaseQuery) -> None:
    base = scope(tool, "select * from payments where tenant='acme'")
    assert base == "SELECT * FROM payments WHERE tenant = 'acme'"
    assert scope(tool, "SELECT *\n  FROM Payments\n WHERE tenant = 'acme'") == base
    assert scope(tool, 'select * /* why */ from "PAYMENTS" where "Tenant" = \'acme\' -- note') == base
    assert scope(tool, "select * from payments where tenant='acme';") == base


def test_a_different_literal_is_a_different_scope(tool: DatabaseQuery) -> None:
    assert scope(tool, "select * from payments where tenant='acme'") != scope(
        tool, "select * from payments where tenant='ACME'"
    )
    assert scope(tool, "select * from payments where amount > 10") != scope(
        tool, "select * from payments where amount > 100"
    )


_QUERY = [
    ("kw", "select"), ("id", "tenant"), ("sep", ","), ("kw", "count"), ("sep", "(*)"), ("kw", "as"), ("id", "n"),
    ("kw", "from"), ("id", "payments"), ("kw", "where"), ("id", "status"), ("sep", "="), ("lit", "'FAILED'"),
    ("kw", "group"), ("kw", "by"), ("id", "tenant"), ("kw", "order"), ("kw", "by"), ("id", "n"), ("kw", "desc"),
]  # fmt: skip


_GAPS = [" ", "  ", "\n", "\t", "\n    ", " \n\t "]


def _render(literal: str, cases: list[int], gaps: list[str]) -> str:
    out = []
    for i, (kind, text) in enumerate(_QUERY):
        if kind == "lit":
            text = literal
        elif kind in ("kw", "id"):
            text = (text.lower(), text.upper(), text.title())[cases[i] % 3]
        out.append(text)
        out.append(gaps[i])
    return "".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cases=st.lists(st.integers(0, 2), min_size=len(_QUERY), max_size=len(_QUERY)),
    gaps=st.lists(
        st.sampled_from([" ", "  ", "\n", "\t", "\n    ", " \n\t "]), min_size=len(_QUERY), max_size=len(_QUERY)
    ),
)
def test_property_whitespace_and_case_variants_share_one_scope_and_result(
    tool: DatabaseQuery, cases: list[int], gaps: list[str]
) -> None:
    canonical = _render("'FAILED'", [0] * len(_QUERY), [" "] * len(_QUERY))
    variant = _render("'FAILED'", cases, gaps)
    assert scope(tool, variant) == scope(tool, canonical)
    assert call(tool, {"sql": variant}).records == call(tool, {"sql": canonical}).records
    assert scope(tool, _render("'SUCCEEDED'", cases, gaps)) != scope(tool, canonical)


# --- fidelity of the executed (regenerated) SQL ---------------------------------------------------


@pytest.fixture(scope="module")
def reference() -> duckdb.DuckDBPyConnection:
    """A plain DuckDB with the same data, loaded independently of the tool."""
    conn = duckdb.connect()
    for table in TABLES:
        types = table.types or ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "BOOLEAN")
        cols = ", ".join(f"{c} {t}" for c, t in zip(table.columns, types, strict=True))
        conn.execute(f"create table {table.name} ({cols})")
        marks = ", ".join("?" for _ in table.columns)
        conn.executemany(f"insert into {table.name} values ({marks})", [list(r) for r in table.rows])
    return conn


def _as_json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    return value


FIDELITY = [
    "select tenant, count(*) filter (where status = 'FAILED') as failed, round(avg(amount), 2) as avg_amount "
    "from payments group by tenant order by tenant",
    "select date_trunc('minute', created_at) as minute, count(*) from payments group by 1 order by 1",
    "select payment_id, created_at + interval 5 minute as later from payments where created_at >= '2026-07-01 14:00' "
    "order by payment_id",
    "select tenant, amount, rank() over (partition by tenant order by amount desc) as r from payments order by 1, 3",
    "select * from payments qualify row_number() over (partition by tenant order by created_at desc) = 1 order by 1",
    "select tenant, string_agg(payment_id, ',' order by payment_id) as ids from payments group by tenant order by 1",
    "select p.tenant, coalesce(p.error_code, 'none') as code, o.status from payments p left join orders o "
    "on o.order_id = p.order_id where p.amount between 10 and 200 and p.currency in ('CNY', 'USD') order by 1, 2, 3",
    "select tenant, amount::int as whole, strftime(created_at, '%H:%M') as hm from payments "
    "where payment_id ilike 'PAY_00%' order by 1, 2",
    "select case when amount > 100 then 'big' else 'small' end as size, count(*) from payments group by 1 order by 1",
    "select tenant, list(status order by status) as statuses from payments group by tenant order by tenant",
    "select extract(hour from created_at) as h, epoch(created_at) % 60 as s, tenant || '/' || currency as k "
    "from payments order by payment_id",
]


@pytest.mark.parametrize("sql", FIDELITY)
def test_regenerated_sql_returns_what_duckdb_returns_for_the_original(
    tool: DatabaseQuery, reference: duckdb.DuckDBPyConnection, sql: str
) -> None:
    expected = [tuple(_as_json(v) for v in row) for row in reference.execute(sql).fetchall()]
    got = [tuple(r.values()) for r in call(tool, {"sql": sql}).records]
    assert got == expected


# --- shared database reuse and isolation ----------------------------------------------------------


def test_reconstruction_reuses_the_loaded_schema() -> None:
    DatabaseQuery(TABLES)
    before = _duck.schema_count()
    for _ in range(5):
        call(DatabaseQuery(TABLES), {"sql": "select count(*) as n from payments"})
    assert _duck.schema_count() == before

    other = TableFixture(name="payments", columns=("payment_id",), rows=(("only_one",),))
    DatabaseQuery([other])
    assert _duck.schema_count() == before + 1


def test_cases_do_not_see_each_other() -> None:
    mine = DatabaseQuery([TableFixture(name="payments", columns=("payment_id", "tenant"), rows=(("p_a", "a"),))])
    theirs = DatabaseQuery(TABLES)
    assert call(mine, {"sql": "select payment_id from payments"}).records == ({"payment_id": "p_a"},)
    assert call(theirs, {"sql": "select count(*) as n from payments"}).records == ({"n": 6},)
    with pytest.raises(ToolInputError, match="unknown table"):
        mine.parse_input({"sql": "select * from orders"})  # exists, but only in the other case


def test_input_schema_lists_the_case_tables(tool: DatabaseQuery) -> None:
    schema = tool.input_schema()
    assert schema["title"] == "DbQueryInput" and schema["description"] == "Business input of db_query."
    description = str(schema["properties"]["sql"]["description"])  # type: ignore[index,call-overload]
    assert "payments(payment_id, tenant, order_id" in description and "settlements(" in description
    assert DatabaseQuery.input_model.model_json_schema()["properties"]["sql"]["description"] in description


def test_fixture_values_that_do_not_fit_their_type_fail_cleanly() -> None:
    before = _duck.schema_count()
    bad = TableFixture(name="refunds", columns=("amount",), types=("DECIMAL(12,2)",), rows=(("twelve",),))
    for _ in range(2):  # the retry fails on the value again, not on a leftover half-built schema
        with pytest.raises(ToolExecutionError, match=r'could not load fixture.*convert string "twelve"'):
            DatabaseQuery([bad])
        assert _duck.schema_count() == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "bad name", "columns": ("a",)},
        {"name": "t", "columns": ("a", "A")},
        {"name": "t", "columns": ("a", "b"), "rows": (("only one",),)},
        {"name": "t", "columns": ("a",), "types": ("INT); DROP TABLE x; --",)},
        {"name": "t", "columns": ("a",), "types": ("INT", "INT")},
    ],
)
def test_bad_fixtures_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        TableFixture(**kwargs)
