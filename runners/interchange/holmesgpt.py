"""HolmesGPT's LLM evaluation cases as a suite (`harness-bench import-suite --from holmesgpt`).

HolmesGPT keeps one folder per case under `test_ask_holmes/` (a `test_case.yaml` with `user_prompt` and
`expected_output`), `test_investigate/` (the question is the alert of `investigate_request.json`) and
`test_workload_health/` (`workload_health_request.json`'s `ask`), with each tool output the case was captured
with as a mock file: line 1 JSON `{toolset_name, tool_name, match_params}` (a null parameter matches anything),
line 2 JSON metadata (`status`: success, error or no_data), then the raw output.

A folder becomes one case: its question, `expected_output` as the root-cause statement (for a judge; the bench's
keyword verdict has nothing to check), each mock as a fixture in file-name order (null parameters as the
wildcard), the tools of the toolsets its mocks use as the tools it is offered, and the mocked path as its
trajectory. The suite's tools are declared from the mocks (each argument any mock names, typed by its values,
none required: HolmesGPT's own schemas are not in its fixtures); its families are the kind of tool a case
leans on. A folder that cannot run without a live cluster, has no mocks, is skipped upstream or has a mock file
missing is listed with the reason, never guessed at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from harness import JsonValue
from runners.domain.case_model import EvalCase
from runners.domain.mocked_path import mocked_path
from runners.domain.suite import DeclaredTool, ParameterType, SuiteFamily, SuiteSpec, ToolParameter, ToolParameters
from runners.domain.tool_fixtures import WILDCARD, FixtureStatus

__all__ = ["HOLMES_ROLE", "Conversion", "NotConverted", "convert", "suite_files"]

HOLMES_ROLE = (
    "You are a diagnosis assistant for Kubernetes clusters and the observability tools around them (kubectl, pod "
    "logs, Prometheus, Tempo, ArgoCD, Kafka, RabbitMQ, runbooks). You investigate an operator's question or alert "
    "with the tools provided, then write a Draft. Tenants do not apply here: the namespace, workload and time the "
    "question names are its context, and a question that names none asks about the whole cluster."
)
"""Who the agent is in the converted suite (the Harness's tool protocol follows it)."""

_LAYOUTS = {"test_ask_holmes": "ask", "test_investigate": "investigate", "test_workload_health": "workload_health"}

_FAMILIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("traces", "questions answered from distributed traces (Tempo)", ("grafana/tempo",)),
    ("metrics", "questions answered from Prometheus metrics and rules", ("prometheus/metrics",)),
    ("gitops", "ArgoCD applications and their drift", ("argocd/core",)),
    ("messaging", "Kafka and RabbitMQ clusters", ("kafka/admin", "rabbitmq/core")),
    ("logs", "questions answered from pod logs", ("kubernetes/logs", "datadog/logs")),
    ("kubernetes", "questions answered from the cluster's objects and events", ("kubernetes/",)),
    ("other", "questions answered from other sources (web pages, changes, findings, the clock)", ("",)),
)
"""(family, what it is, toolset prefixes) in priority order: a case's family is the first its mocks' toolsets hit."""
_INVESTIGATE_FAMILY = ("investigate", "an alert to investigate (HolmesGPT's investigate and workload-health cases)")


@dataclass(frozen=True, slots=True)
class NotConverted:
    """A case folder left out, and why."""

    folder: str
    """The folder, relative to the path read."""
    reason: str
    """Why it cannot run here."""


@dataclass(slots=True)
class Conversion:
    """What one conversion produced."""

    suite: SuiteSpec
    """The suite's declaration."""
    cases: dict[str, list[EvalCase]] = field(default_factory=dict)
    """Cases by layout (`ask`, `investigate`, `workload_health`), each layout one file."""
    skipped: list[NotConverted] = field(default_factory=list)
    """The folders not converted."""

    @property
    def converted(self) -> int:
        """How many case folders became cases."""
        return sum(len(c) for c in self.cases.values())


@dataclass(frozen=True, slots=True)
class _Mock:
    toolset: str
    tool: str
    match: dict[str, JsonValue]
    params: dict[str, JsonValue]
    status: FixtureStatus
    output: str
    error: str | None


class _Skip(Exception):
    """The folder is not converted, for this reason."""


def _mock_header(path: Path) -> dict[str, JsonValue] | None:
    """Line 1 of a mock file, when it is one (a `.txt` that is not a mock is none of the case's business)."""
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        header = json.loads(first)
    except ValueError:
        return None
    return header if isinstance(header, dict) and isinstance(header.get("tool_name"), str) else None


def _read_mock(path: Path) -> _Mock:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _Skip(f"a mock file missing or unreadable: {path.name} ({exc})") from None
    head, _, rest = text.partition("\n")
    meta_line, _, body = rest.partition("\n")
    header = json.loads(head)
    try:
        meta = json.loads(meta_line)
    except ValueError:
        raise _Skip(f"a mock file cut short: {path.name} (line 2 is not its JSON metadata)") from None
    if not isinstance(meta, dict):
        raise _Skip(f"a mock file cut short: {path.name} (line 2 is not its JSON metadata)")
    match = header.get("match_params") or {}
    if not isinstance(match, dict):
        raise _Skip(f"a mock file malformed: {path.name} (match_params is not an object)")
    params = meta.get("params") if isinstance(meta.get("params"), dict) else {}
    status_text = meta.get("status") or "success"
    error_text = meta.get("error")
    if status_text == "error":
        message = str(error_text or body.strip() or "error")[:2_000]
        return _Mock(str(header.get("toolset_name") or ""), str(header["tool_name"]),
                     {k: WILDCARD if v is None else v for k, v in match.items()}, dict(params or {}),
                     FixtureStatus.ERROR, "", message)  # fmt: skip
    status = FixtureStatus.NO_DATA if status_text == "no_data" or not body.strip() else FixtureStatus.RESULTS
    return _Mock(str(header.get("toolset_name") or ""), str(header["tool_name"]),
                 {k: WILDCARD if v is None else v for k, v in match.items()}, dict(params or {}), status,
                 body if status is FixtureStatus.RESULTS else "", None)  # fmt: skip


def _mocks(folder: Path) -> list[_Mock]:
    mocks: list[_Mock] = []
    for path in sorted(folder.glob("*.txt")):
        if not path.exists():  # a dangling link: the file it named was left out
            raise _Skip(f"a mock file missing: {path.name}")
        if _mock_header(path) is not None:
            mocks.append(_read_mock(path))
    return mocks


def _statement(expected: object) -> str | None:
    if isinstance(expected, str) and expected.strip():
        return expected.strip()
    if isinstance(expected, list):
        items = [str(x).strip() for x in expected if str(x).strip()]
        return "; ".join(items) or None
    return None


def _json_file(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _question(folder: Path, layout: str, spec: Mapping[str, object]) -> str:
    prompt = spec.get("user_prompt")
    if isinstance(prompt, str) and prompt.strip():
        return prompt.strip()
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return str(prompt[-1]).strip()  # a conversation's last question
    if layout == "investigate":
        request = _json_file(folder / "investigate_request.json")
        if request is None:
            raise _Skip("no investigate_request.json (an investigate case's question)")
        subject = request.get("subject") if isinstance(request.get("subject"), dict) else {}
        assert isinstance(subject, dict)
        about = " ".join(f"{k} {subject[k]}" for k in ("subject_type", "name", "namespace") if subject.get(k))
        parts = [f"Investigate this alert: {request.get('title') or 'an alert'}", str(request.get("description") or "")]
        return ". ".join(p.strip().rstrip(".") for p in parts if p.strip()) + (f" ({about})." if about else ".")
    if layout == "workload_health":
        request = _json_file(folder / "workload_health_request.json")
        ask = request.get("ask") if request is not None else None
        if isinstance(ask, str) and ask.strip():
            return ask.strip()
        raise _Skip("no workload_health_request.json with an ask (a workload-health case's question)")
    raise _Skip("no user_prompt in test_case.yaml")


def _family(layout: str, mocks: Sequence[_Mock]) -> str:
    if layout != "ask":
        return _INVESTIGATE_FAMILY[0]
    toolsets = {m.toolset for m in mocks}
    for name, _, prefixes in _FAMILIES:
        if any(t.startswith(p) for t in toolsets for p in prefixes):
            return name
    return "other"


def _case_id(layout: str, folder: str) -> str:
    slug = re.sub(r"[^a-z0-9_\-]+", "_", folder.lower()).strip("_-") or "case"
    return f"{layout}_{slug}"[:80]


def _json_type(values: Sequence[JsonValue]) -> ParameterType:
    seen = {type(v) for v in values if v is not None and v != WILDCARD}
    if seen and seen <= {bool}:
        return ParameterType.BOOLEAN
    if seen and seen <= {int}:
        return ParameterType.INTEGER
    if seen and seen <= {int, float}:
        return ParameterType.NUMBER
    if seen == {list}:
        return ParameterType.ARRAY
    if seen == {dict}:
        return ParameterType.OBJECT
    return ParameterType.STRING


def _coerce(value: JsonValue, kind: ParameterType) -> JsonValue:
    """A mock's value in its argument's declared type (mixed-type arguments are strings)."""
    if value == WILDCARD or kind is not ParameterType.STRING or isinstance(value, str):
        return value
    return (
        json.dumps(value)
        if isinstance(value, list | dict)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def _declare(mocks_by_case: Mapping[str, Sequence[_Mock]]) -> dict[str, tuple[DeclaredTool, set[str]]]:
    """Each tool, declared from every mock of it (its arguments and their types), with the toolsets it is in."""
    values: dict[str, dict[str, list[JsonValue]]] = {}
    toolsets: dict[str, set[str]] = {}
    for mocks in mocks_by_case.values():
        for m in mocks:
            args = values.setdefault(m.tool, {})
            toolsets.setdefault(m.tool, set()).add(m.toolset)
            for k, v in {**m.params, **m.match}.items():
                if re.match(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$", k):
                    args.setdefault(k, []).append(v)
    out: dict[str, tuple[DeclaredTool, set[str]]] = {}
    for tool in sorted(values):
        props = {k: ToolParameter(type=_json_type(v)) for k, v in sorted(values[tool].items())}
        names = ", ".join(props) or "none"
        sets = ", ".join(sorted(t for t in toolsets[tool] if t)) or "HolmesGPT"
        description = (f"HolmesGPT's {tool} tool ({sets}), answered from the case's recorded outputs. "
                       f"Arguments: {names}.")  # fmt: skip
        out[tool] = (DeclaredTool(name=tool, description=description, parameters=ToolParameters(properties=props)),
                     toolsets[tool])  # fmt: skip
    return out


@dataclass(frozen=True, slots=True)
class _Read:
    folder: Path
    rel: str
    layout: str
    question: str
    statement: str
    tags: tuple[str, ...]
    mocks: tuple[_Mock, ...]


def _read_case(folder: Path, rel: str, layout: str) -> _Read:
    spec_path = folder / "test_case.yaml"
    if not spec_path.is_file():
        raise _Skip("no test_case.yaml")
    try:
        spec = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise _Skip(f"test_case.yaml unreadable ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict):
        raise _Skip("test_case.yaml is not a mapping")
    if spec.get("skip"):
        raise _Skip(f"skipped upstream: {' '.join(str(spec.get('skip_reason') or 'no reason given').split())}")
    if spec.get("mock_policy") == "never_mock":
        raise _Skip("needs a live cluster (mock_policy: never_mock)")
    mocks = _mocks(folder)
    if not mocks:
        live = spec.get("before_test") or spec.get("port_forwards")
        raise _Skip("no mocks: needs a live cluster (before_test sets it up)" if live else "no mocks")
    statement = _statement(spec.get("expected_output"))
    if statement is None:
        raise _Skip("no expected_output")
    tags = spec.get("tags") if isinstance(spec.get("tags"), list) else []
    return _Read(folder, rel, layout, _question(folder, layout, spec), statement,
                 tuple(str(t) for t in tags or ()), tuple(mocks))  # fmt: skip


def _case_folders(root: Path) -> list[tuple[Path, str]]:
    """(folder, layout) for every case folder under `root` (the fixtures folder, a layout folder or one case)."""
    if (root / "test_case.yaml").is_file():
        return [(root, _LAYOUTS.get(root.parent.name, "ask"))]
    found: list[tuple[Path, str]] = []
    layouts = [root] if root.name in _LAYOUTS else sorted(p for p in root.iterdir() if p.name in _LAYOUTS)
    for layout_dir in layouts:
        for child in sorted(p for p in layout_dir.iterdir() if p.is_dir()):
            found.append((child, _LAYOUTS[layout_dir.name]))
    return found


def convert(root: Path) -> Conversion:
    """The suite HolmesGPT's fixtures under `root` make (ValueError when `root` holds no case folder)."""
    folders = _case_folders(root)
    if not folders:
        raise ValueError(f"{root}: no HolmesGPT case folder (expected test_ask_holmes/, test_investigate/ or "
                         "test_workload_health/ folders, or a folder with a test_case.yaml)")  # fmt: skip
    read: list[_Read] = []
    skipped: list[NotConverted] = []
    for folder, layout in folders:
        rel = str(folder.relative_to(root)) if folder != root else folder.name
        try:
            read.append(_read_case(folder, rel, layout))
        except _Skip as exc:
            skipped.append(NotConverted(rel, str(exc)))
    tools = _declare({r.rel: r.mocks for r in read})
    used_families = {_family(r.layout, r.mocks) for r in read}
    families = [SuiteFamily(name=n, description=d) for n, d, _ in _FAMILIES if n in used_families]
    if _INVESTIGATE_FAMILY[0] in used_families:
        families.append(SuiteFamily(name=_INVESTIGATE_FAMILY[0], description=_INVESTIGATE_FAMILY[1]))
    suite = SuiteSpec(
        suite="holmesgpt",
        description=("HolmesGPT's LLM evaluation cases (Apache-2.0), converted by `harness-bench import-suite --from "
                     f"holmesgpt` from {root}: each case's mocks are its fixtures."),
        role=HOLMES_ROLE,
        families=families or [SuiteFamily(name="other")],
        tools=[spec for spec, _ in tools.values()] or [DeclaredTool(name="none", description="no tool")],
    )  # fmt: skip
    out = Conversion(suite, skipped=skipped)
    ids: set[str] = set()
    for r in read:
        case_id = _case_id(r.layout, r.folder.name)
        if case_id in ids:
            out.skipped.append(NotConverted(r.rel, f"its id {case_id!r} is another folder's"))
            continue
        try:
            case = _build(r, case_id, suite, tools)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            out.skipped.append(NotConverted(r.rel, f"does not make a valid case ({where}: {err['msg']})"))
            continue
        ids.add(case_id)
        out.cases.setdefault(r.layout, []).append(case)
    out.skipped.sort(key=lambda s: s.folder)
    return out


def _build(r: _Read, case_id: str, suite: SuiteSpec, tools: Mapping[str, tuple[DeclaredTool, set[str]]]) -> EvalCase:
    toolsets = {m.toolset for m in r.mocks}
    offered = [name for name, (_, sets) in tools.items() if sets & toolsets]
    fixtures = []
    for m in r.mocks:
        declared = tools[m.tool][0].parameters.properties
        match = {k: _coerce(v, declared[k].type) if k in declared else v for k, v in m.match.items()}
        fixture: dict[str, object] = {"tool": m.tool, "match": match, "status": m.status.value}
        fixture.update({"output": m.output} if m.output else {})
        fixture.update({"error": m.error} if m.error else {})
        fixtures.append(fixture)
    tags = f" (tags: {', '.join(r.tags)})" if r.tags else ""
    raw: dict[str, object] = {
        "suite": suite.model_dump(mode="json", exclude_none=True),
        "id": case_id,
        "family": _family(r.layout, r.mocks),
        "description": f"HolmesGPT {r.layout} case {r.folder.name}{tags}.",
        "question": r.question,
        "tools": offered,
        "fixtures": {"results": fixtures},
        "expect": {"outcome": "SUCCESS", "root_cause_statement": r.statement},
        "trajectory": {},
    }
    case = EvalCase.model_validate(raw)
    return case.model_copy(update={"trajectory": mocked_path(case)})


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Multi-line strings as literal blocks (a tool's output stays readable); libyaml's emitter where there is one."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def _dump(doc: object) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


def suite_files(conversion: Conversion) -> dict[str, str]:
    """The suite's files by name: `suite.yaml`, one file of cases per layout, `not_converted.json`."""
    files = {"suite.yaml": "# Converted by `harness-bench import-suite --from holmesgpt`; docs/your-agent.md.\n"
             + _dump(conversion.suite.model_dump(mode="json", exclude_none=True))}  # fmt: skip
    for layout, cases in sorted(conversion.cases.items()):
        docs = [c.model_dump(mode="json", exclude_defaults=True, exclude={"suite"}) for c in cases]
        files[f"{layout}.yaml"] = _dump({"cases": docs})
    files["not_converted.json"] = (
        json.dumps([{"folder": s.folder, "reason": s.reason} for s in conversion.skipped], indent=1, ensure_ascii=False)
        + "\n"
    )
    return files
