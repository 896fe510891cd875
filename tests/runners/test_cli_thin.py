"""The CLI stays thin: `runners/cli.py` builds the parser and dispatches; every command is a module of
`runners/commands/` that registers its own parser and body."""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
from pathlib import Path

import runners.commands
from runners.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "runners" / "cli.py"
SHARED = ("runners.commands._common", "runners.commands._bench")
"""What commands share: the CLI's helpers, and the flags and messages of `run` and `sweep`."""


def _command_modules() -> list[str]:
    return sorted(
        f"runners.commands.{m.name}" for m in pkgutil.iter_modules(runners.commands.__path__) if not m.ispkg
        and not m.name.startswith("_")
    )  # fmt: skip


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_runs_in_a_module_of_runners_commands() -> None:
    commands = _subcommands()
    assert {"cases", "run", "sweep", "gate", "report", "show", "schema"} <= commands.keys(), "the walk found them"
    for name, sub in commands.items():
        func = sub.get_default("func")
        where = func.__module__
        assert where.startswith("runners.commands."), f"`{name}` runs {where}.{func.__name__}, not a command module"
        assert func.__name__ == "run", f"`{name}` dispatches to {where}.{func.__name__}, not its module's run"


def test_cli_defines_nothing_but_the_parser_main_and_dispatch() -> None:
    tree = ast.parse(CLI.read_text(), str(CLI))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    assert functions == {"build_parser", "main", "_dispatch"}, f"defined in runners/cli.py: {sorted(functions)}"


def test_every_command_module_is_registered_and_exposes_register_and_run() -> None:
    used = {sub.get_default("func").__module__ for sub in _subcommands().values()}
    modules = _command_modules()
    assert used == set(modules), f"modules never registered: {sorted(set(modules) - used)}"
    for name in modules:
        module = importlib.import_module(name)
        assert module.__all__ == ["register", "run"], name
        assert callable(module.register) and callable(module.run), name
        assert module.__doc__ and module.__doc__.startswith("`harness-bench "), f"{name}: say which command it is"


def test_a_command_module_imports_only_the_shared_helpers_of_the_cli() -> None:
    """A command never reaches into `runners.cli` or another command: what two commands share is in `_common`
    (and, for `run` and `sweep`, `_bench`)."""
    for name in _command_modules():
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                assert target != "runners.cli", f"{name} imports runners.cli"
                if target.startswith("runners.commands"):
                    assert target in SHARED, f"{name} imports {target}"


def test_the_command_table_names_what_each_module_registers_in_help_order() -> None:
    """`COMMANDS` is what `build_parser` imports for a command line naming one: each name's module registers that name
    (and only its own), and the whole parser lists the table's names in its order."""
    assert list(_subcommands()) == list(COMMANDS)
    for name, module in COMMANDS.items():
        action = next(a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
        alone = [n for n, m in COMMANDS.items() if m == module]
        assert list(action.choices) == alone, name
        assert action.choices[name].get_default("func").__module__ == f"runners.commands.{module}", name


def test_a_command_parses_as_it_does_with_every_command_registered() -> None:
    """The one-command parser and the whole one give `run`'s flags the same defaults and the same help."""
    whole, alone = (next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
                    for p in (build_parser(), build_parser("run")))  # fmt: skip
    assert whole.format_help() == alone.format_help()
    assert vars(whole.parse_args([])) == vars(alone.parse_args([]))
