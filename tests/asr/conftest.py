"""Session fixtures of the ASR tests: the demo model, tiny NeMo models of every class, built once."""

import pytest
from nemo_models import build

from tests.support import DEMO


@pytest.fixture(scope="session")
def model_path(tmp_path_factory):
    """A demo model trained briefly: good enough to transcribe, built from code here."""
    from speechprep.demo.asr_model import build

    out = tmp_path_factory.mktemp("model") / "demo_asr.nemo"
    build(DEMO / "truth.json", out, max_steps=400)
    return out


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

    mark_slow(items, {"model_path", "loaded", "nemo_model_file", "grammars_en"})
