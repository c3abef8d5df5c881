"""Session fixtures of the ASR tests: tiny NeMo models of every class, built once."""

import pytest
from nemo_models import build


@pytest.fixture(scope="session")
def nemo_model_file(tmp_path_factory):
    """``nemo_model_file(kind)``: a tiny ``.nemo`` of that kind (``nemo_models.KINDS``), built on first use."""
    root = tmp_path_factory.mktemp("nemo_models")
    built = {}

    def get(kind):
        if kind not in built:
            built[kind] = build(kind, root)
        return built[kind]

    return get


def pytest_collection_modifyitems(items):
    from tests.support import mark_slow

    mark_slow(items, {"model_path", "loaded", "nemo_model_file"})
