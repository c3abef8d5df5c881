"""Lhotse manifests, a Lhotse recipe's corpus and a Hugging Face dataset through the workflow,
``text: given``.

``libri``: a small copy of LibriSpeech's layout (the LibriVox reader and the cards speaker of
pocketsphinx-testdata, real speech with its human transcripts; tests/ingest/source_corpora.py)
read by Lhotse's ``prepare_librispeech``; ``hfds``: a dataset saved by ``datasets``'
``save_to_disk`` holding the ALSA voice's recordings as FLAC bytes (48 kHz) with their text and
speaker; ``lhman`` and ``lhcuts``: a RecordingSet with its SupervisionSet, and a CutSet of the
same, written by Lhotse's own API (three of the cards speaker's files, and a two-channel call: two
LibriVox sentences on channel 0 at their offsets, other speech on channel 1). Every stage to TTS
on the session's demo run's models, in one run: the text and the speakers the sources gave reach
the TTS manifests, each line's ``source_id`` is the source's own id, and a supervision's channel
and span are the TTS line's."""

import json
import subprocess

import pytest
from conftest import REPO, demo_models, read_jsonl, snakemake, write_config

from tests.ingest import source_corpora as corpora

pytestmark = pytest.mark.slow  # a real snakemake run (28 utterances, the demo run's models)

STAGES = ["vad", "asr", "s2s", "curate", "tts"]


def in_ingest_env(kind, path):
    """``tests.ingest.source_corpora``'s ``kind`` (``hf``: the ALSA voice as a DatasetDict saved by
    ``datasets``; ``lhotse``: Lhotse's manifests) written in the ingest env, which has the library;
    its truth by source id."""
    cmd = [str(REPO / ".venvs" / "ingest" / "bin" / "python"), "-m", "tests.ingest.source_corpora", kind, str(path)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, encoding="utf-8", check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sources_run(tmp_path_factory, demo):
    work, _ = demo
    tmp = tmp_path_factory.mktemp("sources")
    libri = corpora.librispeech(tmp / "LibriSpeech", voices_=corpora.voices()[:2])
    hf = in_ingest_env("hf", tmp / "hf_saved")
    lh, m = in_ingest_env("lhotse", tmp / "lhotse"), tmp / "lhotse"
    pair = {"recordings": str(m / "recordings.jsonl.gz"), "supervisions": str(m / "supervisions.jsonl.gz")}
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
        "lhman": {"lhotse": pair, "text": "given", "shards": 1},
        "lhcuts": {"lhotse": {"cuts": str(m / "cuts.jsonl.gz")}, "text": "given", "shards": 1},
    }
    write_config(tmp, datasets, stages=STAGES, **demo_models(work))
    _, out = snakemake(tmp)
    return tmp, {"libri": libri, "hfds": hf, "lhman": lh, "lhcuts": lh}


@pytest.mark.parametrize("ds", ["libri", "hfds", "lhman", "lhcuts"])
def test_the_sources_text_speakers_and_ids_reach_the_tts_manifests(sources_run, ds):
    work, truths = sources_run
    truth, res = truths[ds], work / "results" / ds
    manifest = read_jsonl(res / "manifest.jsonl")
    rejects = read_jsonl(res / "rejects" / "ingest.jsonl")
    assert not rejects and sorted(x["source_id"] for x in manifest) == sorted(truth)
    for x in manifest:
        t = truth[x["source_id"]]
        assert (x["text"], x["speaker"], x.get("channel")) == (t["text"], t["speaker"], t.get("channel"))
    if ds == "hfds":  # the dataset's bytes, written out once under the dataset's results
        assert all(x["audio_filepath"].startswith(str(res / "audio" / "hf")) for x in manifest)
    tts = [x for k in ("train", "val") for x in read_jsonl(res / "tts" / f"{k}_manifest.jsonl")]
    assert len(tts) >= len(truth) // 2, tts  # real read speech: most utterances are kept
    for x in tts:
        t = truth[x["source_id"]]  # the id maps back to the source's own
        assert (x["text"], x["speaker"], x["text_source"]) == (t["text"], t["speaker"], "given")
        assert x.get("channel") == t.get("channel")  # the call's supervisions: channel 0 of two
        if "offset" in t:  # within the supervision's span, on the file's clock
            assert (
                t["offset"] - 0.01 <= x["offset"] <= x["offset"] + x["duration"] <= t["offset"] + t["duration"] + 0.01
            )
    speakers = {s["speaker"]: s for s in read_jsonl(res / "curate" / "speakers.jsonl")}
    assert set(speakers) <= {t["speaker"] for t in truth.values()} and speakers
    assert all(s["source"] == "given" for s in speakers.values()), speakers
