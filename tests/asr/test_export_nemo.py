"""The export stage's nemo_tarred format, read back by NeMo's own tarred audio
dataset (here, in the ASR env, which has NeMo): every kept segment, its text and
its audio (a fresh cut of the source within FLAC's 16-bit step)."""

from __future__ import annotations

import json

import numpy as np

from speechprep.core.jsonio import read_jsonl, write_jsonl
from speechprep.export import stage as export
from tests.support import config, demo_segments

SR = config()["export"]["sample_rate"]


def test_nemo_tarred_reads_back(tmp_path):
    from nemo.collections.asr.data.audio_to_text import TarredAudioToCharDataset

    segs = demo_segments(4, text=True)
    lines = [
        dict(s, id=("spk.one/ünïcode_0000" if k == 0 else s["id"]), speaker="s", language="en")
        for k, s in enumerate(segs)
    ]
    write_jsonl(tmp_path / "tts" / "train_manifest.jsonl", lines)
    write_jsonl(tmp_path / "tts" / "val_manifest.jsonl", [])
    write_jsonl(tmp_path / "tts" / "shard-0002.features.jsonl", [{"id": x["id"]} for x in lines])
    p = export.ExportParams(("nemo_tarred",), SR, None)
    export.run_shard(
        [str(tmp_path / "tts" / "train_manifest.jsonl"), str(tmp_path / "tts" / "val_manifest.jsonl")],
        str(tmp_path / "tts" / "shard-0002.features.jsonl"),
        str(tmp_path / "export"),
        str(tmp_path / "export" / "shard-0002.rejects.jsonl"),
        p,
        str(tmp_path / "export" / ".partial" / "shard-0002.jsonl"),
    )
    out = tmp_path / "export" / "nemo_tarred"
    manifest = list(read_jsonl(out / "manifest_2.json"))
    assert [m["shard_id"] for m in manifest] == [2] * len(lines)
    labels = sorted({c for x in lines for c in x["text"]})
    ds = TarredAudioToCharDataset(
        audio_tar_filepaths=str(out / "audio_2.tar"),
        manifest_filepath=str(out / "manifest_2.json"),
        labels=labels,
        sample_rate=SR,
        shuffle_n=0,
        return_sample_id=True,
    )
    got = {int(item[4]): item for item in ds}
    assert len(got) == len(lines)
    by_text = {}
    for audio, audio_len, tokens, tokens_len, _ in got.values():
        text = "".join(labels[t] for t in tokens[: int(tokens_len)].tolist())
        by_text[text] = audio[: int(audio_len)].numpy()
    for line in lines:
        ref = export.cut(line, SR, None)
        x = by_text[line["text"]]
        assert abs(len(x) - line["duration"] * SR) <= 1 and len(x) == len(ref)
        assert np.max(np.abs(x - ref)) <= 1.5 / 32767
    assert (
        json.loads((out / "shard-0002.index.jsonl").read_text(encoding="utf-8").splitlines()[0])["id"] == lines[0]["id"]
    )
