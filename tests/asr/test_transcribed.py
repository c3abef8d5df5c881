"""The ASR stage of transcribed datasets: ``given`` keeps the human text and loads no model,
``verify`` checks it with the demo model on the demo voices (correct transcripts kept; swapped,
truncated and edge-padded ones dropped ``transcript_mismatch`` by curation's thresholds), and the
align job cuts a long recording with its text into utterances within a shard's other lines."""

import json
import os
import subprocess
import sys
from dataclasses import asdict

import longform  # tests/asr/longform.py: a book recording of the demo phrases
import pytest
import soundfile as sf
from shards import REPO, clean_segments, params, shard

from speechprep import jobs
from speechprep.asr import longform as align_job
from speechprep.asr.model import load_model, model_sample_rate
from speechprep.asr.params import AlignJobParams, GivenParams
from speechprep.asr.verify import VerifyStage
from speechprep.asr.words import NemoTranscriber
from speechprep.core import modelstage
from speechprep.core.modelstage import ShardFiles
from speechprep.curate.decide import failures
from speechprep.curate.params import DecideParams
from speechprep.errors import UsageError
from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests import real_speech as rs
from tests.support import config, demo_segments
from tests.support import params as config_params

DECIDE = config_params(DecideParams)


def real_lines():
    """The LibriVox reader's and the cards speaker's utterances as VAD writes them for text: given."""
    out = []
    for u in rs.librivox() + rs.cards():
        d = round(sf.info(str(u.path)).duration, 4)
        out.append({"id": f"{u.path.stem}_0000", "file_id": u.path.stem, "audio_filepath": str(u.path),
                    "offset": 0.0, "duration": d, "vad_offset": 0.0, "vad_duration": d, "text": u.text,
                    "speaker": u.speaker})  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# given: no model
# ---------------------------------------------------------------------------------------------
GIVEN_SCRIPT = """
import sys
from speechprep.cli import main
code = main(sys.argv[1:])
print("MODULES", "torch" in sys.modules, "nemo" in sys.modules)
sys.exit(code)
"""


def test_given_keeps_the_human_text_and_loads_no_model(tmp_path):
    lines = real_lines()
    first = lines[0]
    odd = [
        {**first, "id": "long_0000", "long_form": True, "duration": 600.0},  # the align job never saw it
        {**first, "id": "over_0000", "duration": 45.0},
        {**first, "id": "short_0000", "duration": 0.05},
    ]
    segs = shard(tmp_path, lines + odd)
    passed = tmp_path / "align_rejects.jsonl"
    write_jsonl(passed, [{"id": "book_0003", "file_id": "book", "audio_filepath": "/b.wav", "stage": "asr",
                          "reason": "misaligned", "detail": "not aligned"}])  # fmt: skip
    p = config_params(GivenParams)  # the job rule asr runs for a text: given dataset: no model setting
    out, rejects = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    args = ["asr", "given", "--params", json.dumps(asdict(p)),
            "--segments", str(segs), "--resume", str(tmp_path / "r.jsonl"), "--out", str(out),
            "--rejects", str(rejects), "--align-rejects", str(passed)]  # fmt: skip
    r = subprocess.run([sys.executable, "-c", GIVEN_SCRIPT, *args], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "MODULES False False" in r.stdout  # neither torch nor NeMo was imported
    got = list(read_jsonl(out))
    assert [x["text"] for x in got] == [x["text"] for x in lines]  # the human transcripts, as given
    for x in got:
        assert x["text_source"] == "given" and x["words"] is None and x["confidence"] is None
        assert "asr_model" not in x and x["speaker"] in ("librivox_reader", "cards_speaker")
    rej = list(read_jsonl(rejects))
    assert [(x["id"], x["reason"]) for x in rej] == [
        ("book_0003", "misaligned"),  # the align job's, first
        ("long_0000", "too_long"),
        ("over_0000", "too_long"),
        ("short_0000", "too_short"),
    ]
    assert "without the align job" in rej[1]["detail"] and "never cut" in rej[2]["detail"]


def test_the_given_job_has_no_model_setting():
    """Rule asr runs ``asr given`` for the demo's read dataset (text: given): its parameters are
    the two checks it makes, so a model or any other ASR setting change does not rerun it."""
    cfg = config()
    assert cfg["datasets"]["read"]["text"] == "given"
    given = json.loads(jobs.job_params("asr given", cfg, "read"))
    assert given == {"min_duration": cfg["asr"]["min_duration"], "max_duration": cfg["asr"]["max_duration"]}
    changed = {**cfg, "asr": {**cfg["asr"], "model": "/models/other.nemo", "trim": True, "language": "de"}}
    assert json.loads(jobs.job_params("asr given", changed, "read")) == given
    assert json.loads(jobs.job_params("asr run", cfg, "read"))["text"] == "given"  # the dataset's own key


# ---------------------------------------------------------------------------------------------
# verify: the demo model on the demo voices
# ---------------------------------------------------------------------------------------------
CASES = ("correct", "written", "swapped", "truncated", "padded")


def verify_cases():
    """Every clean demo phrase (VAD's padding) with its correct text, the same in written form
    where it has a number word ("the clock struck 9."), another phrase's text (swapped), its
    text without the last two words (truncated) and with two words nobody said before it (padded)."""
    segs = clean_segments()
    truth = {s["id"]: s["text"] for s in demo_segments(text=True)}
    out = []
    for i, s in enumerate(segs):
        t = truth[s["id"]]
        texts = {
            "correct": t,
            "written": longform.written(t).capitalize() + "." if longform.written(t) != t else None,
            "swapped": truth[segs[(i + 5) % len(segs)]["id"]],
            "truncated": " ".join(t.split()[:-2]),
            "padded": "and then " + t,
        }
        out += [{**s, "id": f"{s['id']}_{c}", "text": x} for c, x in texts.items() if x]
    return out


@pytest.fixture(scope="module")
def verified(tmp_path_factory, model_path, grammars_en):
    model = load_model(str(model_path), "cpu")
    tmp = tmp_path_factory.mktemp("verify")
    files = ShardFiles(str(shard(tmp, verify_cases())), str(tmp / "out.jsonl"), str(tmp / "rej.jsonl"),
                       str(tmp / "resume.jsonl"))  # fmt: skip
    p = params(model=str(model_path), text="verify")
    stage = VerifyStage(p, {"en": str(grammars_en)}, NemoTranscriber(model, True), model_sample_rate(model))
    counts = modelstage.run(stage, files)
    by_case = {}
    for x in read_jsonl(tmp / "out.jsonl"):
        by_case.setdefault(x["id"].rsplit("_", 1)[1], []).append(x)
    return counts, by_case, list(read_jsonl(tmp / "rej.jsonl"))


def edge(x):
    return max(x[f"edge_{a}_{b}"] for a in ("start", "end") for b in ("inserted", "deleted"))


def mismatch(x):
    return [r for r, _ in failures(x, None, None, DECIDE) if r == "transcript_mismatch"]


def test_verify_keeps_correct_transcripts_and_drops_wrong_ones(verified):
    """The figures per case (the demo model of the tests, 400 steps, on the 32 clean phrases;
    docs/stages/asr.md, "Transcribed datasets", has them as a table): WER 0 for the correct and the
    written texts (all kept), 0.67 to 1.5 swapped, 0.5 to 1.0 truncated, 0.25 to 0.33 padded (9
    characters inserted at the start): none of these kept."""
    counts, by_case, rejects = verified
    assert not rejects and set(by_case) == set(CASES) and counts["ok"] == sum(len(v) for v in by_case.values())
    for x in (x for v in by_case.values() for x in v):
        assert x["text_source"] == "given" and x["asr_model"] and x["words"] is not None
        assert x["text"] != x["asr_text"] or x["wer"] == 0.0
    figures = {c: [(x["wer"], x["cer"], edge(x)) for x in v] for c, v in by_case.items()}
    print({c: (min(f), max(f)) for c, f in figures.items()})
    kept = {c: sum(not mismatch(x) for x in v) for c, v in by_case.items()}
    print(kept)
    assert kept == {"correct": 32, "written": len(by_case["written"]), "swapped": 0, "truncated": 0, "padded": 0}


# ---------------------------------------------------------------------------------------------
# long recordings with their text: the align job
# ---------------------------------------------------------------------------------------------
def long_line(rec, rid="book", **extra):
    """A long recording as VAD passes it (text: given, speech over vad.max_segment)."""
    return {"id": f"{rid}_0000", "file_id": rid, "audio_filepath": str(rec.path), "offset": 0.0,
            "duration": round(rec.duration, 4), "long_form": True, "text": rec.text, **extra}  # fmt: skip


def align_params(model_path, **kw):
    return config_params(AlignJobParams, model=str(model_path), device="cpu", **kw)


def run_align(tmp, segs, p, grammars, tag="align"):
    out, rej = tmp / f"{tag}.utterances.jsonl", tmp / f"{tag}.rejects.jsonl"
    counts = align_job.run(str(shard(tmp, segs)), str(out), str(rej), str(tmp / f"{tag}.resume.jsonl"), p,
                           {"en": str(grammars)})  # fmt: skip
    return counts, list(read_jsonl(out)), list(read_jsonl(rej))


@pytest.fixture(scope="module")
def aligned(tmp_path_factory, model_path, grammars_en):
    """A 90 s book recording of the demo phrases (an unread preface and epilogue, a real voice
    announcing in the middle) between two real utterances of the shard, through the align job
    and then the shard's ASR job (text: given)."""
    tmp = tmp_path_factory.mktemp("aligned")
    announcement = [rs.read(rs.librivox()[0].path, 16000)[0]]
    rec = longform.build(tmp / "book.wav", 1.5, announcement=announcement)
    short = real_lines()[:2]
    segs = [short[0], long_line(rec, speaker="book_reader", language="en"), short[1]]
    p = align_params(model_path)
    counts, lines, rejects = run_align(tmp, segs, p, grammars_en)
    files = ShardFiles(str(tmp / "align.utterances.jsonl"), str(tmp / "asr.jsonl"), str(tmp / "asr.rejects.jsonl"),
                       str(tmp / "asr.resume.jsonl"), passed=str(tmp / "align.rejects.jsonl"))  # fmt: skip
    from speechprep.asr import given

    given.run(files, params(text="given"))
    asr_out = (list(read_jsonl(tmp / "asr.jsonl")), list(read_jsonl(tmp / "asr.rejects.jsonl")))
    return rec, segs, p, counts, lines, rejects, asr_out


def test_a_long_recording_is_cut_into_its_sentences_among_the_shards_lines(aligned):
    rec, segs, p, counts, lines, rejects, _ = aligned
    assert lines[0] == segs[0] and lines[-1] == segs[2]  # the shard's other lines pass, in place
    cut = lines[1:-1]
    assert counts["recordings"] == 1 and counts["utterances"] == len(cut) == len(rec.sentences)
    errors = []
    for u, (a, b, text) in zip(cut, rec.sentences, strict=True):
        assert u["text"] == text and u["text_source"] == "given" and u["file_id"] == "book"
        assert (u["speaker"], u["language"]) == ("book_reader", "en")
        assert u["align_score"] >= p.min_align_score and u["align_model"] == p.model
        assert len(u["align_model_sha256"]) == 64 and u["duration"] <= p.max_segment
        errors += [u["offset"] + p.start_pad - a, u["offset"] + u["duration"] - p.end_pad - b]
    errors = sorted(abs(e) for e in errors)
    assert errors[len(errors) // 2] <= 0.2  # median boundary error against the true sentence bounds


def test_unread_text_and_untranscribed_audio_are_rejected_with_their_recording(aligned):
    rec, segs, p, counts, lines, rejects, _ = aligned
    assert all(r["stage"] == "asr" and r["file_id"] == "book" and r["reason"] == "misaligned" for r in rejects)
    unread = [r["text"] for r in rejects if "text" in r]
    preface = [s if s.endswith(".") else s + "." for s in longform.INTRO.split(". ")]
    assert unread == [*preface, longform.OUTRO]  # the preface's two sentences and the epilogue
    heard = [r for r in rejects if r["detail"].startswith("audio the text lacks")]
    a, b = rec.announcement
    assert len(heard) == 1 and a - 0.2 <= heard[0]["offset"] <= heard[0]["offset"] + heard[0]["duration"] <= b + 0.2


def test_the_asr_stage_accounts_for_every_vad_line(aligned):
    """Every VAD line ends in an ASR line or a reject: itself, or, cut from a long recording,
    by its file_id; the align job's rejects are the ASR stage's."""
    rec, segs, p, counts, lines, rejects, (asr_lines, asr_rejects) = aligned
    assert asr_rejects == rejects and [x["id"] for x in asr_lines] == [x["id"] for x in lines]
    assert all(x["text_source"] == "given" and x["words"] is None for x in asr_lines)
    ids = {x["id"] for x in asr_lines + asr_rejects}
    files = {x.get("file_id") for x in asr_lines + asr_rejects}
    for s in segs:
        assert (s["file_id"] in files) if s.get("long_form") else (s["id"] in ids)


def test_the_align_job_resumes_per_recording(tmp_path, model_path, grammars_en, monkeypatch):
    recs = [longform.build(tmp_path / f"r{k}.wav", 0.6, seed=k, intro=False, outro=False) for k in (1, 2)]
    segs = [long_line(r, f"r{k}") for k, r in zip((1, 2), recs, strict=True)]
    p = align_params(model_path)
    real, calls = align_job.align_recording, []

    def killed_on_the_second(rec, *a, **k):
        calls.append(rec["id"])
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a SIGINT would, mid-shard
        return real(rec, *a, **k)

    monkeypatch.setattr(align_job, "align_recording", killed_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        run_align(tmp_path, segs, p, grammars_en)
    assert (tmp_path / "align.resume.jsonl").exists() and not (tmp_path / "align.utterances.jsonl").exists()
    calls.clear()
    counted = lambda rec, *a, **k: calls.append(rec["id"]) or real(rec, *a, **k)
    monkeypatch.setattr(align_job, "align_recording", counted)
    counts, lines, rejects = run_align(tmp_path, segs, p, grammars_en)
    assert calls == ["r2"]  # the first recording came from the resume file
    assert {x["file_id"] for x in lines} == {"r1", "r2"} and counts["recordings"] == 2
    assert len(lines) == sum(len(r.sentences) for r in recs) and not rejects


def test_a_model_without_ctc_output_fails_the_job_naming_its_class(tmp_path, nemo_model_file, grammars_en):
    rec = longform.build(tmp_path / "r.wav", 0.6, intro=False, outro=False)
    p = align_params(nemo_model_file("tdt"))
    with pytest.raises(UsageError, match=r"EncDec\w*RNNT\w*Model has none"):
        run_align(tmp_path, [long_line(rec)], p, grammars_en)
    # a shard without a long recording never loads the model
    counts, lines, _ = run_align(tmp_path, real_lines()[:3], p, grammars_en, tag="short")
    assert counts["recordings"] == 0 and lines == real_lines()[:3]
