"""The README's Python blocks: the Store quick start runs as written (in a scratch folder);
the two adapters' quick starts (which need a model and the network) compile, and every name
they import exists, with the keyword arguments they pass."""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def python_blocks():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("\n## Python\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_has_a_store_and_two_adapter_quick_starts():
    blocks = python_blocks()
    assert len(blocks) == 3
    assert "session_store.Store(" in blocks[0]
    assert "session_store.agents import Session" in blocks[1]
    assert "session_store.claude import SessionStore" in blocks[2]


def test_the_store_quick_start_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(python_blocks()[0], "README.md", "exec"), {"__name__": "readme"})
    assert out.getvalue().strip() == "dangling_tool_use ['toolu_1']"
    assert (tmp_path / "sessions.db").exists()


@pytest.mark.parametrize("index", [1, 2])
def test_the_adapter_quick_starts_import_what_exists_and_call_it_as_it_takes(index):
    tree = ast.parse(python_blocks()[index])
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
                names[alias.asname or alias.name] = getattr(module, alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = names.get(node.func.id)
            if target is None or not callable(target):
                continue
            try:
                parameters = inspect.signature(target).parameters
            except (TypeError, ValueError):
                continue
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
                continue
            for keyword in node.keywords:
                assert keyword.arg in parameters, f"{node.func.id}({keyword.arg}=...)"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = names.get(node.value.id)
            if inspect.isclass(target):
                assert hasattr(target, node.attr), f"{node.value.id}.{node.attr}"
