"""Session fixtures of the ASR tests: the demo model, tiny NeMo models of every class, built once."""

import pytest
from nemo_models import build

from tests.support import DEMO


@pytest.fixture(scope="session")
def built_model(tmp_path_factory):
    """``(path, build info)``: a demo model on a shorter schedule (400 batches), built from code
    here; its build guarantees every clean demo phrase exact, as the workflow's does."""
    from speechprep.demo.asr_model import build

    out = tmp_path_factory.mktemp("model") / "demo_asr.nemo"
    return out, build(DEMO / "truth.json", out, steps=400)


@pytest.fixture(scope="session")
def model_path(built_model):
    return built_model[0]


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


@pytest.fixture(scope="session")
def grammars_en(tmp_path_factory):
    """The English text-normalisation grammars (speechprep.text.spoken), built once, as rule
    tts_grammars builds them; ``verify`` and long-form alignment read them in this env."""
    from tests.support import english_grammars

    return english_grammars(tmp_path_factory.mktemp("text_normalization") / "en")[0]


def pytest_collection_modifyitems(items):
    from tests.support import mark_slow

    mark_slow(items, {"built_model", "model_path", "loaded", "nemo_model_file", "grammars_en"})
