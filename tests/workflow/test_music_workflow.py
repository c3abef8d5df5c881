"""The music stage in the workflow (`music` in `stages:`): on the demo corpus, through
snakemake, between the diarization and ASR, with separation by an MDX-shaped model built
from code forced onto every file (separate.min_music_prob 0): every segment the diarization
wrote ends in the music stage's lines or rejects, the lines name the shard's vocals FLAC,
and ASR then reads the music stage's segments. Only the targets checked are built."""

import sys

import pytest
import soundfile as sf
from conftest import DEMO_SHARDS, REPO, jobs_run, read_jsonl, snakemake, write_config

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
