"""A Lhotse recipe's corpus and a Hugging Face dataset through the workflow, ``text: given``.

``libri``: a small copy of LibriSpeech's layout (the LibriVox reader and the cards speaker of
pocketsphinx-testdata, real speech with its human transcripts; tests/ingest/source_corpora.py)
read by Lhotse's ``prepare_librispeech``; ``hfds``: a dataset saved by ``datasets``'
``save_to_disk`` holding the ALSA voice's recordings as FLAC bytes (48 kHz) with their text and
speaker. Every stage to TTS on the session's demo run's models: the text and the speakers the
sources gave reach the TTS manifests, each line's ``source_id`` is the source's own id."""

import json
import subprocess

import pytest
from conftest import REPO, demo_models, read_jsonl, snakemake, write_config

from tests.ingest import source_corpora as corpora

pytestmark = pytest.mark.slow  # a real snakemake run (18 utterances, the demo run's models)

STAGES = ["vad", "asr", "s2s", "curate", "tts"]


def hf_dataset(path):
    """The ALSA voice as a DatasetDict saved by ``datasets`` (in the ingest env, which has it);
    its truth by row id."""
    cmd = [str(REPO / ".venvs" / "ingest" / "bin" / "python"), "-m", "tests.ingest.source_corpora", "hf", str(path)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, encoding="utf-8", check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sources_run(tmp_path_factory, demo):
    work, _ = demo
    tmp = tmp_path_factory.mktemp("sources")
    libri = corpora.librispeech(tmp / "LibriSpeech", voices_=corpora.voices()[:2])
    hf = hf_dataset(tmp / "hf_saved")
    datasets = {
        "libri": {
            "lhotse_recipe": {"name": "librispeech", "corpus_dir": str(tmp / "LibriSpeech"), "parts": ["dev-clean"]},
            "text": "given",
            "shards": 1,
        },
        "hfds": {
            "hf": {"path": str(tmp / "hf_saved"), "split": "train", "text_column": "sentence", "speaker_column": "who"},
            "text": "given",
            "shards": 1,
        },
    }
    write_config(tmp, datasets, stages=STAGES, **demo_models(work))
    _, out = snakemake(tmp)
    return tmp, {"libri": libri, "hfds": hf}


@pytest.mark.parametrize("ds", ["libri", "hfds"])
def test_the_sources_text_speakers_and_ids_reach_the_tts_manifests(sources_run, ds):
    work, truths = sources_run
    truth, res = truths[ds], work / "results" / ds
    manifest = read_jsonl(res / "manifest.jsonl")
    rejects = read_jsonl(res / "rejects" / "ingest.jsonl")
    assert not rejects and sorted(x["source_id"] for x in manifest) == sorted(truth)
    for x in manifest:
        t = truth[x["source_id"]]
        assert (x["text"], x["speaker"]) == (t["text"], t["speaker"])
    if ds == "hfds":  # the dataset's bytes, written out once under the dataset's results
        assert all(x["audio_filepath"].startswith(str(res / "audio" / "hf")) for x in manifest)
    tts = [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]
    assert len(tts) >= len(truth) // 2, tts  # real read speech: most utterances are kept
    for x in tts:
        t = truth[x["source_id"]]  # the id maps back to the source's own
        assert (x["text"], x["speaker"], x["text_source"]) == (t["text"], t["speaker"], "given")
    speakers = {s["speaker"]: s for s in read_jsonl(res / "curate" / "speakers.jsonl")}
    assert set(speakers) <= {t["speaker"] for t in truth.values()} and speakers
    assert all(s["source"] == "given" for s in speakers.values()), speakers
