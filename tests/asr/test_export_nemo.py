"""The export stage's nemo_tarred format, read back by NeMo's own tarred audio
dataset over every shard at once (here, in the ASR env, which has NeMo): the
config keys the export's ``stats.json`` gives (``tarred_audio_filepaths``
brace-expanded ``audio__OP_0..2_CL_.tar``, ``manifest_filepath`` the manifest of
all shards) passed as they are to NeMo's ``get_tarred_dataset``, on a real-speech
dataset of three shards whose middle one is empty (tests/export_data.py): every
kept segment, its text and its audio (a fresh cut of the source within FLAC's
16-bit step)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from speechprep.export import stage as export
from tests.export_data import SHARDS, export_dataset, kept, make_dataset

TOL = 1.5 / 32767


def test_nemo_tarred_dataset_reads_every_shard(tmp_path):
    from nemo.collections.asr.data.audio_to_text_dataset import get_tarred_dataset

    by_shard = make_dataset(tmp_path)
    want = kept(by_shard)
    out = export_dataset(tmp_path, ("nemo_tarred",))
    stats = json.loads((out / "nemo_tarred" / "stats.json").read_text(encoding="utf-8"))
    cfg = stats["nemo_config"]
    assert "_OP_0..2_CL_" in cfg["tarred_audio_filepaths"] and cfg["is_tarred"]
    labels = sorted({c for x in want for c in x["text"]})
    ds = get_tarred_dataset({**cfg, "labels": labels, "return_sample_id": True}, 0, 0, 1)
    assert len(ds) == len(want)
    got = {}
    for audio, audio_len, tokens, tokens_len, sample_id in ds:
        text = "".join(labels[t] for t in tokens[: int(tokens_len)].tolist())
        got[int(sample_id)] = (text, audio[: int(audio_len)].numpy())
    assert sorted(got) == list(range(len(want)))  # each manifest line once
    for k, line in enumerate(want):  # sample ids are manifest lines, in shard order
        text, x = got[k]
        assert text == line["text"]
        ref = export.cut(line, cfg["sample_rate"], None)
        assert len(x) == len(ref) and abs(len(x) - line["duration"] * cfg["sample_rate"]) <= 1
        assert np.max(np.abs(x - ref)) <= TOL
    text = Path(cfg["manifest_filepath"]).read_text(encoding="utf-8")
    manifest = [json.loads(x) for x in text.splitlines()]
    shard_ids = [(x["id"], int(s.split("-")[1])) for s in SHARDS for x in by_shard[s] if x in want]
    assert [(m["id"], m["shard_id"]) for m in manifest] == shard_ids
