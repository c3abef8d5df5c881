"""The plan's pilot on a corpus in its own layout (speechprep.workflow.pilot): ``ingest items``
lists each item ingest accepts with its file and seconds and writes no audio; a dataset's
``pilot_ids`` has ingest read those source ids alone, in the source's own format, and every one
of them ends in the manifest or the rejects. Real speech: the Kaldi directory of
tests/ingest/source_layouts.py, Lhotse's own manifests and a dataset saved by ``datasets``
(tests/ingest/source_corpora.py)."""

import json
import os

import pytest
import soundfile as sf

from speechprep.ingest import stage as ingest
from speechprep.ingest.params import IngestParams
from speechprep.ingest.sources import READERS, Collect
from speechprep.ingest.sources.kaldi import sphere_seconds
from speechprep.io.jsonio import read_jsonl
from tests.ingest import source_corpora as corpora
from tests.ingest.source_layouts import kaldi_dir
from tests.support import config


def params(ds, name="k"):
    return IngestParams.from_config({**config(), "datasets": {name: ds}}, name, name=name)


def run(out, ds):
    ingest.run(params(ds), str(out / "manifest.jsonl"), str(out / "rejects.jsonl"), str(out / "shards"), threads=2)
    return {m["source_id"]: m for m in read_jsonl(out / "manifest.jsonl")}, list(read_jsonl(out / "rejects.jsonl"))


def listed(tmp_path, ds):
    out = tmp_path / "items" / "k.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    n = ingest.items(params(ds), str(out), threads=2)
    rows = list(read_jsonl(out))
    assert n == len(rows)
    return {r["id"]: r for r in rows}


def select(tmp_path, ids):
    path = tmp_path / "pilot_ids.txt"
    path.write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def kaldi(tmp_path_factory):
    d = tmp_path_factory.mktemp("kaldi") / "train"
    return d, kaldi_dir(d, bad=True, alsa=8)


def test_the_listing_is_what_ingest_accepts_with_each_items_file_and_seconds(tmp_path, kaldi):
    d, truth = kaldi
    ds = {"kaldi": str(d), "text": "given"}
    items = listed(tmp_path, ds)
    full, _ = run(tmp_path / "full", ds)
    assert set(items) == set(full) == set(truth.utterances)
    for sid, m in full.items():
        assert items[sid]["file"] == m["audio_filepath"] == truth.utterances[sid]["audio_filepath"]
        assert items[sid]["seconds"] == pytest.approx(m["duration"], abs=1e-4)
    # both channels' utterances of the two-channel SPHERE file name that one file
    assert len({r["file"] for r in items.values() if r["file"].endswith(".sph")}) == 1
    assert not (tmp_path / "items" / "audio").exists()  # a listing writes no audio


def test_pilot_ids_read_those_ids_alone_each_in_the_manifest_or_the_rejects(tmp_path, kaldi):
    d, truth = kaldi
    ds = {"kaldi": str(d), "text": "given"}
    full, full_rejects = run(tmp_path / "full", ds)
    chosen = sorted(full)[::3]
    bad = ["evil-1", "gone-1", truth.duplicate]  # a command, a missing file, an id given twice
    got, rejects = run(tmp_path / "pilot", {**ds, "pilot_ids": select(tmp_path, [*chosen, *bad, "no-such-utt"])})
    assert sorted(got) == sorted({*chosen, truth.duplicate})
    for sid, line in got.items():  # the source's own line: offsets, channels, ids as the run's
        assert line == full[sid]
    reasons = sorted((r["source_id"], r["reason"]) for r in rejects)
    want = [("evil-1", "command_not_allowed"), ("gone-1", "missing"), (truth.duplicate, "duplicate_id")]
    assert reasons == sorted([*want, ("no-such-utt", "not_in_source")])
    wanted = {*chosen, *bad, "no-such-utt"}
    assert set(got) | {r["source_id"] for r in rejects} == wanted  # every selected id accounted for
    assert {r["source_id"] for r in full_rejects} - wanted  # the rest of the corpus was not read


def test_pilot_ids_need_a_source(tmp_path):
    from speechprep.errors import UsageError

    with pytest.raises(UsageError, match="pilot_ids selects a source's ids"):
        run(tmp_path, {"manifest": str(tmp_path / "m.jsonl"), "pilot_ids": select(tmp_path, ["a"])})


def test_a_listing_leaves_a_shorten_file_undecoded_its_seconds_from_its_header(tmp_path, kaldi):
    d, truth = kaldi
    sph = next(u["audio_filepath"] for u in truth.utterances.values() if u["audio_filepath"].endswith(".sph"))
    assert sphere_seconds(sph) == pytest.approx(sf.info(sph).duration)
    s = tmp_path / "d"
    s.mkdir()
    head = b"NIST_1A\n   1024\nsample_count -i 40000\nsample_rate -i 16000\n"
    head += b"sample_coding -s26 pcm,embedded-shorten-v2.00\nend_head\n"
    (s / "x.sph").write_bytes(head.ljust(1024, b" ") + b"ajkg\x02" + bytes(64))
    (s / "wav.scp").write_text(f"x sph2pipe -f wav -p {s / 'x.sph'} |\n", encoding="utf-8")
    out = Collect(str(tmp_path / "audio"), write_audio=False)
    READERS["kaldi"](str(s), out)
    assert out.lines == [{"source_id": "x", "audio_filepath": str(s / "x.sph"), "duration": 2.5}]
    assert not (tmp_path / "audio").exists()  # neither decoded nor written
    # a selection without its recording decodes nothing either (ingest's sink drops the line)
    out = Collect(str(tmp_path / "audio"), only=frozenset({"other"}))
    READERS["kaldi"](str(s), out)
    assert [x["audio_filepath"] for x in out.lines] == [str(s / "x.sph")] and not (tmp_path / "audio").exists()


def test_a_lhotse_selection_reads_its_supervisions_alone(tmp_path):
    pytest.importorskip("lhotse")
    truth = corpora.lhotse_manifests(tmp_path / "m")
    m = tmp_path / "m"
    ds = {"lhotse": {"recordings": str(m / "recordings.jsonl.gz"), "supervisions": str(m / "supervisions.jsonl.gz")}}
    items = listed(tmp_path, ds)
    assert set(items) == set(truth)
    assert len({items[s]["file"] for s in ("call-0", "call-1")}) == 1  # one file, two supervisions
    full, _ = run(tmp_path / "full", ds)
    got, rejects = run(tmp_path / "pilot", {**ds, "pilot_ids": select(tmp_path, ["call-0", "call-1", "cards-2-sup"])})
    assert rejects == [] and sorted(got) == ["call-0", "call-1", "cards-2-sup"]
    assert all(got[s] == full[s] for s in got)  # offsets and channels as the run reads them


def test_an_hf_selection_writes_out_its_rows_audio_alone_and_a_listing_none(tmp_path):
    pytest.importorskip("datasets")
    truth = corpora.hf_saved(tmp_path / "saved", corpora.alsa_with_text(), "alsa_voice")
    ds = {"hf": {"path": str(tmp_path / "saved"), "split": "train", "text_column": "sentence"}}
    items = listed(tmp_path, ds)
    assert set(items) == set(truth)
    assert not any(os.path.exists(r["file"]) for r in items.values())  # named, not written
    for sid, r in items.items():
        assert r["seconds"] == pytest.approx(truth[sid]["duration"], abs=1e-4)
    chosen = sorted(truth)[:2]
    got, rejects = run(tmp_path / "pilot", {**ds, "pilot_ids": select(tmp_path, chosen)})
    assert rejects == [] and sorted(got) == chosen
    written = sorted(str(p) for p in (tmp_path / "pilot" / "audio").rglob("*.flac"))
    assert written == sorted(got[s]["audio_filepath"] for s in chosen)
    # the listing named each file as the run writes it, below its own folder
    named = sorted(os.path.relpath(items[s]["file"], tmp_path / "items" / "audio") for s in chosen)
    assert [os.path.relpath(w, tmp_path / "pilot" / "audio") for w in written] == named


def test_the_ingest_items_job_lists_through_the_command_line(tmp_path, kaldi):
    import subprocess
    import sys

    from speechprep.jobs import job_params

    d, truth = kaldi
    cfg = {**config(), "datasets": {"k": {"kaldi": str(d)}}}
    out = tmp_path / "items.jsonl"
    given = job_params("ingest items", cfg, "k", name="k")
    cmd = [sys.executable, "-m", "speechprep", "ingest", "items", "--params", given, "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert {json.loads(x)["id"] for x in out.read_text(encoding="utf-8").splitlines()} == set(truth.utterances)


def test_a_common_voice_selection_checks_its_own_clips_alone(tmp_path):
    from tests.ingest.source_layouts import common_voice_dir

    truth = common_voice_dir(tmp_path / "cv" / "en", bad=True)
    ds = {"common_voice": str(tmp_path / "cv" / "en"), "text": "given", "probe": True}
    chosen = sorted(truth.utterances)[:2]
    got, rejects = run(tmp_path / "pilot", {**ds, "pilot_ids": select(tmp_path, chosen)})
    assert sorted(got) == chosen and rejects == []  # the missing clip outside the selection: not looked for
    got, rejects = run(tmp_path / "gone", {**ds, "pilot_ids": select(tmp_path, ["common_voice_en_gone.mp3"])})
    assert got == {} and [(r["source_id"], r["reason"]) for r in rejects] == [("common_voice_en_gone.mp3", "missing")]
