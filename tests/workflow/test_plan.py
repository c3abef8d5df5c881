"""`python -m speechprep plan`: a pilot on half of the demo corpus predicts the whole run, which
then runs and is compared with the plan (the VAD stage: the test stays short)."""

import json
import subprocess
import sys

import pytest
from conftest import DEMO, REPO, read_jsonl, snakemake, write_config


def plan(work, *args):
    cmd = [sys.executable, "-m", "speechprep", "plan", "--directory", str(work), "--configfile", "config.yaml"]
    cmd += [*args, "--", "--profile", str(REPO / "profiles" / "local"), "--cores", "2"]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, encoding="utf-8", timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    return p.stdout


def test_a_pilot_on_half_the_corpus_predicts_the_run(tmp_path):
    work = tmp_path / "run"
    write_config(work, {"demo": {"audio_dir": str(DEMO / "audio"), "shard_hours": 0.005}}, stages=["vad"])
    halved = "datasets.demo.shard_hours=0.0025"  # an alternative: shards half as large
    args = ("--nodes", "4", "--cores", "8", "--max-queued", "6", "--alternative", halved)
    out = plan(work, "--sample", "0.5", "--out", str(tmp_path / "plan.json"), *args)
    p = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    assert "bottleneck" in out and not (work / "results").exists()  # the pilot ran in its scratch
    files, of = p["sample"]["files"]["demo"]
    assert 0 < files < of
    vad = p["stages"]["vad"]
    for key in ("cpu_s", "peak_rss_mb", "output_bytes"):
        assert vad[key] > 0, key
    assert vad["gpu_s"] == 0.0  # the config's devices: the CPU
    for key in ("cpu_s", "gpu_s", "output_bytes", "jobs"):
        assert key in p["total"]
    hours = p["datasets"]["demo"]["hours"]
    assert p["datasets"]["demo"]["shards"] == -(-hours // 0.005)  # ceil: the shards ingest will cut
    assert p["cluster"] == {"nodes": 4, "cores": 8, "gpus": 0, "mem_gb": p["cluster"]["mem_gb"]}
    assert p["wall_s"] > 0 and p["critical_path"][0] == "ingest"
    # sized for the cluster: the VAD job's fixed part (its 'job ready' line) at most 5 % of a
    # job of the recommended shard, within the queue's 6 jobs; Snakemake's own cost at that size
    rec, sm = p["recommended"], p["snakemake"]
    assert 0 < rec["shard_hours"] <= 50 and rec["jobs"] == 6 and "recommended: shard_hours" in out
    assert rec["fixed_share"]["vad"] <= 0.05 or rec["shards_per_job"], rec
    assert sm["dag_jobs"] > 1 and sm["scheduler_cpu_s"] > 0 and sm["dag_mb"] > 0
    assert p["snakemake_configured"]["dag_jobs"] == p["total"]["jobs"] + 1  # the jobs planned and `all`
    # the alternative: its own pilot on the same sample, twice the VAD jobs, each one's fixed part paid
    alt = p["alternatives"][halved]
    assert (work / ".plan" / "pilot-alternative-1" / "step2.json").exists() and halved in out
    assert alt["stages"]["vad"]["jobs"] > p["stages"]["vad"]["jobs"]
    assert alt["ratio"]["jobs"] > 1 and alt["ratio"]["cpu_s"] > 1 and alt["wall_s"] > 0
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")  # the page beside plan.json
    assert '<table class="stages">' in page and halved in page

    # another cluster, from the same pilot: nothing runs again, the same work packs on fewer cores
    measured = (work / ".plan" / "pilot" / "step2.json").stat().st_mtime_ns
    plan(work, "--sample", "0.5", "--reuse", "--out", str(tmp_path / "small.json"), "--nodes", "1", "--cores", "2")
    small = json.loads((tmp_path / "small.json").read_text(encoding="utf-8"))
    assert (work / ".plan" / "pilot" / "step2.json").stat().st_mtime_ns == measured
    assert small["total"] == p["total"] and small["wall_s"] > p["wall_s"]
    # a corpus far larger than its sample: ingest's memory from its probe (the job on synthetic
    # lines at two sizes toward the corpus's files), not from the pilot's 16 files
    plan(
        work, "--sample", "0.5", "--reuse", "--hours", "10", "--probe-max", "3000", "--out", str(tmp_path / "big.json")
    )
    big = json.loads((tmp_path / "big.json").read_text(encoding="utf-8"))["rules"]["ingest"]
    probe = big["fits"]["demo.rss_mb.probe"]
    assert [n for n, _ in probe["points"]] == [1000, 3000] and probe["items"] > 3000, probe
    assert big["rss_mb"] >= max(mb for _, mb in probe["points"]) > 0
    assert not list((work / ".plan" / "pilot" / "results" / "demo" / ".probe" / "ingest").glob("*.inputs"))
    # shards twice as large, from the same pilot: half as many VAD jobs, each one's fixed part saved
    write_config(work, {"demo": {"audio_dir": str(DEMO / "audio"), "shard_hours": 0.01}}, stages=["vad"])
    plan(work, "--sample", "0.5", "--reuse", "--out", str(tmp_path / "large.json"))
    large = json.loads((tmp_path / "large.json").read_text(encoding="utf-8"))
    assert (work / ".plan" / "pilot" / "step2.json").stat().st_mtime_ns == measured
    assert large["datasets"]["demo"]["shards"] == -(-hours // 0.01)
    assert large["rules"]["vad"]["jobs"] == large["datasets"]["demo"]["shards"] < p["rules"]["vad"]["jobs"]
    assert large["rules"]["vad"]["cpu_s"] <= p["rules"]["vad"]["cpu_s"]
    write_config(work, {"demo": {"audio_dir": str(DEMO / "audio"), "shard_hours": 0.005}}, stages=["vad"])

    snakemake(work)  # the run itself, then its figures beside the plan's
    plan(work, "--compare", str(tmp_path / "plan.json"), "--out", str(tmp_path / "compare.json"))
    c = json.loads((tmp_path / "compare.json").read_text(encoding="utf-8"))["stages"]["vad"]
    assert '<table class="compare">' in (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert c["jobs"]["plan"] == c["jobs"]["run"]  # one VAD job a shard, as many shards as planned
    # the demo's 32 files are 0.03 h: a few segments more or less move the bytes, and a
    # second's jobs' CPU moves with the machine's load
    assert 0.7 < c["output_bytes"]["ratio"] < 1.4, c
    assert 0.4 < c["cpu_s"]["ratio"] < 2.5, c


def test_the_vad_peak_counts_the_longest_file_the_sample_missed(tmp_path):
    # 60 real telephone prompts (most 1-4 s, a few 10-25 s) and the same voice's 73 s prompt: a VAD worker's memory
    # follows the longest file it decodes, and a 10 % sample of the audio mostly misses it
    from speechprep.workflow import pilot
    from tests import real_speech

    prompts = real_speech.telephone_prompts("allison_en")
    long = next(u.path for u in prompts if u.path.stem == "demo-instruct")
    audio = tmp_path / "audio"
    audio.mkdir()
    short = [u.path for u in prompts if u.path.stem != "demo-instruct"][:60]
    for path in [*short, long]:
        (audio / path.name).symlink_to(path)
    items = pilot.corpus({"audio_dir": str(audio)}, [".wav"])
    seed = next(
        s for s in range(50) if "demo-instruct.wav" not in {x.rel for h in pilot.draw(items, 0.1, s) for x in h}
    )
    work = tmp_path / "run"
    write_config(work, {"tel": {"audio_dir": str(audio), "shard_hours": 0.01}}, stages=["vad"])
    out = plan(work, "--sample", "0.1", "--seed", str(seed), "--out", str(tmp_path / "plan.json"))
    p = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    sample_longest, corpus_longest = p["sample"]["longest_s"]["tel"]
    assert sample_longest < 30 < 70 < corpus_longest
    assert "the sample missed the longest file" in out
    # the VAD job on that file alone, in the pilot's run: its peak is the plan's
    alone = work / ".plan" / "pilot" / "results" / "tel_longest" / "vad" / "shard-0000.segments.jsonl"
    assert {json.loads(x)["file_id"] for x in alone.read_text(encoding="utf-8").splitlines()} == {"demo-instruct"}
    peak = p["rules"]["vad"]["fits"]["tel.rss_mb.longest"]
    assert p["rules"]["vad"]["rss_mb"] == p["stages"]["vad"]["peak_rss_mb"] == peak
    # and it is what the sample's own VAD jobs would not have shown (about 235 MB against 155)
    run = work / ".plan" / "pilot"
    jobs = [j for k, j in pilot.jobs_of_logs(run / ".snakemake" / "log").items() if k[:2] == ("vad", "tel")]
    assert jobs and peak > 1.2 * max(pilot.job_cost(run, j)["rss_mb"] for j in jobs)
    assert p["rules"]["vad"]["jobs"] == p["datasets"]["tel"]["shards"]  # the probe is no job of the corpus's


def test_a_kaldi_directory_and_lhotse_manifests_are_sampled_in_their_own_format_by_file(tmp_path):
    # real speech in each layout (tests/ingest): a Kaldi directory of a two-channel SPHERE file (ten
    # segments behind `sph2pipe -c` lines) and eight FLAC files, and Lhotse's own manifests (three
    # files and a two-channel call of two supervisions)
    from test_sources_lhotse_hf_workflow import in_ingest_env

    from speechprep.core.config import effective
    from speechprep.workflow import pilot
    from tests.ingest.source_layouts import kaldi_dir

    kal = kaldi_dir(tmp_path / "kaldi", alsa=8).utterances
    lh, m = in_ingest_env("lhotse", tmp_path / "lhotse"), tmp_path / "lhotse"
    pair = {"recordings": str(m / "recordings.jsonl.gz"), "supervisions": str(m / "supervisions.jsonl.gz")}
    datasets = {
        "kal": {"kaldi": str(tmp_path / "kaldi"), "text": "given", "shard_hours": 0.005},
        "lh": {"lhotse": pair, "text": "given", "shard_hours": 0.005},
    }
    work = tmp_path / "run"
    write_config(work, datasets, stages=["vad"])
    cfg = {"datasets": datasets, "ingest": {"threads": 1}}
    files = pilot.source_items("kal", effective(cfg, [], REPO / "config" / "config.yaml"), tmp_path / "items")
    sph = next(x for x in files if x.key.endswith(".sph"))
    assert len(files) == 9 and len(sph.ids) == 10  # both channels' segments: one file, drawn whole
    seed = next(s for s in range(50) if sph not in [x for h in pilot.draw(files, 0.03, s) for x in h])
    out = plan(work, "--sample", "0.03", "--seed", str(seed), "--probe-max", "0", "--out", str(tmp_path / "plan.json"))
    p = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    run = work / ".plan" / "pilot"
    for ds, truth in (("kal", kal), ("lh", lh)):
        manifest = {x["source_id"]: x for x in read_jsonl(run / "results" / ds / "manifest.jsonl")}
        listed = list(read_jsonl(work / ".plan" / "items" / f"{ds}.jsonl"))
        drawn = {x["audio_filepath"] for x in manifest.values()}
        assert set(manifest) == {x["id"] for x in listed if x["file"] in drawn}  # every utterance of a drawn file
        assert (run / "pilot_ids" / f"{ds}.txt").read_text(encoding="utf-8").split() == sorted(manifest)
        assert read_jsonl(run / "results" / ds / "rejects" / "ingest.jsonl") == []
        for sid, x in manifest.items():  # the source read as the run reads it: its offsets, channels
            assert x.get("offset", 0.0) == pytest.approx(truth[sid].get("offset", 0.0), abs=1e-3)
            assert x["duration"] == pytest.approx(truth[sid]["duration"], abs=1e-3)
            assert x.get("channel") == truth[sid].get("channel")
        # the sample scaled to the corpus: its hours are the source's
        corpus_s = sum(u["duration"] for u in truth.values())
        assert p["datasets"][ds]["hours"] * 3600 == pytest.approx(corpus_s, rel=1e-3)
        assert p["sample"]["source_ids"][ds] == [len(manifest), len(truth)]
        assert p["stages"]["vad"]["cpu_s"] > 0
    assert 0 < p["sample"]["files"]["kal"][0] < 9 == p["sample"]["files"]["kal"][1]
    # the longest file the sample missed: VAD on it alone, read as a source too (its ten segments)
    assert "the sample missed the longest file" in out
    alone = {x["source_id"] for x in read_jsonl(run / "results" / "kal_longest" / "manifest.jsonl")}
    assert alone == set(sph.ids)
