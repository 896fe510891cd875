"""The CLI stays thin: `runners/cli.py` parses, dispatches and (for now) holds `run` and `sweep`; every other
command is a module of `runners/commands/` that registers its own parser and body."""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
from pathlib import Path

import runners.commands
from runners.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "runners" / "cli.py"
IN_CLI = {"run", "sweep"}
"""The commands whose bodies are still in runners/cli.py."""


def _command_modules() -> list[str]:
    return sorted(
        f"runners.commands.{m.name}" for m in pkgutil.iter_modules(runners.commands.__path__) if not m.ispkg
        and not m.name.startswith("_")
    )  # fmt: skip


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_but_run_and_sweep_runs_in_a_module_of_runners_commands() -> None:
    commands = _subcommands()
    assert {"cases", "gate", "report", "show", "schema"} <= commands.keys(), "the walk found the commands"
    for name, sub in commands.items():
        func = sub.get_default("func")
        where = func.__module__
        if name in IN_CLI:
            assert where == "runners.cli", f"{name}: {where}"
        else:
            assert where.startswith("runners.commands."), f"`{name}` runs {where}.{func.__name__}, not a command module"
            assert func.__name__ == "run", f"`{name}` dispatches to {where}.{func.__name__}, not its module's run"


def test_cli_defines_no_command_body_beyond_run_and_sweep() -> None:
    tree = ast.parse(CLI.read_text(), str(CLI))
    bodies = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("cmd_")}
    assert bodies == {f"cmd_{name}" for name in IN_CLI}, f"command bodies in runners/cli.py: {sorted(bodies)}"


def test_every_command_module_is_registered_and_exposes_register_and_run() -> None:
    used = {sub.get_default("func").__module__ for sub in _subcommands().values()} - {"runners.cli"}
    modules = _command_modules()
    assert used == set(modules), f"modules never registered: {sorted(set(modules) - used)}"
    for name in modules:
        module = importlib.import_module(name)
        assert module.__all__ == ["register", "run"], name
        assert callable(module.register) and callable(module.run), name
        assert module.__doc__ and module.__doc__.startswith("`harness-bench "), f"{name}: say which command it is"


def test_a_command_module_imports_only_the_shared_helpers_of_the_cli() -> None:
    """A command never reaches into `runners.cli` or another command: what two commands share is in `_common`."""
    for name in _command_modules():
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                assert target != "runners.cli", f"{name} imports runners.cli"
                if target.startswith("runners.commands"):
                    assert target == "runners.commands._common", f"{name} imports {target}"
