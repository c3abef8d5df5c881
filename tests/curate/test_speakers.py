"""Speaker clustering: the four demo voices, named speakers, and synthetic speakers at scale."""

import numpy as np
from conftest import Run, params, whole_clips

from speechprep.curate.speakers import CLUSTER_PREFIX, assign_speakers, cluster_sample
from speechprep.jsonio import read_jsonl


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
        p.speaker_sample,
        p.speaker_threshold,
        p.speaker_linkage,
        p.speaker_min_size,
        p.speaker_seed,
        p.speaker_chunk,
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
        p.speaker_sample,
        p.speaker_threshold,
        p.speaker_linkage,
        p.speaker_min_size,
        p.speaker_seed,
        len(x),
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
        p.speaker_sample,
        p.speaker_threshold,
        p.speaker_linkage,
        p.speaker_min_size,
        p.speaker_seed,
        p.speaker_chunk,
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
        p.speaker_sample,
        0.5,
        p.speaker_linkage,
        p.speaker_min_size,
        p.speaker_seed,
        p.speaker_chunk,
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
    spk = assign_speakers_by_file(
        lambda idx: x[idx], files, 256, [None] * len(x), p.speaker_sample, 0.5, p.speaker_linkage, 2, p.speaker_seed, 7
    )
    names = sorted(set(files))
    assert sum(files.count(f) == 1 for f in names) > 10 and sum(files.count(f) > 2 for f in names) > 10
    vec = np.stack([x[[i for i, f in enumerate(files) if f == name]].astype(np.float64).mean(0) for name in names])
    vec = (vec / np.linalg.norm(vec, axis=1, keepdims=True)).astype(np.float32)
    ref = assign_speakers(
        lambda idx: vec[idx],
        len(names),
        256,
        [None] * len(names),
        p.speaker_sample,
        0.5,
        p.speaker_linkage,
        2,
        p.speaker_seed,
        1000,
    )
    index = {name: k for k, name in enumerate(names)}
    assert len(spk.names) == len(ref.names) > 1
    assert (spk.label == ref.label[[index[f] for f in files]]).all()
    assert np.allclose(spk.centroids, ref.centroids, atol=1e-5)
