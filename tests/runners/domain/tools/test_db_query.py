"""db_query: read-only SELECT over the case tables; validation happens before DuckDB sees anything."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from sqlglot import exp

from harness.contracts import EvidenceStatus, JsonValue
from harness.tools.base import BusinessTool, ToolExecutionError, ToolInputError, ToolResult
from runners.domain.scripted import Mistake
from runners.domain.tools import _duck
from runners.domain.tools.db_query import ALLOWED_FUNCTIONS, DatabaseQuery, DbQueryInput, TableFixture

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
    _duck.forget_answers()  # statements another test sent would be answered from memory, unseen by the recorder
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


def test_a_statement_is_answered_once_and_a_failed_one_is_not_remembered(
    recorded: tuple[DatabaseQuery, _RecordingCursor],
) -> None:
    """A case's tables never change and a statement the validator lets through is a function of them: asked again,
    by this tool or another over the same tables, it is answered from memory, as it was the first time, in records
    of its own; a failed statement reaches DuckDB each time; the same statement over other tables is their answer."""
    tool, cursor = recorded
    sql = {"sql": "select tenant, count(*) as n from payments group by tenant order by tenant"}
    first = call(tool, sql)
    first.records[0]["n"] = -1  # the caller's records are its own
    again, twin = call(tool, sql), call(DatabaseQuery(TABLES), sql)
    assert again == twin and [r["n"] for r in again.records] == [3, 2, 1]
    assert cursor.statements == ["SELECT tenant, COUNT(*) AS n FROM payments GROUP BY tenant ORDER BY tenant"]
    for _ in range(2):
        with pytest.raises(ToolExecutionError, match="paymentid"):
            call(tool, {"sql": "select paymentid from payments"})
    assert cursor.statements[1:] == ["SELECT paymentid FROM payments"] * 2
    other = DatabaseQuery([TableFixture(name="payments", columns=("tenant",), rows=(("a",), ("a",)))])
    assert call(other, sql).records == ({"tenant": "a", "n": 2},)


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


# --- the function allow-list ------------------------------------------------------------------------

# Each is rejected by validation, so DuckDB never sees it. The second column is what the message must
# say: the function's name as the model wrote it (or the construct), so the model can correct itself.
REJECTED_FUNCTIONS = [
    # settings, session, catalog, environment
    ("select current_setting('home_directory')", "function current_setting is not allowed"),
    ("select \"current_setting\"('home_directory')", "function current_setting is not allowed"),
    ("select current_schemas(true)", "function current_schemas is not allowed"),
    ("select version()", "function version is not allowed"),
    ("select getenv('HOME')", "function getenv is not allowed"),
    ("select getvariable('x')", "function getvariable is not allowed"),
    ("select current_database()", "function current_database is not allowed"),
    ("select current_schema()", "function current_schema is not allowed"),
    ("select current_query()", "function current_query is not allowed"),
    ("select in_search_path('memory', 'main')", "function in_search_path is not allowed"),
    ("select txid_current()", "function txid_current is not allowed"),
    ("select pragma_version()", "function pragma_version is not allowed"),
    ("select duckdb_settings()", "function duckdb_settings is not allowed"),
    ("select count(*) from payments where tenant = current_setting('user_agent')", "function current_setting"),
    # SQL value keywords: DuckDB's binder calls a session or clock function for these names
    ("select current_user", "function current_user is not allowed"),
    ("select session_user", "function session_user is not allowed"),
    ("select current_catalog", "function current_catalog is not allowed"),
    ("select user", "user without a table is DuckDB's built-in user"),
    ('select "USER" from payments', "user without a table"),
    ("select current_role", "current_role without a table"),
    ("select current_schema", "current_schema without a table"),
    ("select alias.current_schema from payments", "current_schema without a table"),
    ("select * from payments where tenant = user", "user without a table"),
    # table functions, wherever they sit
    ("select * from pragma_table_info('payments')", "table function"),
    ("select * from pragma_version()", "table function"),
    ("select * from duckdb_settings()", "table function"),
    ("select * from payments p join duckdb_columns() c on true", "table function"),
    ("select read_csv('/etc/passwd')", "function read_csv is not allowed"),
    ("select read_parquet('/tmp/x.parquet')", "function read_parquet is not allowed"),
    ("select glob('*')", "function glob is not allowed"),
    ("select unnest([1, 2])", "is not allowed"),
    # state changes and answers that are not a function of the case's data
    ("select nextval('seq')", "function nextval is not allowed"),
    ("select setseed(0.5)", "function setseed is not allowed"),
    ("select random()", "function random is not allowed"),
    ("select gen_random_uuid()", "is not allowed"),
    ("select now()", "function now is not allowed"),
    ("select current_date", "function current_date is not allowed"),
    ("select current_timestamp", "function current_timestamp is not allowed"),
    ("select today()", "function current_date is not allowed"),
    ("select age(created_at) from payments", "function age is not allowed"),
    ("select * from payments using sample 50%", "sampling"),
    ("select * from payments tablesample bernoulli(50)", "sampling"),
    # harmless but not needed by a diagnosis: outside the allow-list
    ("select md5(tenant) from payments", "function md5 is not allowed"),
    ("select hash(tenant) from payments", "function hash is not allowed"),
    ("select tenant collate nocase from payments", "function collate is not allowed"),
    ("select sleep_ms(2000)", "function sleep_ms is not allowed"),
    # qualified and method-call spellings
    ("select pg_catalog.version()", "function version is not allowed"),
    ("select system.main.version()", "function version is not allowed"),
    ("select tenant.lower() from payments", "bare name: lower"),
    ("select main.lower(tenant) from payments", "bare name: lower"),
    # every clause is checked, not just the select list
    ("select tenant from payments where version() like 'v%'", "function version"),
    ("select tenant from payments group by tenant having max(random()) > 0", "function random"),
    ("select tenant from payments order by md5(tenant)", "function md5"),
    ("with s as (select current_setting('threads') as t) select * from s", "function current_setting"),
    ("select (select current_schemas(false)) as s", "function current_schemas"),
    ("select p.tenant from payments p join orders o on o.order_id = p.order_id and getenv('X') is null", "getenv"),
    ("select row_number() over (order by random()) from payments", "function random"),
]


@pytest.mark.parametrize(("sql", "message"), REJECTED_FUNCTIONS)
def test_functions_outside_the_allow_list_are_rejected_before_duckdb(
    recorded: tuple[DatabaseQuery, _RecordingCursor], sql: str, message: str
) -> None:
    tool, cursor = recorded
    with pytest.raises(ToolInputError, match=re.escape(message)) as info:
        call(tool, {"sql": sql})
    assert str(info.value).startswith("invalid input for tool 'db_query': sql: ")
    assert cursor.statements == []  # DuckDB never saw it


def test_the_rejection_lists_what_is_allowed(tool: DatabaseQuery) -> None:
    with pytest.raises(ToolInputError) as info:
        tool.parse_input({"sql": "select current_setting('home_directory')"})
    text = str(info.value)
    for category in ALLOWED_FUNCTIONS:
        assert f"{category}: " in text
    assert "date_trunc" in text and "coalesce" in text and "row_number" in text


# One working call per allowed name. Each runs through the tool on DuckDB, so a name sqlglot parses to
# a different class, or regenerates into SQL DuckDB cannot run, fails here.
ALLOWED_EXAMPLES = {
    "count": "count(*)", "count_if": "count_if(amount > 50)", "sum": "sum(amount)", "avg": "avg(amount)",
    "min": "min(amount)", "max": "max(created_at)", "any_value": "any_value(tenant)",
    "arg_min": "arg_min(payment_id, amount)", "arg_max": "arg_max(payment_id, amount)", "first": "first(tenant)",
    "last": "last(tenant)", "list": "list(tenant)", "array_agg": "array_agg(tenant)",
    "string_agg": "string_agg(tenant, ',')", "bool_and": "bool_and(amount > 1)", "bool_or": "bool_or(amount > 1)",
    "median": "median(amount)", "quantile_cont": "quantile_cont(amount, 0.9)",
    "quantile_disc": "quantile_disc(amount, 0.9)", "mode": "mode(tenant)", "stddev": "stddev(amount)",
    "stddev_samp": "stddev_samp(amount)", "stddev_pop": "stddev_pop(amount)", "variance": "variance(amount)",
    "var_pop": "var_pop(amount)", "grouping": "grouping(tenant)",
    "row_number": "row_number() over (order by payment_id)", "rank": "rank() over (order by amount)",
    "dense_rank": "dense_rank() over (order by amount)", "percent_rank": "percent_rank() over (order by amount)",
    "cume_dist": "cume_dist() over (order by amount)", "ntile": "ntile(2) over (order by amount)",
    "lag": "lag(amount) over (order by created_at)", "lead": "lead(amount, 1, 0) over (order by created_at)",
    "first_value": "first_value(amount) over (order by created_at)",
    "last_value": "last_value(amount) over (order by created_at)",
    "nth_value": "nth_value(amount, 2) over (order by created_at)",
    "lower": "lower(status)", "upper": "upper(tenant)", "length": "length(tenant)", "trim": "trim(tenant)",
    "ltrim": "ltrim(tenant)", "rtrim": "rtrim(tenant)", "substr": "substr(payment_id, 5, 3)",
    "substring": "substring(payment_id, 5, 3)", "left": "left(payment_id, 3)", "right": "right(payment_id, 3)",
    "concat": "concat(tenant, '/', currency)", "concat_ws": "concat_ws('/', tenant, currency)",
    "replace": "replace(payment_id, 'pay_', '')", "split_part": "split_part(payment_id, '_', 2)",
    "strpos": "strpos(payment_id, '_')", "position": "position('_' in payment_id)",
    "starts_with": "starts_with(payment_id, 'pay')", "ends_with": "ends_with(payment_id, '1')",
    "contains": "contains(tenant, 'cm')", "regexp_matches": "regexp_matches(error_code, '^GW_')",
    "regexp_extract": "regexp_extract(payment_id, '[0-9]+')", "regexp_replace": "regexp_replace(tenant, 'a', 'A')",
    "abs": "abs(amount - 100)", "round": "round(amount, 1)", "ceil": "ceil(amount)", "floor": "floor(amount)",
    "trunc": "trunc(amount)", "greatest": "greatest(amount, 50)", "least": "least(amount, 50)",
    "sqrt": "sqrt(amount)", "power": "power(amount, 2)", "ln": "ln(amount)", "log": "log(amount)",
    "exp": "exp(1)", "sign": "sign(amount - 50)",
    "date_trunc": "date_trunc('hour', created_at)", "date_part": "date_part('minute', created_at)",
    "datepart": "datepart('minute', created_at)", "extract": "extract(hour from created_at)",
    "date_diff": "date_diff('minute', created_at, created_at + interval 1 hour)",
    "datediff": "datediff('second', created_at, created_at + interval 1 minute)",
    "date_add": "date_add(created_at, interval 1 day)", "strftime": "strftime(created_at, '%H:%M')",
    "strptime": "strptime('2026-07-01 14:00', '%Y-%m-%d %H:%M')", "epoch": "epoch(created_at)",
    "epoch_ms": "epoch_ms(created_at)", "to_timestamp": "to_timestamp(1782914400)",
    "time_bucket": "time_bucket(interval '5 minutes', created_at)", "year": "year(created_at)",
    "quarter": "quarter(created_at)", "month": "month(created_at)", "week": "week(created_at)",
    "day": "day(created_at)", "dayofmonth": "dayofmonth(created_at)", "dayofweek": "dayofweek(created_at)",
    "isodow": "isodow(created_at)", "dayofyear": "dayofyear(created_at)", "hour": "hour(created_at)",
    "minute": "minute(created_at)", "second": "second(created_at)", "dayname": "dayname(created_at)",
    "monthname": "monthname(created_at)", "make_date": "make_date(2026, 7, 1)",
    "make_timestamp": "make_timestamp(2026, 7, 1, 14, 0, 0)",
    "case": "case when amount > 100 then 'big' else 'small' end", "if": "if(amount > 100, 'big', 'small')",
    "coalesce": "coalesce(error_code, 'none')", "ifnull": "ifnull(error_code, 'none')",
    "nullif": "nullif(status, 'SUCCEEDED')", "cast": "cast(amount as integer)",
    "try_cast": "try_cast(payment_id as integer)",
}  # fmt: skip


def test_every_allowed_name_has_a_working_example() -> None:
    assert set(ALLOWED_EXAMPLES) == {name for group in ALLOWED_FUNCTIONS.values() for name in group}


@pytest.mark.parametrize("name", sorted(ALLOWED_EXAMPLES))
def test_each_allowed_function_parses_to_its_listed_class_and_runs(tool: DatabaseQuery, name: str) -> None:
    expression = ALLOWED_EXAMPLES[name]
    listed = next(group[name] for group in ALLOWED_FUNCTIONS.values() if name in group)
    tree = sqlglot.parse_one(f"select {expression}", read="duckdb")
    if listed is None:  # an anonymous call to sqlglot: if it gains a class, list the class instead
        assert any(isinstance(n, exp.Anonymous) and n.name.lower() == name for n in tree.walk()), repr(tree)
    else:
        assert any(type(n) is listed for n in tree.walk()), f"{name}: sqlglot no longer parses it as {listed}"
    sql = f"select {expression} as v from payments"
    if name == "grouping":
        sql = f"select tenant, {expression} as v from payments group by rollup (tenant)"
    result = call(tool, {"sql": sql})
    assert result.count >= 1


LEGITIMATE = [
    # joins, group by, CTE
    "select p.tenant, o.status, count(*) as n from payments p join orders o on o.order_id = p.order_id "
    "group by p.tenant, o.status order by 1, 2",
    "with failed as (select * from payments where status = 'FAILED') "
    "select tenant, count(*) as n, sum(amount) as total from failed group by tenant having count(*) > 0 order by 1",
    "select tenant from payments where exists (select 1 from orders o where o.order_id = payments.order_id "
    "and o.status = 'PENDING') order by 1",
    # window functions
    "select payment_id, row_number() over (partition by tenant order by created_at) as rn from payments order by 1",
    "select payment_id, amount - lag(amount) over (order by created_at) as delta from payments order by 1",
    "select tenant, sum(amount) over (partition by tenant order by created_at rows between 1 preceding "
    "and current row) as rolling from payments order by tenant, created_at",
    # date/time
    "select date_trunc('hour', created_at) as h, count(*) as n from payments group by 1 order by 1",
    "select payment_id, strftime(created_at, '%Y-%m-%d %H:%M') as t, extract(minute from created_at) as m "
    "from payments order by 1",
    "select payment_id from payments where created_at between timestamp '2026-07-01 14:00:00' "
    "and timestamp '2026-07-01 14:00:00' + interval 5 minute order by 1",
    "select payment_id, epoch(created_at) - epoch(timestamp '2026-07-01 14:00:00') as s from payments order by 1",
    "select o.order_id, date_diff('day', o.created_on, date '2026-07-03') as age_days from orders o order by 1",
    "select date_trunc('month', cast(created_on as date)) as m, count(*) as n from orders group by 1 order by 1",
    "select payment_id, created_at - interval '90 seconds' as earlier from payments order by 1",
    # strings
    "select payment_id from payments where lower(status) like 'fail%' and tenant ilike 'AC%' order by 1",
    "select payment_id from payments where regexp_matches(coalesce(error_code, ''), '^(GW|RISK)_') order by 1",
    "select concat(tenant, ':', substr(payment_id, 5)) as k, tenant || '/' || currency as t from payments order by 1",
    "select distinct split_part(error_code, '_', 1) as family from payments where error_code is not null order by 1",
    # conditionals and casts
    "select tenant, sum(case when status = 'FAILED' then 1 else 0 end) as failed, "
    "count(nullif(status, 'SUCCEEDED')) as not_ok from payments group by tenant order by tenant",
    "select payment_id, coalesce(error_code, 'none') as code, amount::int as whole, cast(amount as varchar) as s, "
    "try_cast(payment_id as integer) as n from payments order by 1",
    "select tenant, count(*) filter (where status = 'FAILED') as failed, round(100.0 * count(*) filter "
    "(where status = 'FAILED') / count(*), 1) as pct from payments group by all order by all",
    "select payment_id, if(amount > 100, 'big', 'small') as size from payments where tenant in ('acme', 'globex') "
    "and amount is not null and error_code is distinct from 'RISK_REJECT' order by 1",
]


@pytest.mark.parametrize("sql", LEGITIMATE)
def test_legitimate_diagnosis_queries_run_and_match_duckdb(
    tool: DatabaseQuery, reference: duckdb.DuckDBPyConnection, sql: str
) -> None:
    expected = [tuple(_as_json(v) for v in row) for row in reference.execute(sql).fetchall()]
    got = [tuple(r.values()) for r in call(tool, {"sql": sql}).records]
    assert got and got == expected


def test_a_column_named_like_a_session_function_is_read_when_qualified() -> None:
    audit = TableFixture(name="audit", columns=("user", "action"), rows=(("alice", "rerun"), ("bob", "approve")))
    tool = DatabaseQuery([audit])
    assert call(tool, {"sql": "select a.user from audit a order by 1"}).records == (
        {"user": "alice"},
        {"user": "bob"},
    )
    with pytest.raises(ToolInputError, match=r"qualify it with its table \(t\.user\)"):
        tool.parse_input({"sql": "select user from audit"})


# Cases whose db_query SQL is meant to fail in DuckDB's binder: a real model's own query, replayed as recorded.
SQL_FAILS_BY_DESIGN = frozenset({"tool_failures_real_unknown_column_retried_until_budget_shop42"})


def test_every_builtin_db_query_step_passes_the_validator_and_runs() -> None:
    from runners.domain.evalset import load_cases

    checked = 0
    for case in load_cases():
        if case.id in SQL_FAILS_BY_DESIGN:
            continue
        steps = [s for s in case.trajectory.steps if s.tool == "db_query" and s.mistake is not Mistake.INVALID_INPUT]
        if not steps:
            continue
        tool = DatabaseQuery(case.fixtures.tables)
        for step in steps:
            try:
                result = tool.run(tool.parse_input(step.input))
            except ToolInputError as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"{case.id}: {exc}")
            assert result.evidence_status in (EvidenceStatus.EVIDENCE, EvidenceStatus.NO_EVIDENCE)
            checked += 1
    assert checked >= 60  # the built-in set's db_query steps, not a vacuous pass


# --- the locked configuration (defence in depth) ------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "SET lock_configuration = false",
        "SET enable_external_access = true",
        "SET autoload_known_extensions = true",
        "SET allow_community_extensions = true",
        "SET max_execution_time = 0",
        "SET memory_limit = '64GB'",
        "SET threads = 8",
    ],
)
def test_the_shared_configuration_is_locked(statement: str) -> None:
    # Even a statement that slipped past validation could not undo the lock-down.
    with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
        _duck.cursor().execute(statement)


def test_a_column_of_mixed_types_loads_as_text_without_pandas() -> None:
    """Values DuckDB cannot put in one VALUES column (an int, a string, a float, a bool) load through the scan of
    per-column object arrays, as text, None as NULL — the path that once needed pandas."""
    rows = ((1, 7), (2, "x"), (3, 2.5), (4, True), (5, None))
    mixed = TableFixture(name="mixed_cells", columns=("k", "v"), rows=rows)
    result = DatabaseQuery([mixed]).run(DbQueryInput(sql="SELECT k, v FROM mixed_cells ORDER BY k"))
    assert [r["v"] for r in result.records] == ["7", "x", "2.5", "True", None]
