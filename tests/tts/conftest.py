"""Shared by the TTS tests: demo ASR lines, a shard's files, the real encoders, the
English text-normalisation grammars (built once per session)."""

import warnings
from dataclasses import replace

import pytest

from speechprep import encoders as enc
from speechprep.core.modelstage import ShardFiles
from speechprep.io.audio import read_segment
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.text import spoken
from speechprep.tts import features
from tests.support import demo_segments as _segments
from tests.support import params

warnings.simplefilter("ignore")
P = params(features.TtsParams, device="cpu")


def demo_segments():
    """The clean demo clips' spoken phrases, as ASR lines (with their true text)."""
    return [{k: v for k, v in s.items() if k != "file_id"} for s in _segments(text=True, voice=True)]


def fake_units(seg):
    return [(i * 7 + len(seg["id"])) % 50 for i in range(int(seg["duration"] * 50))]


def shard(tmp_path, segs, units=None, s2s_rejects=()):
    """Write a shard's ASR lines and S2S units; return the paths run_features takes."""
    asr = tmp_path / "asr" / "shard-0000.jsonl"
    write_jsonl(asr, segs)
    units = units if units is not None else {s["id"]: fake_units(s) for s in segs}
    u = tmp_path / "s2s" / "shard-0000.units.jsonl"
    write_jsonl(u, [{"id": k, "units": v, "frame_rate": 50.0} for k, v in units.items()])
    r = tmp_path / "s2s" / "shard-0000.rejects.jsonl"
    write_jsonl(r, list(s2s_rejects))
    return asr, u, r


def run(tmp_path, asr, units, s2s_rejects, p=P, layout="files", **kw):
    """The features job of a shard (its arrays in ``tts/shard-0000/<kind>/``, ``layout``)."""
    out = tmp_path / "tts"
    arrays = {k: str(out / "shard-0000" / k) for k in features.FEATURES}
    files = ShardFiles(
        str(asr),
        str(out / "shard-0000.features.jsonl"),
        str(out / "shard-0000.rejects.jsonl"),
        str(out / ".partial" / "shard-0000.jsonl"),
        arrays,
        layout,
    )
    counts = features.run(files, replace(p, layout=layout), str(units), str(s2s_rejects), **kw)
    return (
        counts,
        list(read_jsonl(out / "shard-0000.features.jsonl")),
        list(read_jsonl(out / "shard-0000.rejects.jsonl")),
    )


@pytest.fixture(scope="module")
def encoders():
    return enc.Encoders(P.condition, P.emotion, "cpu", threads=2)


@pytest.fixture(scope="module")
def clips():
    return [read_segment(s) for s in demo_segments()[:6]]


def pytest_collection_modifyitems(items):
    from tests.support import mark_slow

    mark_slow(items, {"grammars", "spoken_en"})


@pytest.fixture(scope="session")
def grammars(tmp_path_factory):
    """The English grammars, built once (nemo-text-processing compiles them: ~26 s here),
    as rule tts_grammars builds resources/text_normalization/en; with their grammars.json."""
    from tests.support import english_grammars

    return english_grammars(tmp_path_factory.mktemp("text_normalization") / "en")


@pytest.fixture(scope="session")
def spoken_en(grammars):
    return spoken.SpokenNormalizer({"en": str(grammars[0])})


def text_ids(index, tokenizer, out, ids_dir, normalized=(), layout="files", **settings):
    """The text-ids job over a features index (its rejects beside ``out``, the phoneme ids
    beside ``ids_dir``; ``settings``: its parameters over the config's); its counts."""
    from pathlib import Path

    from speechprep.tts import text
    from speechprep.tts.params import TextIdsParams
    from tests.support import params

    rejects = str(Path(out).with_suffix(".rejects.jsonl"))
    dirs = {"text_ids": str(ids_dir), "phoneme_ids": str(Path(ids_dir).parent / "phoneme_ids")}
    p = params(TextIdsParams, layout=layout, **settings)
    return text.run_text(str(index), str(tokenizer), str(out), rejects, dirs, p, normalized)
