from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root holding the offline digits dataset (made once per test session)."""
    from prunex.data import make_digits

    root = tmp_path_factory.mktemp("data")
    make_digits(root)
    os.environ["PRUNEX_DATA"] = str(root)
    return root
