"""The plan's pilot (speechprep.workflow.pilot): its sample, and what it reads of a run."""

import json

import pytest

from speechprep.core import logs
from speechprep.workflow import pilot
from speechprep.workflow.pilot import Item, corpus_shards, draw, job_cost, jobs_of_logs, longest_files


def items(n=400):
    # a corpus of short prompts and long recordings: 1 s to 400 s
    return [Item(f"f{k:03d}", float(1 + k), rel=f"f{k:03d}.wav") for k in range(n)]


def test_the_sample_takes_the_share_of_every_stratum_of_length():
    corpus = items()
    first, second = draw(corpus, 0.1, seed=0)
    chosen = first + second
    share = sum(x.seconds for x in chosen) / sum(x.seconds for x in corpus)
    assert 0.1 <= share < 0.115
    assert len({x.key for x in chosen}) == len(chosen)
    # each quarter of the files by length gives its own tenth: short files are in the sample too
    for q in range(4):
        stratum = {x.key for x in corpus[q * 100 : (q + 1) * 100]}
        mine = [x for x in chosen if x.key in stratum]
        assert 0.1 <= sum(x.seconds for x in mine) / sum(x.seconds for x in corpus if x.key in stratum) < 0.13
    # two halves of about equal size, the same on every call
    assert abs(len(first) - len(second)) <= 4
    assert draw(corpus, 0.1, seed=0) == (first, second)
    assert draw(corpus, 0.1, seed=1) != (first, second)


def test_the_sample_and_the_corpus_give_their_longest_file():
    # one long recording among short prompts: the file that sets a VAD job's peak memory
    corpus = [
        *(Item(f"p{k:03d}", 1.0 + k % 4, rel=f"p{k:03d}.wav") for k in range(300)),
        Item("long", 73.0, rel="l.wav"),
    ]
    first, second = draw(corpus, 0.1, seed=0)
    assert "long" not in {x.key for x in first + second}
    assert longest_files({"calls": corpus}, {"calls": first + second}) == {"calls": [4.0, 73.0]}
    assert longest_files({"calls": corpus}, {"calls": corpus}) == {"calls": [73.0, 73.0]}


def test_a_tiny_corpus_still_gives_a_file():
    first, second = draw(items(1), 0.01, seed=0)
    assert len(first) == 1 and second == []


def test_a_corpus_in_its_own_layout_keeps_its_key_and_reads_the_sampled_files_ids(tmp_path):
    """The pilot's entry of a source is the source itself (its offsets, channels, ids and the audio
    ingest writes out, as in the run) with ``pilot_ids``: the ids of the files drawn, nothing else."""
    ds = {"kaldi": "data/train", "text": "given", "shards": 10}
    sph = Item("/c/a.sph", 30.0, ids=["a-2", "a-1"])  # a file: every utterance in it drawn with it
    flac = Item("/c/b.flac", 2.0, ids=["b-1"])
    entry = pilot.pilot_dataset("kal", ds, [sph, flac], tmp_path, 0.5)
    assert {k: v for k, v in entry.items() if k != "pilot_ids"} == {"kaldi": "data/train", "text": "given", "shards": 5}
    assert (tmp_path / "pilot_ids" / "kal.txt").read_text(encoding="utf-8") == "a-1\na-2\nb-1\n"
    assert entry["pilot_ids"] == str(tmp_path / "pilot_ids" / "kal.txt")
    assert sorted(pilot.file_seconds([sph, flac])) == [2.0, 30.0]  # a cost per file reads them by file


def test_pilot_ids_are_a_sources_key():
    from speechprep.core.config import ConfigError, check

    check({"datasets": {"k": {"kaldi": "d", "pilot_ids": "ids.txt"}}})
    with pytest.raises(ConfigError, match=r"`pilot_ids` .* and `audio_dir`"):
        check({"datasets": {"a": {"audio_dir": "d", "pilot_ids": "ids.txt"}}})


def test_shards_of_the_whole_corpus_follow_the_config():
    cfg = {"ingest": {"shard_hours": 1.0}}
    assert corpus_shards({}, cfg, 10.2) == 11
    assert corpus_shards({"shard_hours": 5.0}, cfg, 10.2) == 3
    assert corpus_shards({"shards": 64}, cfg, 10.2) == 64
    assert corpus_shards({}, cfg, 0.0) == 1


SNAKEMAKE_LOG = """\
[Thu Nov 26 23:19:16 2026]
localrule curate_measure:
    input: results/demo/asr/shard-0000.jsonl
    output: results/demo/curate/shard-0000.measures.jsonl
    log: results/demo/logs/curate/shard-0000.log
    jobid: 26
    benchmark: results/demo/benchmarks/curate/shard-0000.tsv
    wildcards: ds=demo, shard=shard-0000
    threads: 2
    resources: tmpdir=/tmp, runtime=30, mem_mb=2560, mem=2.56 GB, mem_mib=2442
Activating environment modules: speechprep/curate

[Thu Nov 26 23:20:16 2026]
rule curate_speakers:
    log: results/_all/logs/curate_speakers.log
    jobid: 30
    threads: 1
    resources: tmpdir=/tmp, runtime=60, mem_mb=4000

rule export_summary:
    wildcards: ds=demo, fmt=webdataset

rule export_summary:
    wildcards: ds=demo, fmt=parquet
"""


def test_jobs_are_read_from_snakemakes_log_and_their_own(tmp_path):
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    (tmp_path / ".snakemake" / "log" / "2026-11-26T231900.snakemake.log").write_text(SNAKEMAKE_LOG, encoding="utf-8")
    jobs = jobs_of_logs(tmp_path / ".snakemake" / "log")
    assert set(jobs) == {
        ("curate_measure", "demo", "shard-0000", ""),
        ("curate_speakers", None, None, ""),
        ("export_summary", "demo", None, "fmt=parquet"),
        ("export_summary", "demo", None, "fmt=webdataset"),
    }
    job = jobs[("curate_measure", "demo", "shard-0000", "")]
    assert (job["threads"], job["mem_mb"], job["log"]) == (2, 2560.0, "results/demo/logs/curate/shard-0000.log")
    assert job_cost(tmp_path, job) is None  # neither its log nor its benchmark exist
    # the job's own last line (speechprep.core.logs.used), and Snakemake's sampled benchmark
    log = tmp_path / job["log"]
    log.parent.mkdir(parents=True)
    used = {"wall_s": 60.0, "cpu_s": 110.0, "rss_mb": 900.0, "worker_rss_mb": 100.0, "threads": 2}
    log.write_text(f"23:20:16 INFO curate[shard-0000]: {logs.USED}{json.dumps(used)}\n", encoding="utf-8")
    bench = tmp_path / job["benchmark"]
    bench.parent.mkdir(parents=True)
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    bench.write_text(head + "61.0\t0:01:01\t1500.0\t1\t1\t1\t0\t0\t0\t80.0\n", encoding="utf-8")
    # the larger of the two for each: wall and memory from the benchmark, CPU from the job
    assert job_cost(tmp_path, job) == {"s": 61.0, "cpu_s": 110.0, "rss_mb": 1500.0}
    bench.unlink()
    assert job_cost(tmp_path, job) == {"s": 60.0, "cpu_s": 110.0, "rss_mb": pytest.approx(1100.0)}


def test_a_job_logs_what_it_used(caplog):
    import logging

    caplog.set_level(logging.INFO, logger="speechprep")
    got = logs.used(1.5, 2)
    assert got["cpu_s"] > 0 and got["rss_mb"] > 10 and got["threads"] == 2 and got["wall_s"] > 0
    assert logs.USED in caplog.text


def test_an_alternative_is_a_dotted_key_and_a_yaml_value_planned_beside_the_plan():
    assert pilot.setting("diarize.enabled=false") == {"diarize": {"enabled": False}}
    assert pilot.setting("stages=[vad, asr]") == {"stages": ["vad", "asr"]}
    assert pilot.setting("asr.batch=16") == {"asr": {"batch": 16}}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        pilot.setting("diarize.enabled")
    total = lambda cpu, jobs: {"cpu_s": cpu, "gpu_s": 0.0, "output_bytes": 100, "jobs": jobs}
    stage = {"cpu_s": 10.0, "gpu_s": 0.0, "output_bytes": 100, "jobs": 2, "peak_rss_mb": 50}
    base = {"total": total(40.0, 8), "wall_s": 20.0, "stages": {"vad": stage}, "bottleneck": "vad"}
    alt = {**base, "total": total(30.0, 6), "wall_s": 15.0, "cost": {"total": 1.5}}
    v = pilot.versus(alt, base)
    assert v["ratio"] == {"cpu_s": 0.75, "gpu_s": None, "output_bytes": 1.0, "jobs": 0.75, "wall_s": 0.75}
    assert v["cost"] == {"total": 1.5} and "peak_rss_mb" not in v["stages"]["vad"]


def test_a_run_wide_jobs_memory_grows_as_its_probe_says():
    from speechprep.workflow.pilot import Corpus, Measured, rule_costs
    from speechprep.workflow.probe import PROBED, rule_of, sizes, target

    probed = {"ingest": "ingest run", "curate_speakers": "curate speakers", "curate_duplicates": "curate duplicates"}
    assert probed == PROBED
    assert rule_of("curate speakers") == "curate_speakers" and rule_of("ingest run") == "ingest"
    # toward the corpus's size, at most the largest asked for; none where the pilot was as large
    assert sizes(5e6, 400, 1_000_000) == (333_333, 1_000_000)
    assert sizes(30_000, 400, 1_000_000) == (10_000, 30_000)
    assert sizes(1000, 400, 1_000_000) is None and sizes(5e6, 400, 0) is None
    assert target("curate_speakers", None, 9) == "results/.probe/curate_speakers/9.json"
    # the pilot's two steps: 200 and 400 segments, 200 MB each (no growth within the noise)
    bench = {"cpu_s": 2.0, "s": 2.0, "rss_mb": 200.0}
    jobs = {("curate_speakers", None, None, None): {"bench": bench, "threads": 1, "mem_mb": 1000}}
    first = Measured(segments={"a": 200}, jobs=jobs)
    m = Measured(segments={"a": 400}, jobs=jobs)
    c = Corpus(scale={"a": 2500.0}, shards={"a": 10})  # 10^6 segments
    assert rule_costs(m, first, c)["curate_speakers"]["rss_mb"] == 200.0
    # the probe: 700 MB at 10^5 segments, 1,800 MB at 10^6, read at the corpus's 10^6
    points = [(1e5, 700.0), (1e6, 1800.0)]
    c.probes[("curate_speakers", None)] = {"items": 2e6, "points": points}
    r = rule_costs(m, first, c)["curate_speakers"]
    assert r["rss_mb"] == pytest.approx(1800.0 + 1100.0 / 9e5 * 1e6)
    assert r["fits"]["run.rss_mb.probe"]["points"] == points


def test_a_shard_jobs_memory_is_its_run_on_the_longest_file_where_the_sample_missed_it():
    from speechprep.workflow.pilot import Corpus, Measured, rule_costs

    # the sample's two VAD shards peak at 170 and 176 MB; the corpus's 73 s prompt, alone: 240
    jobs = {
        ("vad", "a", f"shard-000{k}", ""): {
            "bench": {"cpu_s": 3.0, "s": 2.0, "rss_mb": mb},
            "threads": 2,
            "mem_mb": 768,
        }
        for k, mb in enumerate((170.0, 176.0))
    }
    m = Measured(segments={"a": 100}, shards={"a": 2}, jobs=jobs)
    m.shard_hours.update({("a", "shard-0000"): 0.05, ("a", "shard-0001"): 0.05})
    c = Corpus(scale={"a": 10.0}, shards={"a": 20})
    assert rule_costs(m, None, c)["vad"]["rss_mb"] == 176.0
    c.longest[("vad", "a")] = 240.0
    r = rule_costs(m, None, c)["vad"]
    assert r["rss_mb"] == 240.0 and r["fits"]["a.rss_mb.longest"] == 240.0
    assert r["jobs"] == 20 and r["cpu_s"] == pytest.approx(60.0)  # its cost is the sample's, scaled
    c.longest[("vad", "a")] = 100.0  # a longest file that takes less than a shard of the sample
    assert rule_costs(m, None, c)["vad"]["rss_mb"] == 176.0


def test_the_pilot_links_what_the_work_dir_gained_since_an_earlier_pilot(tmp_path):
    work, run = tmp_path / "work", tmp_path / "work" / ".plan" / "pilot"
    (work / "corpus").mkdir(parents=True)
    (work / "config.yaml").write_text("datasets: {}\n", encoding="utf-8")
    pilot.link_tree(work, run)
    assert (run / "corpus").resolve() == (work / "corpus").resolve() and not (run / ".plan").exists()
    # the earlier pilot made its own grammar cache; then a real run made WORK's: WORK's wins
    (run / "resources" / "text_normalization").mkdir(parents=True)
    (work / "resources" / "text_normalization").mkdir(parents=True)
    (work / "pilot.json").write_text("{}", encoding="utf-8")  # a name of the pilot's own: not linked
    pilot.link_tree(work, run)
    assert (run / "resources").is_symlink() and (run / "resources").resolve() == (work / "resources").resolve()
    assert not (run / "pilot.json").exists()
    pilot.link_tree(work, run)  # again: nothing to change


def test_reuse_stores_set_aside_come_back_where_no_job_wrote_its_own(tmp_path):
    results, aside = tmp_path / "results", tmp_path / "reuse-aside"
    for shard in ("shard-0000", "shard-0001"):
        (results / "ds" / "asr" / ".partial" / f"{shard}.reuse").mkdir(parents=True)
        (results / "ds" / "asr" / ".partial" / f"{shard}.reuse" / "items").write_text("first", encoding="utf-8")
    pilot._move_stores(results, aside)
    assert not list(results.glob("*/*/.partial*/*.reuse")) and len(list(aside.glob("*/*/.partial/*.reuse"))) == 2
    # the second step runs shard-0001's job again, which writes a store of its own
    (results / "ds" / "asr" / ".partial" / "shard-0001.reuse").mkdir(parents=True)
    (results / "ds" / "asr" / ".partial" / "shard-0001.reuse" / "items").write_text("again", encoding="utf-8")
    pilot._move_stores(aside, results)
    read = lambda s: (results / "ds" / "asr" / ".partial" / f"{s}.reuse" / "items").read_text(encoding="utf-8")
    assert (read("shard-0000"), read("shard-0001")) == ("first", "again")
    assert not list(aside.glob("*/*/.partial*/*.reuse"))


def test_diarizations_cost_follows_each_files_length_where_its_jobs_logged_it():
    from speechprep.workflow.pilot import Corpus, Measured, rule_costs

    # a file's CPU: 0.04 s + 0.03 s per second of speech + 1e-4 s per second squared
    f = lambda x: 0.04 + 0.03 * x + 1e-4 * x * x
    sample = [[2.0, 4.0, 6.0], [3.0, 5.0]]  # two shards of short files (seconds of speech)
    jobs = {
        ("diarize", "a", f"shard-000{k}", ""): {
            "bench": {"cpu_s": 0.5 + sum(map(f, xs)), "s": 0.6 + sum(map(f, xs)), "rss_mb": 300.0},
            "threads": 1,
            "mem_mb": 1000,
            "files": [[x, f(x)] for x in xs],
        }
        for k, xs in enumerate(sample)
    }
    m = Measured(hours={"a": 40 / 3600}, segments={"a": 10}, shards={"a": 2}, jobs=jobs)  # 20 s of 40 speech
    m.shard_hours.update({("a", "shard-0000"): 24 / 3600, ("a", "shard-0001"): 16 / 3600})
    files = [4.0, 8.0] * 50 + [3600.0]  # the corpus: short files and one of an hour
    by_hours = rule_costs(m, None, Corpus(scale={"a": 4200 / 40}, shards={"a": 4}))["diarize"]
    assert "a.cpu_s.files" not in by_hours["fits"]
    c = Corpus(scale={"a": 4200 / 40}, shards={"a": 4}, files={"a": files})
    c.longest_files[("diarize", "a")] = [[1800.0, f(1800.0)]]  # the longest file's job: half of it speech
    r = rule_costs(m, None, c)["diarize"]
    expected = 4 * 0.5 + sum(f(0.5 * x) for x in files)
    assert r["cpu_s"] == pytest.approx(expected, rel=1e-6) and r["cpu_s"] > 2 * by_hours["cpu_s"]
    assert r["s"] / r["cpu_s"] == pytest.approx(by_hours["s"] / by_hours["cpu_s"])
    fit = r["fits"]["a.cpu_s.files"]
    assert fit["fixed_per_job"] == pytest.approx(0.5) and fit["speech_share"] == 0.5 and fit["files"] == 5
    assert (fit["per_file"], fit["per_speech_s"], fit["per_speech_s2"]) == pytest.approx((0.04, 0.03, 1e-4), rel=1e-4)
    grown = Corpus(scale={"a": 2 * 4200 / 40}, shards={"a": 8}, files={"a": files}, grow=2.0)
    grown.longest_files.update(c.longest_files)
    assert rule_costs(m, None, grown)["diarize"]["cpu_s"] == pytest.approx(2 * expected, rel=1e-6)


def test_the_longest_file_is_diarized_alone_where_its_dataset_is_diarized():
    from speechprep.workflow.pilot import longest_rules

    cfg = {"stages": ["vad", "asr"], "diarize": {"enabled": "auto"}, "ingest": {"text": "asr"}}
    cfg["datasets"] = {"calls": {"audio_dir": "a"}, "read": {"manifest": "m.jsonl"}, "one": {"audio_dir": "b"}}
    cfg["datasets"]["one"]["single_speaker"] = True
    assert [longest_rules(cfg, d) for d in ("calls", "read", "one")] == [["vad", "diarize"], ["vad"], ["vad"]]
    assert longest_rules({**cfg, "stages": ["vad"]}, "calls") == ["vad"]  # nothing reads diarization
    assert longest_rules({**cfg, "stages": ["asr"]}, "calls") == []


def test_a_jobs_fixed_part_is_what_it_logged_ready_where_the_pilots_jobs_cannot_tell_it():
    from speechprep.workflow.pilot import Corpus, Measured, rule_costs

    # two ASR jobs of one size: 35 CPU-s until the model is loaded, then 1,700 per audio hour
    jobs = {
        ("asr", "a", f"shard-000{k}", ""): {
            "bench": {"cpu_s": 35.0 + 1700 * 0.0143, "s": 40.0 + 1800 * 0.0143, "rss_mb": 4000.0},
            "threads": 2,
            "mem_mb": 6656,
            "ready": {"cpu_s": 35.0, "wall_s": 40.0},
        }
        for k in range(2)
    }
    m = Measured(hours={"a": 0.0286}, segments={"a": 40}, shards={"a": 2}, jobs=jobs)
    m.shard_hours.update({("a", "shard-0000"): 0.0143, ("a", "shard-0001"): 0.0143})
    c = Corpus(scale={"a": 0.25 / 0.0286}, shards={"a": 13})  # 0.25 h in 13 shards
    r = rule_costs(m, None, c)["asr"]
    assert r["fits"]["cpu_s"] == {"fixed": 35.0, "per_audio_hour": 1700.0}
    assert r["cpu_s"] == pytest.approx(13 * 35.0 + 1700 * 0.25) and r["s"] == pytest.approx(13 * 40.0 + 1800 * 0.25)
    for j in jobs.values():  # without it: proportional, each fixed part scaled with the hours
        del j["ready"]
    assert rule_costs(m, None, c)["asr"]["cpu_s"] == pytest.approx((35.0 + 1700 * 0.0143) * 2 * 0.25 / 0.0286)


def test_the_pilots_segments_are_vads_segment_lines_not_its_rejects_or_stats(tmp_path):
    from speechprep.io.jsonio import write_jsonl

    vad = tmp_path / "results" / "a" / "vad"
    write_jsonl(vad / "shard-0000.segments.jsonl", [{"id": f"s{k}"} for k in range(3)])
    write_jsonl(vad / "shard-0000.rejects.jsonl", [{"id": "bad", "reason": "unreadable"}])
    write_jsonl(vad / "shard-0000.stats.jsonl", [{"id": "f0"}, {"id": "f1"}])
    assert pilot.measure(tmp_path, ["a"]).segments == {"a": 3}
