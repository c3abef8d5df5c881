"""The TTS stage's jobs (:mod:`speechprep.core.jobs`)."""

from pathlib import Path

from ..core.jobs import Memory, job, shard_files, torch_threads
from .params import ManifestParams, TextIdsParams, TextParams, TokenizerParams, TtsParams


@job("tts grammars", "tts", outputs="out-dir", options="language")
def grammars(f, p):
    """Build a language's text-normalisation grammars once (nemo-text-processing cache)."""
    from ..text import spoken

    spoken.build_grammars(f.language, f.out_dir)


@job("tts normalize", "tts", TextParams, inputs="segments", outputs="out", options="grammars*")
def normalize(f, p):
    """Spoken-form text (text_normalized) of one shard's transcripts."""
    from . import normalize

    normalize.run_normalize(f.segments, f.out, p, f.grammars or ())


@job("tts tokenizer", "tts", TokenizerParams, inputs="normalized+", outputs="model", options="kept")
def tokenizer(f, p):
    """Train the SentencePiece tokenizer on every dataset's normalised transcripts (--kept: the
    folder that keeps it for a grown corpus, unless ``retrain_tokenizer``)."""
    from . import text

    text.train_normalized_tokenizer(f.normalized, p.vocab_size, f.model, f.kept, retrain=p.retrain_tokenizer)


@job(
    "tts features",
    "tts",
    TtsParams,
    inputs="segments units s2s-rejects",
    outputs="out rejects",
    options="threads? resume out-dir",
    memory=Memory(700, batch_mb_per_s=2.0, shard_mb_per_s=0.01),
)
def features(f, p):
    """Codes, condition and emotion vectors of one shard."""
    from . import features

    torch_threads(f.threads)
    arrays = {k: str(Path(f.out_dir) / k) for k in features.FEATURES}
    features.run(shard_files(f, arrays, p.layout), p, f.units, f.s2s_rejects, f.threads)


@job(
    "tts text",
    "tts",
    TextIdsParams,
    inputs="index normalized+ tokenizer",
    outputs="out rejects ids-dir phoneme-ids-dir",
)
def text_ids(f, p):
    """Text ids (and phonemes) of one shard's accepted segments (of their normalised text)."""
    from . import text

    dirs = {"text_ids": f.ids_dir, "phoneme_ids": f.phoneme_ids_dir}
    text.run_text(f.index, f.tokenizer, f.out, f.rejects, dirs, p, f.normalized)


@job(
    "tts manifest",
    "tts",
    ManifestParams,
    inputs="tokenizer features+ texts+ rejects+ asr+ units+ pins+",
    outputs="train val stats",
    options="kept* summary* caption-edges?",
)
def manifest(f, p):
    """A dataset's train/val manifests and stats.json (--kept, --summary: curation's kept lines
    and summary, when it runs; --caption-edges: the record that keeps the captions' edges
    for a grown corpus)."""
    from . import manifests

    summary = (f.summary or [None])[0]
    per_shard = (f.features, f.texts, f.rejects, f.asr, f.units)
    inputs = manifests.Inputs(*per_shard, f.tokenizer, f.kept, f.pins or [], summary, f.caption_edges)
    manifests.build_manifests(p, inputs, manifests.Outputs(f.train, f.val, f.stats))


@job("tts combined", "tts", inputs="stats-in+ train-in+ val-in+", outputs="train val stats")
def combined(f, p):
    """Train/val manifests and stats across datasets."""
    from . import manifests

    manifests.combine(f.stats_in, f.train_in, f.val_in, f.train, f.val, f.stats)
