import os

import pytest

pytest_plugins = ["ropecheck.pytest"]


def pytest_configure(config):
    config.addinivalue_line("markers", "long: standard-budget runs (ctest -L python_long)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("ROPECHECK_LONG"):
        return
    skip = pytest.mark.skip(reason="long: set ROPECHECK_LONG=1 (ctest -L python_long)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)
