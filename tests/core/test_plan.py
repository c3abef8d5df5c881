"""The pipeline's routing (speechprep.workflow.plan) on the config's defaults and variants of
it, without Snakemake: which file each step reads, what a run asks for."""

import copy
import shlex

import pytest

from speechprep.workflow.plan import Plan
from speechprep.workflow.resources import ShardContent
from tests.support import config

SHARDS = {"demo": ["shard-0000", "shard-0001"], "read": ["shard-0000"]}


def plan(cfg=None, content=None, **changes) -> Plan:
    cfg = copy.deepcopy(cfg or config())
    cfg.update(changes)
    return Plan(cfg, lambda ds: SHARDS.get(ds, ["shard-0000"]), content or (lambda ds, shard: ShardContent()))


def test_the_defaults_route_the_demo_through_diarization_and_the_read_speech_past_it():
    p = plan()
    assert p.diarized("demo") and not p.diarized("read")  # an audio_dir; a manifest of given text
    assert p.music_input("demo", "shard-0001") == "results/demo/diarize/shard-0001.segments.jsonl"
    assert p.music_input("read", "shard-0000") == "results/read/vad/shard-0000.segments.jsonl"
    # the music stage judges the segments before ASR reads them
    assert p.asr_segments("demo", "shard-0001") == "results/demo/music/shard-0001.segments.jsonl"
    assert p.asr_segments("read", "shard-0000") == "results/read/music/shard-0000.segments.jsonl"
    assert (p.asr_job("demo"), p.asr_job("read")) == ("run", "given")
    assert p.asr_job_model("read") == [] and p.asr_job_model("demo") == p.asr_model_files()
    # units cover the audio of the text: the ASR lines of a transcribed dataset, else the segments
    assert p.s2s_segments("read", "shard-0000") == "results/read/asr/shard-0000.jsonl"
    assert p.s2s_segments("demo", "shard-0000") == "results/demo/music/shard-0000.segments.jsonl"
    assert p.tts_segments("demo", "shard-0000") == "results/demo/curate/shard-0000.measures.jsonl"
    assert p.curate_kept("demo") == ["results/demo/curate/shard-0000.jsonl", "results/demo/curate/shard-0001.jsonl"]


def test_what_a_run_without_curation_or_diarization_reads():
    p = plan(stages=["vad", "asr", "tts"])
    assert p.tts_segments("demo", "shard-0000") == "results/demo/asr/shard-0000.jsonl"
    assert p.curate_kept("demo") == []
    assert p.diarize_rttm_inputs("demo", "shard-0000") == {
        "turns": "results/demo/diarize/shard-0000.turns.jsonl",
        "speakers": "results/demo/diarize/shard-0000.speakers.jsonl",
    }
    assert set(p.diarize_rttm_flags(p.diarize_rttm_inputs("demo", "shard-0000")).values()) == {""}
    assert not plan(stages=["vad"]).diarized("demo")  # nothing after VAD reads it
    off = plan()
    off.config["diarize"]["enabled"] = False
    assert off.music_input("demo", "shard-0000") == "results/demo/vad/shard-0000.segments.jsonl"
    assert off.diarize_report_files("demo") == []


def test_the_music_stage_sits_between_diarization_and_asr_where_it_runs():
    p = plan(stages=["vad", "music", "asr", "s2s", "curate", "tts"])
    assert p.music_input("demo", "shard-0001") == "results/demo/diarize/shard-0001.segments.jsonl"
    assert p.music_input("read", "shard-0000") == "results/read/vad/shard-0000.segments.jsonl"
    for ds, shard in (("demo", "shard-0001"), ("read", "shard-0000")):
        assert p.asr_segments(ds, shard) == f"results/{ds}/music/{shard}.segments.jsonl"
    assert p.s2s_segments("demo", "shard-0000") == "results/demo/music/shard-0000.segments.jsonl"
    assert p.stage_targets("demo", "music") == [
        "results/demo/music/shard-0000.segments.jsonl",
        "results/demo/music/shard-0001.segments.jsonl",
    ]
    assert "results/demo/music/shard-0000.rejects.jsonl" in p.report_inputs("demo")
    assert p.music_model_files() == []  # the signal rule, no separation: no model file
    p.config["separate"]["model"] = "models/vocals.onnx"
    p.config["music"].update(detector="onnx", model="models/tagger.onnx")
    assert p.music_model_files() == ["models/tagger.onnx", "models/vocals.onnx"]
    # without it in `stages:`, ASR reads the diarization's segments
    without = plan(stages=["vad", "asr", "s2s", "curate", "tts"])
    assert without.asr_segments("demo", "shard-0001") == "results/demo/diarize/shard-0001.segments.jsonl"
    assert "music" not in " ".join(without.all_targets() + without.report_inputs("demo"))


def test_a_transcribed_shard_with_a_long_recording_is_aligned_first():
    cfg = config()
    cfg["datasets"]["read"]["text"] = "verify"
    limit = cfg["vad"]["max_segment"]
    long, short, undated = ShardContent(1, 90.0, 90.0), ShardContent(2, 10.0, 5.0), ShardContent(1, 0, 0, 0, 1)
    for content, aligned in ((long, True), (short, False), (undated, True)):
        p = plan(cfg, lambda ds, shard, c=content: c)
        assert p.needs_align("read", "shard-0000") is aligned, (content, limit)
        expected = "utterances.jsonl" if aligned else "segments.jsonl"
        assert p.asr_items("read", "shard-0000").endswith(expected)
        assert p.asr_align_rejects("read", "shard-0000") == (
            ["results/read/asr/shard-0000.align_rejects.jsonl"] if aligned else []
        )
        assert p.asr_job_grammars("read") == p.grammar_dirs()
    # a dataset the ASR model transcribes is never aligned, whatever its lines
    assert not plan(content=lambda ds, shard: long).needs_align("demo", "shard-0000")


def test_every_target_once_and_the_stage_table_inputs():
    p = plan(stages=["vad", "asr", "s2s", "curate", "tts", "export"])
    targets = p.all_targets()
    assert len(targets) == len(set(targets))
    assert targets.count("results/_all/tts/train_manifest.jsonl") == 1
    assert "results/demo/diarize/shard-0001.rttm" in targets and "results/read/diarize/shard-0000.rttm" not in targets
    assert {"results/demo/report/curation.html", "results/read/report/curation.html"} <= set(targets)
    formats = p.config["export"]["formats"]
    assert {f"results/read/export/{f}/index.jsonl" for f in formats} <= set(targets)
    with pytest.raises(ValueError, match="unknown stage"):
        p.stage_targets("demo", "vocode")
    inputs = p.report_inputs("demo")
    assert "results/demo/benchmarks/diarize/shard-0001.tsv" in inputs  # the diarization's own step
    assert "results/read/benchmarks/diarize/shard-0000.tsv" not in p.report_inputs("read")
    assert p.diarize_report_files("demo")[:3] == [
        "results/demo/diarize/shard-0000.stats.jsonl",
        "results/demo/diarize/shard-0000.rejects.jsonl",
        "results/demo/diarize/shard-0000.rttm",
    ]


def test_models_grammars_and_the_arguments_naming_many_files():
    p = plan()
    p.config["datasets"]["odd name"] = dict(p.config["datasets"]["demo"])
    assert p.speaker_shard_counts() == [2, 1, 1]
    assign = p.speaker_assignment_files()
    assert assign[:2] == [f"results/demo/curate/speaker_assignments/shard-000{i}.jsonl" for i in (0, 1)]
    assert assign[-1] == "results/odd name/curate/speaker_assignments/shard-0000.jsonl" and len(assign) == 4
    files = p.diarize_rttm_inputs("demo", "shard-0000")
    flags = shlex.split(" ".join(p.diarize_rttm_flags(files).values()))
    assert flags == [
        "--measures", files["measures"],
        "--assign", "results/demo/curate/speaker_assignments/shard-0000.jsonl",
        "--centroids", "results/_all/curate/speaker_centroids.npy",
    ]  # fmt: skip
    p.config["s2s"]["runtime"] = "torch"
    assert p.s2s_export_files() == [] and p.s2s_export.endswith(f"-layer{p.config['s2s']['layer']}.onnx")
    p.config["tts"]["normalize"] = False
    assert p.grammar_dirs() == [] and p.asr_job_grammars("read") == []
    p.config["tts"]["condition"] = "torchscript:/models/cond.pt"
    assert p.tts_encoder_files() == ["/models/cond.pt"]
    assert p.tts_tokenizer() == (p.config["tts"].get("tokenizer") or "results/_all/tts/tokenizer.model")


def test_a_shard_job_names_its_file_of_a_run_wide_step_once_that_step_has_run():
    """The run-wide steps are checkpoints: their per-shard files are named after ``after``
    has returned (Snakemake raises there while the step has yet to run), and only once the
    ingest of every dataset they read has."""
    waited = []

    class NotYet(Exception):
        pass

    def after(step, **wildcards):
        waited.append((step, wildcards))
        if step in pending:
            raise NotYet(step)

    p, pending = plan(), set()
    p = Plan(p.config, p.shards, p.content, after=after)
    assert p.curate_decide_inputs("demo", "shard-0001") == {
        "speakers": "results/demo/curate/speaker_assignments/shard-0001.jsonl",
        "duplicates": "results/demo/curate/duplicates/shard-0001.jsonl",
    }
    assert p.diarize_rttm_inputs("demo", "shard-0000")["assign"].endswith("speaker_assignments/shard-0000.jsonl")
    p.config["tts"]["tokenizer"] = None
    assert p.tts_tokenizer() == "results/_all/tts/tokenizer.model"
    every = [("ingest", {"ds": ds}) for ds in p.config["datasets"]]
    assert waited == [
        *[("ingest", {"ds": "demo"}), ("curate_duplicates", {"ds": "demo"})],
        *every, ("curate_speakers", {}),
        *every, ("curate_speakers", {}),
        *every, ("tts_tokenizer", {}),
    ]  # fmt: skip
    assert p.run_wide_steps() == [
        [
            ("curate_speakers", {}),
            *[("curate_duplicates", {"ds": ds}) for ds in p.config["datasets"]],
            ("tts_tokenizer", {}),
        ]
    ]
    for step, call in [
        ("ingest", lambda: p.curate_decide_inputs("demo", "shard-0000")),
        ("curate_duplicates", lambda: p.curate_decide_inputs("demo", "shard-0000")),
        ("curate_speakers", lambda: p.diarize_rttm_inputs("demo", "shard-0000")),
        ("tts_tokenizer", p.tts_tokenizer),
    ]:
        pending = {step}
        with pytest.raises(NotYet):
            call()
    p.config["tts"]["tokenizer"] = "/models/sp.model"  # a given tokenizer: nothing to wait for
    assert p.tts_tokenizer() == "/models/sp.model"
    # with export: the dataset's cut of the TTS manifests, one file a shard
    p.config["stages"] = [*p.config["stages"], "export"]
    # a level of its own: its lines are cut from what the other run-wide steps' files made
    assert len(p.run_wide_steps()) == 2
    assert p.run_wide_steps()[1] == [("export_lines", {"ds": ds}) for ds in p.config["datasets"]]
    pending, waited[:] = set(), []
    assert p.export_shard_inputs("read", "shard-0000") == {
        "lines": "results/read/export/.lines/shard-0000.jsonl",
        "columns": "results/read/export/.lines/columns.json",
    }
    assert waited == [("ingest", {"ds": "read"}), ("export_lines", {"ds": "read"})]
    pending = {"export_lines"}
    with pytest.raises(NotYet):
        p.export_shard_inputs("read", "shard-0000")


def test_the_model_files_each_embedding_job_holds():
    """A lab's speaker model counts in the memory of diarization's and curation's jobs, a
    dataset's own Sortformer in its diarization's; the built-in model (in its env) in neither."""
    p = plan()
    assert p.diarize_model_files("demo") == [] and p.curate_model_files() == []
    p.config["speakers"]["model"] = "/models/titanet-l.nemo"
    p.config["diarize"]["model"] = "/models/sortformer.nemo"
    p.config["curate"]["language_model"] = "/models/ambernet.nemo"
    p.config["datasets"]["read"]["diarize_model"] = None
    assert p.diarize_model_files("demo") == ["/models/sortformer.nemo", "/models/titanet-l.nemo"]
    assert p.diarize_model_files("read") == ["/models/titanet-l.nemo"]
    assert p.curate_model_files() == ["/models/titanet-l.nemo", "/models/ambernet.nemo"]


def test_rule_all_reads_a_run_of_many_targets_in_parts():
    """Where the run has more targets than targets_per_part, rule all takes one marker a part
    (rule all_part) and the parts hold every target once, in order; at or under it, one part
    (the demo's run: rule all reads the targets themselves)."""
    p = plan()
    targets = p.all_targets()
    assert p.parts(targets) == [targets] and len(targets) <= p.config["targets_per_part"]
    p.config["targets_per_part"] = 7
    parts = p.parts(targets)
    assert [t for part in parts for t in part] == targets and {len(x) for x in parts[:-1]} == {7}
    assert p.part_marker(3) == "results/_all/all/part-00003.done"
    p.config["targets_per_part"] = None
    assert p.parts(targets) == [targets]
