"""The curation stage's jobs (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import Memory, job, shard_files, torch_threads
from .params import AnnotateParams, DecideParams, DuplicateParams, MeasureParams, SpeakerParams, SummaryParams


@job(
    "curate measure",
    "curate",
    MeasureParams,
    inputs="segments units",
    outputs="out embeddings minhash fingerprint rejects",
    options="threads? resume",
    memory=Memory(1950, batch_mb_per_s=2.0, shard_mb_per_s=0.01, host_mb_per_s=2.0),  # DNSMOS runs on the CPU
)
def measure(f, p):
    """DNSMOS, loudness, SNR, bandwidth, rates, speaker embedding and hashes of one shard."""
    from . import measure

    torch_threads(f.threads)
    measure.run(shard_files(f), p, f.units, f.embeddings, f.minhash, f.fingerprint, f.threads)


@job(
    "curate annotate",
    "curate",
    AnnotateParams,
    inputs="segments",
    outputs="out rejects",
    options="threads? resume",
    # per audio second: what it keeps per line of its shard (1.4-2.3 MB per 1,000 lines: under 1 MB an hour
    # of VAD's segments; bench/workflow/shard_memory.py), with room for shorter utterances
    memory=Memory(700, batch_mb_per_s=0.5, shard_mb_per_s=0.002),
)
def annotate(f, p):
    """Pitch, monotony and reverberation of one shard's segments, for the captions."""
    from . import annotate

    annotate.run(shard_files(f), p, f.threads)


@job(
    "curate speakers",
    "curate",
    SpeakerParams,
    inputs="measures+ embeddings+",
    outputs="dataset-clusters+ centroids-dir clusters centroids",
    options="datasets+ shard-counts+ assign+",
    probe="curate.probe:speakers",
)
def speakers(f, p):
    """Pseudo speakers of every dataset of a run, one id space (--shard-counts: how many of the
    --measures, --embeddings and --assign files are each of --datasets's; --dataset-clusters: one each)."""
    from . import stage

    files = stage.SpeakerFiles(f.datasets, f.shard_counts, f.measures, f.embeddings, f.assign, f.dataset_clusters)
    stage.run_speakers(files, f.centroids_dir, f.clusters, p, f.centroids)


@job(
    "curate duplicates",
    "curate",
    DuplicateParams,
    inputs="measures+ minhash+ fingerprint+",
    options="out+ seen",
    probe="curate.probe:duplicates",
)
def duplicates(f, p):
    """Exact, acoustic and near duplicates across every shard of a dataset (--out: one per
    --measures; --seen: the ids earlier runs searched, whose copies stay kept)."""
    from . import stage

    stage.run_duplicates(f.measures, f.minhash, f.out, p, fingerprint=f.fingerprint, seen=f.seen)


@job(
    "curate decide",
    "curate",
    DecideParams,
    inputs="measures measure-rejects annotations speakers duplicates exclude*",
    outputs="out rejects",
)
def decide(f, p):
    """Keep or reject each measured segment of one shard, with its tier and annotations
    (--exclude: the run's exclude file, whose speakers are rejected `excluded`)."""
    from . import stage

    exclude = (f.exclude or [None])[0]
    inputs = (f.measures, f.measure_rejects, f.speakers, f.duplicates)
    stage.run_decide(*inputs, f.out, f.rejects, p, exclude, annotations=f.annotations)


@job(
    "curate summary",
    "curate",
    SummaryParams,
    inputs="kept+ rejects+ clusters",
    outputs="summary speakers",
    options="removed",
)
def summary(f, p):
    """A dataset's curate/summary.json (counts; the annotations' bins) and speakers.jsonl
    (--removed: the dataset's ledger, where the segments of excluded speakers get a line)."""
    from . import stage

    stage.run_summary(f.kept, f.rejects, f.clusters, f.summary, f.speakers, p, f.removed)


@job("curate calibrate", "curate", options="configfile* manifest out split? threads?")
def calibrate(f, p):
    """Choose curation's thresholds (curate.max_music_prob, min_snr_db, min_dnsmos_ovrl and the
    tier edges) on one part of a labelled sample (lines: audio_filepath, optional offset/duration,
    label: keep or a drop reason, source or speaker) and report each drop's precision and recall
    on the other, split by source; write them as a curate: block a further --configfile takes."""
    from . import calibrate

    calibrate.run(f.configfile or [], f.manifest, f.out, f.split or "auto", int(f.threads or 1))
