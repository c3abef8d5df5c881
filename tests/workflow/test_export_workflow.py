"""A full run of one voice with the export stage: every format read back by its own library's
loader as documented (Lhotse from_shar + a bucketing sampler, datasets.load_dataset on the
directory, WebDataset; NeMo's tarred dataset over all shards in the ASR env) against the TTS
manifests, an export option change (two formats of four) rerunning only export and reading back;
then, in the same working directory, ``asr.trim`` on (S2S and TTS get the trimmed segments,
VAD is untouched); then ``tts.layout: packed`` (the same content, one file per shard and kind,
ASR untouched); then a file excluded (a takedown): gone from every format, only its shard run
again."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import NOT_DIARIZED, REPO, demo_models, jobs_run, read_jsonl, snakemake, write_config

from speechprep.core.artifacts import read_wav
from speechprep.io.npyio import load_ref

pytestmark = pytest.mark.slow  # real snakemake runs

FORMATS = ["webdataset", "parquet", "lhotse_shar", "nemo_tarred"]
STAGES = ["vad", "asr", "s2s", "curate", "tts", "export"]

# run in .venvs/export: what a trainer reading each container with its library's own
# loader sees (id -> duration in s), each array checked against the TTS manifests' own
READ_BACK = r"""
import glob, io, json, sys
import numpy as np
import soundfile as sf
from speechprep.io.npyio import load_ref

root, formats, manifests, cache = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
lines = {x["id"]: x for m in manifests for x in map(json.loads, open(m, encoding="utf-8"))}
ARRAYS = ("text_ids", "codes", "condition", "emo_vec", "phoneme_ids")  # phoneme_ids: tts.phonemes is on

def same(id_, kind, a):
    assert np.array_equal(np.asarray(a).reshape(-1), load_ref(lines[id_][kind]).reshape(-1)), (id_, kind)

seen = {}
if "webdataset" in formats:
    import webdataset as wds
    tars = sorted(glob.glob(f"{root}/webdataset/*.tar"))
    seen["webdataset"] = {
        json.loads(s["json"])["id"]: sf.info(io.BytesIO(s["flac"])).duration
        for s in wds.WebDataset(tars, shardshuffle=False)
    }
if "parquet" in formats:
    from datasets import Audio, load_dataset
    ds = load_dataset(f"{root}/parquet", split="train", cache_dir=cache)  # the directory, as documented
    assert ds.features["audio"] == Audio(sampling_rate=16000), ds.features
    rows = ds.cast_column("audio", Audio(decode=False))  # decoding is torchcodec's (a CUDA torch build)
    seen["parquet"] = {}
    for r in rows:
        seen["parquet"][r["id"]] = sf.info(io.BytesIO(r["audio"]["bytes"])).duration
        for kind in ARRAYS:
            same(r["id"], kind, r[kind])
if "lhotse_shar" in formats:
    from lhotse import CutSet
    from lhotse.dataset import DynamicBucketingSampler
    seen["lhotse_shar"] = {}
    for c in CutSet.from_shar(in_dir=f"{root}/lhotse_shar/data"):
        seen["lhotse_shar"][c.id] = c.load_audio().shape[-1] / c.sampling_rate
        for kind in ARRAYS:
            same(c.id, kind, c.load_custom(kind))
    cuts = CutSet.from_shar(in_dir=f"{root}/lhotse_shar/data", shuffle_shards=True, seed=1)
    sampler = DynamicBucketingSampler(cuts, max_duration=20.0, num_buckets=2, shuffle=True, seed=0)
    ids = [c.id for batch in sampler for c in batch]
    assert sorted(ids) == sorted(seen["lhotse_shar"]), ids
print(json.dumps(seen))
"""

# run in .venvs/asr: NeMo's tarred dataset over every shard, from the config keys in stats.json
READ_NEMO = r"""
import json, sys
from nemo.collections.asr.data.audio_to_text_dataset import get_tarred_dataset

cfg = json.load(open(sys.argv[1], encoding="utf-8"))["nemo_config"]
lines = [json.loads(x) for x in open(cfg["manifest_filepath"], encoding="utf-8")]
labels = sorted({c for x in lines for c in x["text"]})
ds = get_tarred_dataset({**cfg, "labels": labels, "return_sample_id": True}, 0, 0, 1)
seen = {lines[int(i)]["id"]: int(n) / cfg["sample_rate"] for _, n, _, _, i in ds}
print(json.dumps({"nemo_tarred": seen}))
"""


def outputs(res, pattern):
    """Every line of the files matching ``pattern``, by id."""
    return {x["id"]: x for p in sorted(res.glob(pattern)) for x in read_jsonl(p)}


ARRAYS = ("text_ids", "codes", "condition", "emo_vec", "phoneme_ids")  # phoneme_ids: tts.phonemes is on


def snapshot(res):
    """What the layout and trim tests compare: the ASR, S2S and TTS lines by id, and every
    array and unit WAV they point to."""
    tts = outputs(res, "tts/*_manifest.jsonl")
    units = outputs(res, "s2s/shard-*.units.jsonl")
    return {
        "asr": outputs(res, "asr/shard-*[0-9].jsonl"),
        "units": units,
        "tts": tts,
        "arrays": {(i, k): load_ref(x[k]) for i, x in tts.items() for k in ARRAYS},
        "wavs": {i: read_wav(u["wav"]) for i, u in units.items()},
    }


def read_exports(tmp_path, res, formats):
    """Every format in ``formats`` read back by its library's loader (id -> duration in s),
    each array checked against the TTS manifests."""
    manifests = [str(res / "tts" / f"{m}_manifest.jsonl") for m in ("train", "val")]

    def run(env, *args):
        py = REPO / ".venvs" / env / "bin" / "python"
        p = subprocess.run([str(py), "-c", *args], capture_output=True, text=True, encoding="utf-8")
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    cache = str(tmp_path / f"hf-cache-{len(list(tmp_path.glob('hf-cache-*')))}")
    seen = run("export", READ_BACK, str(res / "export"), json.dumps(formats), json.dumps(manifests), cache)
    if "nemo_tarred" in formats:
        seen.update(run("asr", READ_NEMO, str(res / "export" / "nemo_tarred" / "stats.json")))
    assert sorted(seen) == sorted(formats)
    return seen


# what the trim test left, for the layout test after it (the module's tests share one run, in order)
TRIMMED: dict = {}


@pytest.fixture(scope="module")
def voice(tmp_path_factory, demo, demo_copy):
    """(workdir, config sections, dataset, snapshot of the first run) of a run of us_male with
    every stage and export."""
    work, _ = demo
    tmp_path = tmp_path_factory.mktemp("voice")
    base = {"stages": STAGES, **demo_models(work), **NOT_DIARIZED}  # the demo run's models (built from code)
    ds = {"v": {"audio_dir": str(demo_copy / "us_male"), "shards": 2}}
    write_config(tmp_path, ds, **base)
    snakemake(tmp_path)
    return tmp_path, base, ds, snapshot(tmp_path / "results" / "v")


def test_export_in_a_full_run_and_an_option_change_reruns_only_export(voice):
    tmp_path, base, ds, _ = voice
    res = tmp_path / "results" / "v"
    final = [x for m in ("train", "val") for x in read_jsonl(res / "tts" / f"{m}_manifest.jsonl")]
    want = {x["id"]: x["duration"] for x in final}
    assert len(want) >= 4, final

    read_back = lambda formats: read_exports(tmp_path, res, formats)
    seen = read_back(FORMATS)
    for fmt in FORMATS:
        assert set(seen[fmt]) == set(want), fmt
        for id_, d in seen[fmt].items():  # the segment's duration, to a sample at 16 kHz
            assert abs(d - want[id_]) <= 1 / 16000 + 1e-6, (fmt, id_, d, want[id_])
        index = read_jsonl(res / "export" / fmt / "index.jsonl")
        assert sorted(x["id"] for x in index) == sorted(want), fmt
        assert all(len(x["sha256"]) == 64 for x in index), fmt
        stats = json.loads((res / "export" / fmt / "stats.json").read_text(encoding="utf-8"))
        assert stats["segments"] == len(want), (fmt, stats)
    assert all(not read_jsonl(p) for p in (res / "export").glob("shard-*.rejects.jsonl"))
    card = (res / "export" / "parquet" / "README.md").read_text(encoding="utf-8")
    assert all(f"| `{k}` |" in card for k in ("description", "pitch_mean", "reverb", "speaking_rate")), card

    # export options change, two formats of four: only export reruns, and what it wrote reads back
    some = ["parquet", "lhotse_shar"]
    write_config(tmp_path, ds, **base, export={"lufs": -23.0, "formats": some})
    base["export"] = {"lufs": -23.0, "formats": some}  # (kept for the trim test, which runs after this one)
    _, out = snakemake(tmp_path)
    rules = ("export_shard", "export_summary", "export_summary_parquet", "tts_features", "tts_manifest")
    ran = {r: jobs_run(out, r) for r in rules}
    assert sorted(ran["export_shard"]) == ["ds=v, shard=shard-0000", "ds=v, shard=shard-0001"], out[-3000:]
    assert ran["export_summary"] == ["ds=v, fmt=lhotse_shar"] and ran["export_summary_parquet"], out[-3000:]
    assert not ran["tts_features"] and not ran["tts_manifest"], out[-3000:]
    seen = read_back(some)
    assert all(set(seen[fmt]) == set(want) for fmt in some)


def test_trim_changes_what_s2s_and_tts_read_and_nothing_upstream(voice):
    """``asr.trim`` on, the TTS manifests as targets (the export is not what changes); it
    stays on for the tests after this one."""
    tmp_path, base, ds, first = voice
    res = tmp_path / "results" / "v"
    vad_before = {p.name: p.read_bytes() for p in sorted((res / "vad").glob("shard-*.segments.jsonl"))}
    asr_before, units_before = first["asr"], first["units"]

    base["asr"] = {**base["asr"], "trim": True}
    write_config(tmp_path, ds, **base)
    _, out = snakemake(tmp_path, *(f"results/v/tts/{m}_manifest.jsonl" for m in ("train", "val")))
    assert not jobs_run(out, "vad") and jobs_run(out, "s2s") and jobs_run(out, "tts_manifest"), out[-3000:]
    assert {p.name: p.read_bytes() for p in sorted((res / "vad").glob("shard-*.segments.jsonl"))} == vad_before
    asr_trim = outputs(res, "asr/shard-*[0-9].jsonl")
    assert set(asr_trim) == set(asr_before)
    shorter = 0
    for id_, line in asr_trim.items():
        was = asr_before[id_]
        assert line["text"] == was["text"]  # the same audio transcribed; only the bounds move
        assert (line["vad_offset"], line["vad_duration"]) == (was["offset"], was["duration"])
        assert line["offset"] >= was["offset"] - 1e-9
        assert line["offset"] + line["duration"] <= was["offset"] + was["duration"] + 1e-3
        shorter += line["duration"] < was["duration"] - 0.05
    assert shorter, "no segment was trimmed"
    units = outputs(res, "s2s/shard-*.units.jsonl")
    for id_, u in units.items():  # S2S read the trimmed bounds: one unit per frame of them
        frames = asr_trim[id_]["duration"] * u["frame_rate"]
        assert abs(len(u["units"]) - frames) <= 2, (id_, len(u["units"]), frames)
    assert any(len(units[i]["units"]) < len(units_before[i]["units"]) for i in units)
    for id_, line in outputs(res, "tts/*_manifest.jsonl").items():  # TTS lines carry the trimmed bounds
        assert (line["offset"], line["duration"]) == (asr_trim[id_]["offset"], asr_trim[id_]["duration"])
    TRIMMED.update(snapshot(res))


def test_packed_layout_same_content_and_file_count_grows_with_shards_not_segments(voice):
    """``tts.layout: packed`` (after the trim test, ``asr.trim`` still on): ASR does not run
    again, and the S2S and TTS content the trim test left comes back in one file per shard
    and kind."""
    tmp_path, base, ds, _ = voice
    first = TRIMMED
    assert first, "the trim test runs first"
    res = tmp_path / "results" / "v"
    dirs = [
        d for pattern in ("s2s/shard-*[0-9]", *(f"tts/shard-*[0-9]/{k}" for k in ARRAYS)) for d in res.glob(pattern)
    ]
    assert len(dirs) == 2 * (1 + len(ARRAYS))
    store = lambda p: p.parent.name.endswith(".reuse") or p.parent.parent.name.endswith(".reuse")
    files = lambda: sorted(p for p in res.rglob("*") if p.is_file() and not store(p))
    before = files()
    mark = ".snakemake_timestamp"  # Snakemake's own, in each directory output: one per shard and kind
    per_segment = [p for d in dirs for p in d.iterdir() if p.name != mark]
    assert len(per_segment) >= len(first["units"]) + len(ARRAYS) * len(first["tts"])

    write_config(tmp_path, ds, **{**base, "tts": {**base.get("tts", {}), "layout": "packed"}})
    _, out = snakemake(tmp_path)
    assert not jobs_run(out, "vad") and not jobs_run(out, "asr"), out[-3000:]
    assert len(jobs_run(out, "s2s")) == len(jobs_run(out, "tts_features")) == len(jobs_run(out, "tts_text")) == 2

    # the content before: every field but where the arrays are, every array and WAV equal
    assert outputs(res, "asr/shard-*[0-9].jsonl") == first["asr"]
    tts_after = outputs(res, "tts/*_manifest.jsonl")
    strip = lambda lines, keys: {i: {k: v for k, v in x.items() if k not in keys} for i, x in lines.items()}
    assert strip(tts_after, ARRAYS) == strip(first["tts"], ARRAYS)
    for (i, k), a in first["arrays"].items():
        assert "#" in tts_after[i][k] and np.array_equal(load_ref(tts_after[i][k]), a), (i, k)
    units_after = outputs(res, "s2s/shard-*.units.jsonl")
    assert strip(units_after, ("wav",)) == strip(first["units"], ("wav",))
    for i, w in first["wavs"].items():
        assert np.array_equal(read_wav(units_after[i]["wav"]), w), i

    # the files: each per-segment directory now holds one packed file; nothing else changed in number
    assert {d: sorted(p.name for p in d.iterdir() if p.name != mark) for d in dirs} == {
        d: ["packed.wav" if d.parent.name == "s2s" else "packed.npy"] for d in dirs
    }
    after = files()
    assert set(before) - set(per_segment) == set(after) - {d / n for d in dirs for n in ("packed.wav", "packed.npy")}
    assert len(after) == len(before) - len(per_segment) + len(dirs)
    names = {p.stem for p in after}
    assert not names & (set(tts_after) | set(units_after)), "a file still named after a segment"
    kept = {p.name for p in res.rglob("*") if p.is_file() and store(p)}  # the stores too: a file per kind
    assert kept == {"outcomes.jsonl", "packed.npy", "packed.wav"}, kept


def test_an_excluded_file_leaves_every_export_and_only_its_shard_runs(voice):
    """After the layout test: a file listed under ``exclude:`` (a takedown) is rejected at
    ingest, its segments leave the TTS manifests and every export format (each read back
    by its loader), the ledger names it, and only the shard that held it runs again."""
    tmp_path, base, ds, _ = voice
    res = tmp_path / "results" / "v"
    lines = [x for m in ("train", "val") for x in read_jsonl(res / "tts" / f"{m}_manifest.jsonl")]
    gone = lines[0]["audio_filepath"]
    gone_ids = {x["id"] for x in lines if x["audio_filepath"] == gone}
    (tmp_path / "takedown.txt").write_text(f"# a withdrawn licence\n{gone}\n", encoding="utf-8")
    shards = {p.stem: {x["audio_filepath"] for x in read_jsonl(p)} for p in (res / "shards").glob("*.jsonl")}
    held = [s for s, files in shards.items() if gone in files]
    cfg = {
        **base,
        "tts": {**base.get("tts", {}), "layout": "packed"},  # as the layout test left it
        "export": {**base.get("export", {}), "formats": FORMATS},
        "exclude": str(tmp_path / "takedown.txt"),
    }
    write_config(tmp_path, ds, **cfg)
    _, out = snakemake(tmp_path)
    assert jobs_run(out, "vad") == [f"ds=v, shard={held[0]}"], out[-3000:]
    assert len(jobs_run(out, "export_shard")) == len(shards)  # the formats changed too (the test before)
    # the shard's jobs ran again on its other files, each taken from the job's reuse store: no model ran
    logs = {p.parent.name: p.read_text(encoding="utf-8") for p in (res / "logs").glob(f"*/{held[0]}.log")}
    reusing = {"vad", "asr", "s2s", "curate", "curate_annotate", "tts"}  # the jobs with a reuse store here
    assert reusing <= set(logs), sorted(logs)
    for rule in reusing:
        assert re.search(r" (\d+) of \1 \w+ reused from the store", logs[rule]), (rule, logs[rule][-2000:])
        assert "loaded on" not in logs[rule] and "), 0 to process" in logs[rule], rule
    want = {x["id"]: x["duration"] for x in lines if x["id"] not in gone_ids}
    now = [x for m in ("train", "val") for x in read_jsonl(res / "tts" / f"{m}_manifest.jsonl")]
    assert {x["id"] for x in now} == set(want)
    for fmt, found in read_exports(tmp_path, res, FORMATS).items():
        assert set(found) == set(want), fmt
    removed = read_jsonl(res / "removed.jsonl")
    assert [(x["reason"], x["by"]) for x in removed] == [("excluded", "ingest")], removed


def test_a_run_killed_in_the_speakers_job_resumes(voice):
    """After the takedown test: the state of a run killed once the run-wide speakers job had
    started (Snakemake removes a job's outputs first) while a shard was still to be decided.
    The resumed run asks for the export's lines only once the speakers have run, so the
    shard's decision is made with the speakers' file (a job built while another checkpoint
    was pending once ran without it) and every export holds what it held."""
    tmp_path, *_ = voice
    res = tmp_path / "results" / "v"
    index = lambda: {fmt: read_jsonl(res / "export" / fmt / "index.jsonl") for fmt in FORMATS}
    before = index()
    speakers = [res / "curate" / "speaker_assignments", res / "curate" / "speaker_clusters.json"]
    speakers += [tmp_path / "results" / "_all" / "curate" / n for n in ("speakers", "speaker_clusters.json")]
    speakers.append(tmp_path / "results" / "_all" / "curate" / "speaker_centroids.npy")
    undone = [res / "curate" / f"shard-0000.{k}" for k in ("jsonl", "rejects.jsonl")]
    undone += [res / "tts" / f"shard-0000.{k}" for k in ("text.jsonl", "text_rejects.jsonl")]
    undone += [res / "tts" / f"{m}_manifest.jsonl" for m in ("train", "val")] + [res / "export" / ".lines"]
    for p in speakers + undone:
        assert p.exists(), p
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    _, out = snakemake(tmp_path)
    assert jobs_run(out, "curate_speakers"), out[-3000:]
    assert jobs_run(out, "curate_decide") == ["ds=v, shard=shard-0000"], out[-3000:]
    assert index() == before
