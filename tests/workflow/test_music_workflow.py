"""The music stage in the workflow (`music` in `stages:`): on the demo corpus, through
snakemake, between the diarization and ASR, with separation by an MDX-shaped model built
from code forced onto every file (separate.min_music_prob 0): every segment the diarization
wrote ends in the music stage's lines or rejects, the lines name the shard's vocals FLAC,
and ASR then reads the music stage's segments. Only the targets checked are built."""

import sys

import pytest
import soundfile as sf
from conftest import DEMO_SHARDS, REPO, demo_models, jobs_run, read_jsonl, snakemake, write_config

pytestmark = pytest.mark.slow  # a real snakemake run

sys.path.insert(0, str(REPO))


def test_music_runs_between_diarization_and_asr_and_its_vocals_are_what_asr_reads(tmp_path, demo_copy):
    import subprocess

    model = tmp_path / "mdx.onnx"
    # the model is built in the music env (onnx is there, not in the workflow's)
    build = "from pathlib import Path; from tests.music.models import MDX_SMALL as M, mdx_onnx; "
    build += f"mdx_onnx(Path({str(model)!r}), M['mdx_dim_f_set'], 2 ** M['mdx_dim_t_set'])"
    subprocess.run([str(REPO / ".venvs" / "music" / "bin" / "python"), "-c", build], cwd=REPO, check=True)
    from tests.music.models import MDX_SMALL

    work = tmp_path / "run"
    separate = {**MDX_SMALL, "model": str(model), "min_music_prob": 0.0}
    write_config(work, {"demo": {"audio_dir": str(demo_copy), "shards": DEMO_SHARDS}},
                 stages=["vad", "music", "asr"], separate=separate)  # fmt: skip
    res = work / "results" / "demo"
    targets = [f"results/demo/music/shard-{k:04d}.segments.jsonl" for k in range(DEMO_SHARDS)]
    _, out = snakemake(work, *targets)
    assert len(jobs_run(out, "music")) == DEMO_SHARDS
    for k in range(DEMO_SHARDS):
        s = f"shard-{k:04d}"
        given = [x["id"] for x in read_jsonl(res / "diarize" / f"{s}.segments.jsonl")]
        lines = list(read_jsonl(res / "music" / f"{s}.segments.jsonl"))
        rejects = list(read_jsonl(res / "music" / f"{s}.rejects.jsonl"))
        assert sorted([x["id"] for x in lines] + [r["id"] for r in rejects]) == sorted(given)
        assert all(r["reason"] == "background_music" for r in rejects)
        flac = res / "music" / f"{s}.vocals" / f"{s}.flac"
        assert sf.info(str(flac)).frames > 0
        for x in lines:
            assert x["separated"] is True and x["audio_filepath"] == str(flac.resolve()), x
            assert 0 <= x["music_prob"] <= 1 and 0 <= x["music_prob_before"] <= 1
        assert "stage 'music' env ok" in (res / "logs" / "music" / f"{s}.log").read_text(encoding="utf-8")
    # ASR's jobs read the music stage's segments (a dry run: the demo ASR model is not built here)
    _, dry = snakemake(work, "-n", "-p", "results/demo/asr/shard-0000.jsonl")
    block = dry[dry.index("rule asr:") :].split("\n\n")[0]
    assert "results/demo/music/shard-0000.segments.jsonl" in block and "diarize/shard-0000" not in block


def test_long_recordings_with_music_underneath_keep_only_their_clean_speech(tmp_path, demo):
    """Held-apart real voices over held-apart real music in long recordings
    (tests/music/mixes.py, ``long_recordings``: clean, 20, 10, 5 and 0 dB, music alone),
    through the default stages to the TTS manifests (bench/music/workflow_kept.py is the
    same at its full size): of what VAD takes for speech, under 0.10 of the music at 10 dB
    and louder, and of music alone, reaches the kept set; clean speech loses at most 0.05 of
    its seconds to the music rules; every segment ends kept or in a stage's rejects."""
    import json
    import subprocess

    from tests.music import mixes as M

    work, _ = demo
    audio = tmp_path / "audio"
    build = "import json, sys; from pathlib import Path; from tests.music import mixes as M; "
    build += f"_, spans = M.long_recordings('held_out', Path({str(audio)!r}), speakers=3, per_block=2); "
    build += "print(json.dumps([s.__dict__ for s in spans]))"
    p = subprocess.run([str(REPO / ".venvs" / "music" / "bin" / "python"), "-c", build], cwd=REPO, check=True,
                       capture_output=True, text=True)  # fmt: skip
    spans = [M.Span(**s) for s in json.loads(p.stdout.splitlines()[-1])]
    off = {"min_confidence": None, "min_chars_per_s": None, "max_chars_per_s": None}  # the demo ASR knows English
    write_config(tmp_path / "run", {"long": {"audio_dir": str(audio), "single_speaker": True, "shards": 1}},
                 curate=off, **demo_models(work))  # fmt: skip
    snakemake(tmp_path / "run")
    fates = M.fates(spans, tmp_path / "run" / "results", "long")
    share = {level: {k: v / sum(row.values()) for k, v in row.items()} for level, row in fates.items()}
    assert all("lost" not in row for row in fates.values()), fates
    for level in (10.0, 5.0, 0.0, "music"):
        assert share[level].get("kept", 0.0) < 0.10, (level, share[level])
    music_drops = sum(v for k, v in share[None].items() if k.endswith(":background_music"))
    assert music_drops <= 0.05 and share[None]["kept"] >= 0.7, share[None]
    assert share[20.0].get("kept", 0.0) < share[None]["kept"]
    kept = list(read_jsonl(tmp_path / "run" / "results" / "long" / "curate" / "shard-0000.jsonl"))
    assert kept and all(0.0 <= x["music_prob"] <= 1.0 for x in kept)  # curation's lines carry it
