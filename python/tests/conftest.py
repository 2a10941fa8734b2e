"""Shared fixtures: a fresh database file per test, in pytest's tmp_path."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import session_store  # noqa: E402


@pytest.fixture
def db(tmp_path) -> str:
    """A path for a new database file."""
    return str(tmp_path / "sessions.db")


@pytest.fixture
def store(db):
    """A store on a new database file, closed after the test."""
    with session_store.Store(db) as opened:
        yield opened
