"""Speaker clustering: real voices, the four demo voices, named speakers, synthetic speakers
at scale, and one speaker id space across the datasets of a run."""

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import Run, params, whole_clips

from speechprep.curate import stage
from speechprep.curate.speakers import (
    CLUSTER_PREFIX,
    assign_speakers,
    assign_speakers_by_file,
    cluster_sample,
    load_prior,
    purity,
)
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.io.npyio import load_named_rows
from tests import real_speech


def synthetic(n_speakers, per, dim=256, spread=0.3, seed=0):
    """Gaussian speakers on the unit sphere: centres uniform, points centre + noise, normalised."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((n_speakers, dim))
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    who = np.repeat(np.arange(n_speakers), per)
    x = c[who] + spread * rng.standard_normal((len(who), dim)) / np.sqrt(dim)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), who


def test_four_demo_voices_are_four_clusters(tmp_path, models):
    clips = whole_clips()  # 16 clean clips, 4 voices
    run = Run(tmp_path, [[{k: v for k, v in c.items() if k != "voice"} for c in clips]])
    run.measure(models=models)
    report = run.speakers()
    assert report["speakers"] == 4
    assign = {a["id"]: a["speaker"] for a in read_jsonl(run.f("shard-0000", "speakers.jsonl"))}
    by_voice = {}
    for c in clips:
        by_voice.setdefault(c["voice"], set()).add(assign[c["id"]])
    assert all(len(s) == 1 for s in by_voice.values())  # one cluster per voice
    assert len(set.union(*by_voice.values())) == 4  # and four different ones
    assert all(a.startswith(CLUSTER_PREFIX) for a in assign.values())


def test_synthetic_speakers_from_a_sample():
    x, who = synthetic(40, 50)
    p = params("speakers", speaker_sample=600, speaker_chunk=257)
    spk = assign_speakers(
        lambda idx: x[idx],
        len(x),
        256,
        [None] * len(x),
        p,
    )
    assert len(spk.names) == 40
    # each true speaker maps to one label and each label to one speaker
    pairs = set(zip(who.tolist(), spk.label.tolist(), strict=False))
    assert len(pairs) == 40
    assert spk.distance.max() < p.speaker_threshold
    assert np.allclose(np.linalg.norm(spk.centroids, axis=1), 1, atol=1e-5)
    # chunking changes nothing
    one = assign_speakers(
        lambda idx: x[idx],
        len(x),
        256,
        [None] * len(x),
        replace(p, speaker_chunk=len(x)),
    )
    assert (one.label == spk.label).all() and np.allclose(one.distance, spk.distance, atol=1e-6)


def test_named_speakers_kept_and_others_clustered():
    x, who = synthetic(3, 20, seed=1)
    given = [f"spk{w}" if w == 0 else None for w in who]
    p = params("speakers")
    spk = assign_speakers(
        lambda idx: x[idx],
        len(x),
        256,
        given,
        p,
    )
    names = [spk.names[k] for k in spk.label]
    assert names[:20] == ["spk0"] * 20
    assert len(set(names[20:40])) == 1 and len(set(names[40:])) == 1 and names[20] != names[40]
    assert spk.names == ["spk0", f"{CLUSTER_PREFIX}0000", f"{CLUSTER_PREFIX}0001"]


def test_small_sample_clusters_are_dissolved():
    x, _ = synthetic(3, 10, seed=2)
    lone = synthetic(1, 1, seed=3)[0]
    c, found = cluster_sample(np.concatenate([x, lone]), 0.16, "average", 2)
    assert found == 4 and len(c) == 3


def test_speakers_by_file_pool_a_files_segments_and_keep_given_names():
    from speechprep.curate.speakers import assign_speakers_by_file

    x, who = synthetic(4, 30, spread=1.2, seed=3)  # noisy segments: alone they scatter
    files = [f"f{i // 3:03d}" for i in range(len(x))]  # 3 consecutive segments of one speaker per file
    given = [None] * len(x)
    given[0] = "narrator"  # a given name wins for its segment
    p = params("speakers")
    spk = assign_speakers_by_file(
        lambda idx: x[idx],
        files,
        256,
        given,
        replace(p, speaker_threshold=0.5),
    )
    names = [spk.names[k] for k in spk.label]
    assert names[0] == "narrator"
    for f in set(files):  # every other segment shares its file's speaker
        assert len({n for n, g, ff in zip(names, given, files) if ff == f and g is None}) == 1
    assert len(spk.distance) == len(x) and (spk.distance >= 0).all()


def test_speakers_by_file_are_the_clusters_of_the_file_vectors():
    """A file of one segment counts as that segment, a file of several as their normalised
    mean; files interleaved across the segment order, small chunks: the same speakers and
    centroids as clustering those file vectors directly."""
    from speechprep.curate.speakers import assign_speakers_by_file

    x, _ = synthetic(5, 40, spread=1.0, seed=4)
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 5, 120)
    files = np.repeat([f"f{k:03d}" for k in range(len(sizes))], sizes)[: len(x)]
    files = list(files[rng.permutation(len(files))])
    x = x[: len(files)]
    p = params("speakers")
    q = replace(p, speaker_threshold=0.5, speaker_min_size=2, speaker_chunk=7)
    spk = assign_speakers_by_file(lambda idx: x[idx], files, 256, [None] * len(x), q)
    names = sorted(set(files))
    assert sum(files.count(f) == 1 for f in names) > 10 and sum(files.count(f) > 2 for f in names) > 10
    vec = np.stack([x[[i for i, f in enumerate(files) if f == name]].astype(np.float64).mean(0) for name in names])
    vec = (vec / np.linalg.norm(vec, axis=1, keepdims=True)).astype(np.float32)
    ref = assign_speakers(lambda idx: vec[idx], len(names), 256, [None] * len(names), replace(q, speaker_chunk=1000))
    index = {name: k for k, name in enumerate(names)}
    assert len(spk.names) == len(ref.names) > 1
    assert (spk.label == ref.label[[index[f] for f in files]]).all()
    assert np.allclose(spk.centroids, ref.centroids, atol=1e-5)


@pytest.fixture(scope="session")
def real_voices(models):
    """Real voices of different people with many recordings each (``real_speech.distinct_voices``:
    20 klettres clips a language), and their Resemblyzer vectors, embedded once."""
    utts = real_speech.distinct_voices(20)
    embs = models.speaker([real_speech.read(u.path, 16000)[0] for u in utts])
    keep = [k for k, e in enumerate(embs) if isinstance(e, np.ndarray)]
    return [utts[k] for k in keep], np.stack([embs[k] for k in keep]).astype(np.float32)


def by_file(x, files, linkage, threshold):
    p = params("speakers")
    q = replace(p, speaker_linkage=linkage, speaker_threshold=threshold)
    return assign_speakers_by_file(lambda idx: x[idx], files, x.shape[1], [None] * len(x), q)


def test_real_voices_of_many_files_are_one_speaker_each(real_voices):
    """11 real voices, 5 to 8 files each (klettres clips 5 to a file): the defaults give each
    voice one speaker of its own; complete linkage at 0.26 split one of them."""
    utts, x = real_voices
    truth = [u.speaker for u in utts]
    files = real_speech.as_files(utts, 5)
    p = params("speakers")
    spk = by_file(x, files, p.speaker_linkage, p.speaker_threshold)
    assert purity(truth, spk.label.tolist()) == (1.0, 1.0)
    assert len(spk.names) == len(set(truth)) == 11
    complete = by_file(x, files, "complete", 0.26)
    assert purity(truth, complete.label.tolist())[1] < 1.0 and len(complete.names) > 11


def _dataset(root, name, utts, x, files):
    """A dataset's one shard as the measure job writes it: measurement lines and embeddings."""
    write_jsonl(
        root / name / "shard-0000.measures.jsonl", [{"id": f"{name}-{k}", "file_id": f} for k, f in enumerate(files)]
    )
    np.save(root / name / "shard-0000.embeddings.npy", x)
    return [{"id": f"{name}-{k}", "voice": u.speaker} for k, u in enumerate(utts)]


def test_one_voice_in_two_datasets_is_one_speaker(tmp_path, real_voices):
    """The French klettres speaker's letters in dataset a, syllables in b (files named alike in
    both); other voices in one each: one id for her in both, every other voice its own, and a
    split by speaker puts all of her on one side."""
    from speechprep.tts.manifests import is_val

    utts, x = real_voices
    fr = [k for k, u in enumerate(utts) if u.speaker == "klettres_fr"]
    a_idx = fr[:10] + [k for k, u in enumerate(utts) if u.speaker in ("librivox_reader", "klettres_en")]
    b_idx = fr[10:] + [k for k, u in enumerate(utts) if u.speaker in ("alsa_voice", "klettres_he")]
    segs = []
    for name, idx in (("a", a_idx), ("b", b_idx)):
        sub = [utts[k] for k in idx]
        names = real_speech.as_files(sub, 5)
        files = [f"f{sorted(set(names)).index(f)}" for f in names]  # f0, f1, ... in both datasets
        segs.append(_dataset(tmp_path, name, sub, x[idx], files))
    files = stage.SpeakerFiles(
        ["a", "b"],
        [1, 1],
        [str(tmp_path / d / "shard-0000.measures.jsonl") for d in "ab"],
        [str(tmp_path / d / "shard-0000.embeddings.npy") for d in "ab"],
        [str(tmp_path / d / "assign" / "shard-0000.jsonl") for d in "ab"],
        [str(tmp_path / d / "speaker_clusters.json") for d in "ab"],
    )
    centroids, clusters = str(tmp_path / "all" / "speakers"), str(tmp_path / "all" / "speaker_clusters.json")
    report = stage.run_speakers(files, centroids, clusters, params("speakers"))
    got = {}
    for d, lines in zip("ab", segs, strict=True):
        assign = {a["id"]: a["speaker"] for a in read_jsonl(tmp_path / d / "assign" / "shard-0000.jsonl")}
        assert set(assign) == {s["id"] for s in lines}
        for s in lines:
            got.setdefault(s["voice"], set()).add(assign[s["id"]])
    assert all(len(ids) == 1 for ids in got.values()), got  # one id per voice, across datasets too
    assert len(set.union(*got.values())) == 5  # five voices, five ids
    assert report["speakers"] == 5 and report["speakers_in_several_datasets"] == 1
    (fr_id,) = got["klettres_fr"]
    for d, voices in (
        ("a", ("klettres_fr", "librivox_reader", "klettres_en")),
        ("b", ("klettres_fr", "alsa_voice", "klettres_he")),
    ):
        own = json.loads((tmp_path / d / "speaker_clusters.json").read_text(encoding="utf-8"))
        assert {c["speaker"] for c in own["centroids"]} == {next(iter(got[v])) for v in voices}
        assert own["segments"] == len(segs["ab".index(d)])
    run = json.loads((tmp_path / "all" / "speaker_clusters.json").read_text(encoding="utf-8"))
    (line,) = [c for c in run["centroids"] if c["speaker"] == fr_id]
    assert line["datasets"] == {"a": 10, "b": len(fr) - 10}
    # the TTS split by speaker (a hash of the id, per dataset): no voice on both sides of the run's split
    side = {"train": set(), "val": set()}
    for d in "ab":
        for a in read_jsonl(tmp_path / d / "assign" / "shard-0000.jsonl"):
            side["val" if is_val(a["speaker"], 0.5) else "train"].add(a["speaker"])
    assert fr_id in side["train"] | side["val"] and not side["train"] & side["val"]


def test_a_diarized_files_local_speakers_are_items_of_their_own(tmp_path, real_voices):
    """Conversations: three files hold two real voices each, told apart by the
    diarization (``diarize_speaker`` spk0/spk1 on their lines); other files one voice each.
    Pooled by ``<file id>#<diarize_speaker>``, every voice gets one run id in every file it
    speaks in, and the two voices of a conversation two ids. Pooled by file alone, a
    conversation is one item: its two voices would share an id."""
    utts, x = real_voices
    clips = {}
    for k, u in enumerate(utts):
        clips.setdefault(u.speaker, []).append(k)
    v = [s for s in ("klettres_fr", "klettres_en", "klettres_he", "klettres_lt") if len(clips.get(s, [])) >= 15]
    assert len(v) == 4, sorted(clips)
    rows, lines = [], []

    def add(file_id, voice, local=None, n=5):
        for k in [clips[voice].pop() for _ in range(n)]:
            lines.append({"id": f"{file_id}_{len(lines):04d}", "file_id": file_id, "voice": voice})
            if local:
                lines[-1]["diarize_speaker"] = local
            rows.append(k)

    for c, (a, b) in enumerate(((v[0], v[1]), (v[1], v[2]), (v[2], v[3]))):
        add(f"conv{c}", a, "spk0")
        add(f"conv{c}", b, "spk1")
    for s in v:
        add(f"alone_{s}", s)
    got = {}
    for pooled in ("diarized", "by file"):
        d = tmp_path / pooled
        own = [
            {k: val for k, val in line.items() if k != "voice" and (pooled == "diarized" or k != "diarize_speaker")}
            for line in lines
        ]
        write_jsonl(d / "shard-0000.measures.jsonl", own)
        np.save(d / "shard-0000.embeddings.npy", x[rows])
        files = stage.SpeakerFiles(
            ["ds"],
            [1],
            [str(d / "shard-0000.measures.jsonl")],
            [str(d / "shard-0000.embeddings.npy")],
            [str(d / "assign" / "shard-0000.jsonl")],
            [str(d / "clusters.json")],
        )
        stage.run_speakers(files, str(d / "speakers"), str(d / "run.json"), params("speakers"))
        assign = {a["id"]: a["speaker"] for a in read_jsonl(d / "assign" / "shard-0000.jsonl")}
        got[pooled] = {}
        for line in lines:
            got[pooled].setdefault(line["voice"], set()).add(assign[line["id"]])
    assert all(len(ids) == 1 for ids in got["diarized"].values()), got["diarized"]
    assert len(set.union(*got["diarized"].values())) == 4  # four voices, four ids, in every file
    assert any(len(ids) > 1 for ids in got["by file"].values())  # a conversation as one item mixes its voices


def _one_dataset(root, utts, x, files):
    """A run of one dataset (one shard) through the speakers job: its segments' assignments."""
    lines = _dataset(root, "a", utts, x, files)
    sf = stage.SpeakerFiles(
        ["a"],
        [1],
        [str(root / "a" / "shard-0000.measures.jsonl")],
        [str(root / "a" / "shard-0000.embeddings.npy")],
        [str(root / "a" / "assign" / "shard-0000.jsonl")],
        [str(root / "a" / "speaker_clusters.json")],
    )
    centroids, report = str(root / "all" / "speakers"), str(root / "all" / "speaker_clusters.json")
    stage.run_speakers(sf, centroids, report, params("speakers"), str(root / "all" / "speaker_centroids.npy"))
    by_id = {a["id"]: a for a in read_jsonl(root / "a" / "assign" / "shard-0000.jsonl")}
    return [{**by_id[s["id"]], "voice": s["voice"], "file": f} for s, f in zip(lines, files, strict=True)]


def test_a_grown_corpus_keeps_its_speakers_and_new_files_join_them(tmp_path, real_voices):
    """Corpus growth: a run over 8 real voices, then the same files plus new files of
    two of those voices and of three voices never heard. Every old segment keeps its speaker
    id and its distance to the byte; a new file of an old voice gets that voice's id; each new
    voice gets a new id of its own. `speaker_recluster` (or other clustering settings) makes
    them anew."""
    utts, x = real_voices
    voices = sorted({u.speaker for u in utts})
    old_voices, new_voices = voices[:8], voices[8:]
    names = real_speech.as_files(utts, 5)
    old_files = sorted({f for f, u in zip(names, utts, strict=True) if u.speaker in old_voices})
    held = {f for f in old_files if f.endswith(("4", "5", "6", "7"))}  # a few files of the old voices come later
    first_idx = [k for k, f in enumerate(names) if f in set(old_files) - held]
    first = _one_dataset(tmp_path, [utts[k] for k in first_idx], x[first_idx], [names[k] for k in first_idx])
    assert purity([s["voice"] for s in first], [s["speaker"] for s in first]) == (1.0, 1.0)
    table = lambda: load_named_rows(tmp_path / "all" / "speaker_centroids.npy")
    first_names, first_rows = table()
    grown_idx = first_idx + [k for k, f in enumerate(names) if f in held or utts[k].speaker in new_voices]
    grown = _one_dataset(tmp_path, [utts[k] for k in grown_idx], x[grown_idx], [names[k] for k in grown_idx])
    assert grown[: len(first)] == first  # every old line as it was: id, speaker, distance
    id_of = {s["voice"]: s["speaker"] for s in first}
    later = grown[len(first) :]
    assert {s["speaker"] for s in later if s["voice"] in old_voices} <= set(id_of.values())
    assert all(s["speaker"] == id_of[s["voice"]] for s in later if s["voice"] in old_voices)
    fresh = {s["voice"]: s["speaker"] for s in later if s["voice"] in new_voices}
    assert len(set(fresh.values())) == len(new_voices) and not set(fresh.values()) & set(id_of.values())
    assert purity([s["voice"] for s in grown], [s["speaker"] for s in grown]) == (1.0, 1.0)
    # the centroids the RTTM jobs read: the old speakers' rows as they were, the new voices' after
    grown_names, grown_rows = table()
    assert grown_names[: len(first_names)] == first_names == sorted(set(id_of.values()))
    assert grown_rows[: len(first_names)].tobytes() == first_rows.tobytes() and len(grown_names) == len(voices)
    # asked for (or with other settings), every segment is clustered anew
    prior = load_prior(tmp_path / "all" / "speaker_state.npz", params("speakers"))
    assert prior is not None and len(prior.names) == len(voices)
    assert load_prior(tmp_path / "all" / "speaker_state.npz", params("speakers", speaker_recluster=True)) is None
    assert load_prior(tmp_path / "all" / "speaker_state.npz", params("speakers", speaker_threshold=0.2)) is None
