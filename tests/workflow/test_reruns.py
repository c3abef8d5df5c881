"""A config change reruns exactly the jobs whose parameters it changes, and what reads their
outputs: each job selects its own parameters (speechprep.jobs). Dry runs over the session's
finished demo run; the expected rules are what the workflow reran before the jobs selected
their own parameters (rules/common.smk's key lists, measured with the same dry runs)."""

import re

import pytest
import yaml
from conftest import snakemake

pytestmark = pytest.mark.slow  # dry runs over the session's demo run, which they wait for (2.5 min)

WORDS = ("pitch", "speaking_rate", "monotony", "reverb", "snr")
FIVE = ["lowest", "low", "middle", "high", "highest"]
DOWNSTREAM_OF_ASR = {
    "asr_merge",
    "curate_measure",
    "curate_annotate",
    "report_annotations",
    "curate_speakers",
    "curate_duplicates",
    "curate_decide",
    "curate_summary",
    "report_curation",
    "report_plots",
    "tts_normalize",
    "tts_tokenizer",
    "tts_features",
    "tts_text",
    "tts_manifest",
    "tts_combined",
}
MEASURES_ON = {
    "curate_measure",
    "curate_speakers",
    "curate_duplicates",
    "curate_decide",
    "curate_summary",
    "report_curation",
    "report_plots",
    "tts_features",
    "tts_text",
    "tts_manifest",
    "tts_combined",
    "report_annotations",
}
MANIFESTS_ON = {"tts_manifest", "tts_combined", "report_annotations"}
DECISIONS_ON = {"curate_decide", "curate_summary", "report_curation", "report_plots"} | MANIFESTS_ON
# the demo is diarized (an audio_dir): the RTTM names the run's speakers, so it follows curate_speakers
DOWNSTREAM_OF_ASR |= {"diarize_rttm"}
MEASURES_ON |= {"diarize_rttm"}
# diarize's own keys and those it shares (speakers.threshold joins local speakers; model_failure);
# the music stage reads the diarization's segments, ASR and S2S the music stage's
DIARIZE_ON = {"diarize", "music", "asr", "s2s"} | DOWNSTREAM_OF_ASR
CHANGES = {
    "vad.threshold": ({"vad": {"threshold": 0.45}}, {"vad", "vad_merge"} | DIARIZE_ON),
    "vad.threads": ({"vad": {"threads": 1}}, set()),
    "asr.trim_pad": ({"asr": {"trim_pad": 0.2}}, {"asr"} | DOWNSTREAM_OF_ASR),
    "asr.language": ({"asr": {"language": "de"}}, {"asr"} | DOWNSTREAM_OF_ASR),
    "datasets.demo.language": ({"datasets": {"demo": {"language": "en"}}}, {"asr"} | DOWNSTREAM_OF_ASR),
    "model_failure": ({"model_failure": {"first_errors": 11}}, DIARIZE_ON),
    "speakers.diarize.threshold": ({"speakers": {"diarize": {"threshold": 0.25}}}, DIARIZE_ON),
    "diarize.threads": ({"diarize": {"threads": 1}}, set()),
    # off: the music stage reads VAD's segments again; no RTTM is asked for
    "diarize.enabled": (
        {"diarize": {"enabled": False}},
        {"music", "asr", "s2s"} | DOWNSTREAM_OF_ASR - {"diarize_rttm"},
    ),
    "music.drop_prob": ({"music": {"drop_prob": 0.6}}, {"music", "asr", "s2s"} | DOWNSTREAM_OF_ASR),
    "music.threads": ({"music": {"threads": 1}}, set()),
    "curate.max_music_prob": ({"curate": {"max_music_prob": 0.6}}, DECISIONS_ON),
    "s2s.layer": ({"s2s": {"layer": 1}}, {"s2s_export", "s2s"} | MEASURES_ON),
    "tts.layout": ({"tts": {"layout": "packed"}}, {"s2s"} | MEASURES_ON),
    "tts.vocab_size": ({"tts": {"vocab_size": 200}}, {"tts_tokenizer", "tts_text"} | MANIFESTS_ON),
    "tts.retrain_tokenizer": ({"tts": {"retrain_tokenizer": True}}, {"tts_tokenizer", "tts_text"} | MANIFESTS_ON),
    "tts.normalize": ({"tts": {"normalize": False}}, {"tts_normalize", "tts_tokenizer", "tts_text"} | MANIFESTS_ON),
    "tts.val_ratio": ({"tts": {"val_ratio": 0.2}}, MANIFESTS_ON),
    "tts.phonemes": ({"tts": {"phonemes": None}}, {"tts_text"} | MANIFESTS_ON),
    "tts.no_phonemes": ({"tts": {"no_phonemes": "keep"}}, {"tts_text"} | MANIFESTS_ON),
    "tts.captions": ({"tts": {"captions": None}}, MANIFESTS_ON),
    "tts.threads": ({"tts": {"threads": 1}}, set()),
    "curate.minhash_perm": ({"curate": {"minhash_perm": 64}}, MEASURES_ON),
    "speakers.threshold": ({"speakers": {"threshold": 0.2}}, DIARIZE_ON),
    "curate.near_duplicate_jaccard": (
        {"curate": {"near_duplicate_jaccard": 0.4}},
        {"curate_duplicates"} | DECISIONS_ON,
    ),
    "curate.min_snr_db": ({"curate": {"min_snr_db": 10}}, DECISIONS_ON),
    # the annotations' own job: DNSMOS and the speakers stay
    "curate.pitch_voicing": ({"curate": {"pitch_voicing": 0.6}}, {"curate_annotate"} | DECISIONS_ON),
    "curate.annotation_bins": (  # with five words a measure, as the config check asks
        {"curate": {"annotation_bins": 5}, "tts": {"captions": {"words": {k: FIVE for k in WORDS}}}},
        {"curate_summary", "report_curation"} | MANIFESTS_ON,
    ),
    "export.lufs": ({"export": {"lufs": -23.0}}, set()),  # export is not among the demo's stages
    "targets_per_part": ({"targets_per_part": 10000}, set()),  # the demo's targets: one part either way
}


# the run-wide checkpoints and what runs before them: while one of them is to run, the dry run
# knows the jobs up to it alone (those after it are named once it has run)
RUN_WIDE = {"curate_speakers", "curate_duplicates", "tts_tokenizer"}
BEFORE_RUN_WIDE = RUN_WIDE | {"vad", "diarize", "music", "asr", "asr_align", "s2s", "s2s_export", "curate_measure"}
BEFORE_RUN_WIDE |= {"tts_grammars", "tts_normalize"}


def merged(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def rules_to_run(output: str) -> set[str]:
    """The rules of a dry run's job table (without ``all``)."""
    table = output[output.rindex("Job stats:") :] if "Job stats:" in output else ""
    rules = set(re.findall(r"^(\w+)\s+\d+$", table, re.M)) - {"all", "total"}
    return rules


@pytest.mark.parametrize("key", list(CHANGES))
def test_a_change_reruns_exactly_its_jobs(demo, tmp_path, key):
    work, _ = demo
    change, expected = CHANGES[key]
    base = yaml.safe_load((work / "config.yaml").read_text(encoding="utf-8"))
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(merged(base, change)), encoding="utf-8")
    _, out = snakemake(work, "--dry-run", "--quiet", "rules", "--configfile", str(changed))
    shown = expected & BEFORE_RUN_WIDE if expected & RUN_WIDE else expected
    assert rules_to_run(out) == shown, out[-3000:]


def test_a_run_of_many_targets_reaches_rule_all_in_parts(demo):
    """With more targets than targets_per_part, rule all reads one marker a part (a local
    all_part job each, which only touches its marker) instead of every target: on the demo's
    finished run, parts of 7 are all that is left to run, and nothing else is asked for."""
    work, _ = demo
    _, out = snakemake(work, "--dry-run", "--quiet", "rules", "--config", "targets_per_part=7")
    assert rules_to_run(out) == {"all_part"}, out[-3000:]
    parts = int(re.search(r"^all_part\s+(\d+)$", out, re.M).group(1))
    _, whole = snakemake(work, "--dry-run", "--quiet", "rules", "--config", "targets_per_part=100000")
    assert parts > 1 and rules_to_run(whole) == set(), whole[-3000:]  # one part: the targets themselves
